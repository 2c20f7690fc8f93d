// Many small dense SPD solves, one thread per task: the setup of the sparse
// approximate inverses. Task t has the index set P = pcol[pptr[t] .. pptr[t+1])
// (ascending, m <= M entries); the thread gathers S = B[P, P] from the CSR
// matrix B (ascending columns per row), factors S = L L^T (Cholesky) and solves
// S x = rhs on the same positions. info[t] = 0, or j+1 when pivot j is not
// positive (S is not positive definite); x is then left unwritten.
// L is packed row by row: L(i, j), j <= i, at i*(i+1)/2 + j.

template <int M>
__global__ void local_cholesky_solve(int ntasks,
                                     const long long* __restrict__ pptr,
                                     const int* __restrict__ pcol,
                                     const long long* __restrict__ bptr,
                                     const int* __restrict__ bcol,
                                     const double* __restrict__ bval,
                                     const double* __restrict__ rhs,
                                     double* __restrict__ x,
                                     int* __restrict__ info)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntasks) return;
    const long long start = pptr[t];
    const int m = static_cast<int>(pptr[t + 1] - start);
    const int* P = pcol + start;
    double L[M * (M + 1) / 2];

    // Gather the lower triangle: walk row P[i] of B and P[0..i] together.
    for (int i = 0; i < m; ++i) {
        long long k = bptr[P[i]];
        const long long end = bptr[P[i] + 1];
        for (int j = 0; j <= i; ++j) {
            while (k < end && bcol[k] < P[j]) ++k;
            L[i * (i + 1) / 2 + j] = (k < end && bcol[k] == P[j]) ? bval[k] : 0.0;
        }
    }
    // Cholesky, column by column.
    for (int j = 0; j < m; ++j) {
        double d = L[j * (j + 1) / 2 + j];
        for (int k = 0; k < j; ++k) d -= L[j * (j + 1) / 2 + k] * L[j * (j + 1) / 2 + k];
        if (!(d > 0.0)) {
            info[t] = j + 1;
            return;
        }
        d = sqrt(d);
        L[j * (j + 1) / 2 + j] = d;
        for (int i = j + 1; i < m; ++i) {
            double s = L[i * (i + 1) / 2 + j];
            for (int k = 0; k < j; ++k) s -= L[i * (i + 1) / 2 + k] * L[j * (j + 1) / 2 + k];
            L[i * (i + 1) / 2 + j] = s / d;
        }
    }
    // L y = rhs, then L^T x = y (x holds y in between).
    double* out = x + start;
    for (int i = 0; i < m; ++i) {
        double s = rhs[start + i];
        for (int k = 0; k < i; ++k) s -= L[i * (i + 1) / 2 + k] * out[k];
        out[i] = s / L[i * (i + 1) / 2 + i];
    }
    for (int i = m - 1; i >= 0; --i) {
        double s = out[i];
        for (int k = i + 1; k < m; ++k) s -= L[k * (k + 1) / 2 + i] * out[k];
        out[i] = s / L[i * (i + 1) / 2 + i];
    }
    info[t] = 0;
}
