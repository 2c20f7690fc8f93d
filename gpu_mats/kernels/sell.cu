// SELL-C-sigma kernels: one thread per stored row p. Slice s = p / C holds
// rows s*C .. s*C+C-1 column-major, so entry k of row p is at
//   slice_ptr[s] + k*C + (p - s*C)
// and the C threads of a slice read contiguous values and columns. Values are
// V (double, or float for mixed precision); vectors and sums are double.
// Stored row p is original row row_of[p] (row_of == nullptr: the identity).

template <typename V>
__device__ __forceinline__ double value_at(const V* __restrict__ vals, long long at)
{
    return static_cast<double>(__ldg(vals + at));
}

// Y[j] = alpha * A X[j] + beta * Z[j] for the NV vectors j; vector j starts
// at j*ldx in X and j*ldy in Y and Z. beta == 0 never reads Z; Z may be Y.
template <typename V, int NV>
__global__ void sell_spmv(const long long* __restrict__ slice_ptr,
                          const int* __restrict__ cols,
                          const V* __restrict__ vals,
                          const int* __restrict__ row_of,
                          int nrows, int C,
                          const double* __restrict__ x, long long ldx,
                          double* y, const double* z, long long ldy,
                          double alpha, double beta)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= nrows) return;
    const int s = p / C;
    const long long end = slice_ptr[s + 1];
    long long at = slice_ptr[s] + (p - s * C);
    // Empty slice added onto itself: nothing to write (off-diagonal blocks
    // are mostly empty rows).
    if (at >= end && beta == 1.0 && z == y) return;

    double acc[NV];
#pragma unroll
    for (int j = 0; j < NV; ++j) acc[j] = 0.0;
#pragma unroll 4
    for (; at < end; at += C) {
        const int c = __ldg(cols + at);
        const double v = value_at(vals, at);
#pragma unroll
        for (int j = 0; j < NV; ++j) acc[j] = fma(v, __ldg(x + j * ldx + c), acc[j]);
    }
    const int r = row_of ? row_of[p] : p;
#pragma unroll
    for (int j = 0; j < NV; ++j) {
        double out = alpha * acc[j];
        if (beta != 0.0) out = fma(beta, z[j * ldy + r], out);
        y[j * ldy + r] = out;
    }
}

// d[r] = A[r, r] for the rows r < ndiag (padding has value 0, so it adds
// nothing even where it repeats the diagonal column).
template <typename V>
__global__ void sell_diagonal(const long long* __restrict__ slice_ptr,
                              const int* __restrict__ cols,
                              const V* __restrict__ vals,
                              const int* __restrict__ row_of,
                              int nrows, int C, int ndiag, double* d)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= nrows) return;
    const int r = row_of ? row_of[p] : p;
    if (r >= ndiag) return;
    const int s = p / C;
    const long long end = slice_ptr[s + 1];
    double sum = 0.0;
    for (long long at = slice_ptr[s] + (p - s * C); at < end; at += C)
        if (cols[at] == r) sum += value_at(vals, at);
    d[r] = sum;
}
