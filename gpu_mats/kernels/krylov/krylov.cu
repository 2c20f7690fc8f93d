// w = a*x + b*y + c*z in one pass (the three-term recurrences of the s-step
// bases); y and z are not read when their coefficient is 0. w may alias y or z.
// With d non-null, also scaled = d .* w: a Jacobi preconditioner applied to the
// new basis vector in the same pass.
extern "C" __global__ void three_term(long long n, double a, const double* x, double b, const double* y,
                                      double c, const double* z, double* w, const double* d, double* scaled)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    double v = a * x[i];
    if (b != 0.0) v = fma(b, y[i], v);
    if (c != 0.0) v = fma(c, z[i], v);
    w[i] = v;
    if (d != nullptr) scaled[i] = d[i] * v;
}

// One step of Chebyshev-Jacobi smoothing in one pass: d = a*d + b*inv_diag.*r
// (d not read when a is 0), then x += d.
extern "C" __global__ void chebyshev_step(long long n, double a, double b, const double* r, const double* inv_diag,
                                          double* d, double* x)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    double v = b * inv_diag[i] * r[i];
    if (a != 0.0) v = fma(a, d[i], v);
    d[i] = v;
    x[i] += v;
}

// y = A x for a dense row-major A (m, n): one warp per row, the lanes' partial
// sums added by shuffles. A kernel, not cuBLAS, so that a CUDA graph can
// capture it (the coarsest level's solve inside gpu_mats.amg's cycle).
extern "C" __global__ void dense_matvec(long long m, long long n, const double* A, const double* x, double* y)
{
    const long long row = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= m) return;  // the whole warp leaves together
    double sum = 0.0;
    for (long long j = lane; j < n; j += 32) sum = fma(A[row * n + j], x[j], sum);
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[row] = sum;
}
