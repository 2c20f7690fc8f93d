// Preconditioned CG with its scalars in device memory (see __init__.py).
// s = {rz, alpha, beta, flag, row, go, target, divergence, reference}. Dot products: partial_dots leaves one sum per
// block of a grid-stride loop, sum_partials adds them in one block; both in a
// fixed order, so that every run gives the same bits.

#define BLOCK 256
#define SUM_BLOCK 1024

__device__ void block_sum3(double (*cache)[BLOCK], double a0, double a1, double a2)
{
    const int t = threadIdx.x;
    cache[0][t] = a0;
    cache[1][t] = a1;
    cache[2][t] = a2;
    __syncthreads();
    for (int half = BLOCK / 2; half > 0; half >>= 1) {
        if (t < half) {
            cache[0][t] += cache[0][t + half];
            cache[1][t] += cache[1][t + half];
            cache[2][t] += cache[2][t + half];
        }
        __syncthreads();
    }
}

extern "C" __global__ void partial_dots(long long n, int pairs, const double* x0, const double* y0,
                                        const double* x1, const double* y1, const double* x2, const double* y2,
                                        double* partials)
{
    __shared__ double cache[3][BLOCK];
    double a0 = 0.0, a1 = 0.0, a2 = 0.0;
    const long long stride = static_cast<long long>(gridDim.x) * BLOCK;
    for (long long i = blockIdx.x * static_cast<long long>(BLOCK) + threadIdx.x; i < n; i += stride) {
        a0 = fma(x0[i], y0[i], a0);
        if (pairs > 1) a1 = fma(x1[i], y1[i], a1);
        if (pairs > 2) a2 = fma(x2[i], y2[i], a2);
    }
    block_sum3(cache, a0, a1, a2);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = cache[0][0];
        partials[gridDim.x + blockIdx.x] = cache[1][0];
        partials[2 * gridDim.x + blockIdx.x] = cache[2][0];
    }
}

// sums = each row of partials summed, by one block of SUM_BLOCK threads in a fixed order
__device__ void sum_rows(int count, const double* partials, double* sums)
{
    __shared__ double cache[3][SUM_BLOCK];
    const int t = threadIdx.x;
    for (int k = 0; k < 3; ++k) cache[k][t] = t < count ? partials[k * count + t] : 0.0;
    __syncthreads();
    for (int half = SUM_BLOCK / 2; half > 0; half >>= 1) {
        if (t < half)
            for (int k = 0; k < 3; ++k) cache[k][t] += cache[k][t + half];
        __syncthreads();
    }
    if (t < 3) sums[t] = cache[t][0];
    __syncthreads();
}

__device__ void alpha(double* s, const double* sums)
{
    const double pap = sums[0];
    if (s[0] == 0.0) {
        s[1] = 0.0;
    } else if (!(pap > 0.0)) {
        s[1] = 0.0;
        s[3] = 1.0;
    } else {
        s[1] = s[0] / pap;
    }
}

__device__ void beta(double* s, const double* sums, double* history, int start)
{
    const double rz = sums[0];
    s[4] = start ? 0.0 : s[4] + 1.0;
    const int row = static_cast<int>(s[4]);
    history[3 * row] = rz;
    history[3 * row + 1] = sums[1];
    history[3 * row + 2] = sums[2];
    s[2] = (start || s[0] == 0.0) ? 0.0 : rz / s[0];
    s[0] = rz;
    if (!(rz >= 0.0)) s[3] = 2.0;
}

extern "C" __global__ void sum_partials(int count, const double* partials, double* sums)
{
    sum_rows(count, partials, sums);
}

extern "C" __global__ void alpha_step(double* s, const double* sums)
{
    alpha(s, sums);
}

extern "C" __global__ void beta_step(double* s, const double* sums, double* history, int start)
{
    beta(s, sums, history, start);
}

// The sums of the partials and the step from them in one launch (one rank: no reduction between them).
extern "C" __global__ void summed_alpha_step(int count, const double* partials, double* sums, double* s)
{
    sum_rows(count, partials, sums);
    if (threadIdx.x == 0) alpha(s, sums);
}

extern "C" __global__ void summed_beta_step(int count, const double* partials, double* sums, double* s,
                                            double* history, int start)
{
    sum_rows(count, partials, sums);
    if (threadIdx.x == 0) beta(s, sums, history, start);
}

extern "C" __global__ void update_iterate(long long n, const double* s, double* x, double* r, const double* p,
                                          const double* w)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const double alpha = s[1];
    x[i] = fma(alpha, p[i], x[i]);
    r[i] = fma(-alpha, w[i], r[i]);
}

extern "C" __global__ void update_direction(long long n, const double* s, double* p, const double* z)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const double beta = s[2];
    p[i] = beta == 0.0 ? z[i] : fma(beta, p[i], z[i]);
}

extern "C" __global__ void remove_mean(long long n, const double* sums, double* v)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    v[i] -= sums[0] / static_cast<double>(n);
}
