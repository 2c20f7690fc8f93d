// One step of Chebyshev-Jacobi smoothing in one pass: d = a*d + b*inv_diag.*r
// (d not read when a is 0), then x += d. Vectors T: double, or float in a
// float32 cycle (the arithmetic in double).
template <typename T>
__global__ void chebyshev_step(long long n, double a, double b, const T* r, const T* inv_diag, T* d, T* x)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    double v = b * static_cast<double>(inv_diag[i]) * static_cast<double>(r[i]);
    if (a != 0.0) v = fma(a, static_cast<double>(d[i]), v);
    d[i] = static_cast<T>(v);
    x[i] = static_cast<T>(static_cast<double>(x[i]) + v);
}

// The first step of Chebyshev-Jacobi smoothing from x = 0: d = b*inv_diag.*r
// and x = d, x not read (no zeroing pass before).
template <typename T>
__global__ void chebyshev_start(long long n, double b, const T* r, const T* inv_diag, T* d, T* x)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const T v = static_cast<T>(b * static_cast<double>(inv_diag[i]) * static_cast<double>(r[i]));
    d[i] = v;
    x[i] = v;
}

// y = A x for a dense row-major A (m, n) of doubles: one warp per row, the
// lanes' partial sums added by shuffles. A kernel, not cuBLAS, so that a CUDA
// graph can capture it (the coarsest level's solve inside gpu_mats.amg's
// cycle); x and y are T.
template <typename T>
__global__ void dense_matvec(long long m, long long n, const double* A, const T* x, T* y)
{
    const long long row = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= m) return;  // the whole warp leaves together
    double sum = 0.0;
    for (long long j = lane; j < n; j += 32) sum = fma(A[row * n + j], static_cast<double>(x[j]), sum);
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[row] = static_cast<T>(sum);
}

// out[k] += x_k . y_k for the first `pairs` (at most 3) pairs: the inner
// products of a K-cycle's flexible CG steps, kept in device memory (no copy to
// the host, so that a CUDA graph can hold them). out must be zeroed first;
// each warp adds its partial sums atomically.
extern "C" __global__ void dot_pairs(long long n, int pairs, const double* x0, const double* y0, const double* x1,
                                     const double* y1, const double* x2, const double* y2, double* out)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0;
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += stride) {
        s0 = fma(x0[i], y0[i], s0);
        if (pairs > 1) s1 = fma(x1[i], y1[i], s1);
        if (pairs > 2) s2 = fma(x2[i], y2[i], s2);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        s0 += __shfl_down_sync(0xffffffffu, s0, offset);
        s1 += __shfl_down_sync(0xffffffffu, s1, offset);
        s2 += __shfl_down_sync(0xffffffffu, s2, offset);
    }
    if (threadIdx.x % 32 == 0) {
        atomicAdd(out, s0);
        if (pairs > 1) atomicAdd(out + 1, s1);
        if (pairs > 2) atomicAdd(out + 2, s2);
    }
}

// The two flexible CG steps of a K-cycle (Notay and Vassilevski 2008), their
// coefficients read from s = (rho1, alpha1, gamma, beta, alpha2) in device
// memory: rho1 = c1.A c1, alpha1 = c1.b, gamma = c2.A c1, beta = c2.A c2,
// alpha2 = c2.rt. A zero or negative curvature drops its step.
// rt = b - (alpha1 / rho1) v1, the residual after the first step (v1 = A c1).
extern "C" __global__ void kcycle_residual(long long n, const double* s, const double* b, const double* v1,
                                           double* rt)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const double a1 = s[0] > 0.0 ? s[1] / s[0] : 0.0;
    rt[i] = fma(-a1, v1[i], b[i]);
}

// x = (alpha1 / rho1 - a2 gamma / rho1) c1 + a2 c2, a2 = alpha2 / rho2, rho2 = beta - gamma^2 / rho1:
// the second search direction made A-orthogonal to the first.
extern "C" __global__ void kcycle_combine(long long n, const double* s, const double* c1, const double* c2,
                                          double* x)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const double rho1 = s[0], alpha1 = s[1], gamma = s[2], beta = s[3], alpha2 = s[4];
    const double a1 = rho1 > 0.0 ? alpha1 / rho1 : 0.0;
    const double g = rho1 > 0.0 ? gamma / rho1 : 0.0;
    const double rho2 = beta - g * gamma;
    const double a2 = rho2 > 0.0 ? alpha2 / rho2 : 0.0;
    x[i] = fma(a1 - a2 * g, c1[i], a2 * c2[i]);
}
