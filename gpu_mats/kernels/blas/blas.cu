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

// max |x - y| (|x| where y is null) in two passes: a maximum per block of a grid-stride loop, then
// one block over those. NaN wins every comparison, so that a NaN anywhere is the result.
#define MAX_BLOCK 256
#define MAX_SLOTS 1024

__device__ double nan_max(double a, double b) { return (isnan(a) || a > b) ? a : b; }

extern "C" __global__ void partial_max_abs(long long n, const double* x, const double* y, double* partials)
{
    __shared__ double cache[MAX_BLOCK];
    double m = 0.0;
    const long long stride = static_cast<long long>(gridDim.x) * MAX_BLOCK;
    for (long long i = blockIdx.x * static_cast<long long>(MAX_BLOCK) + threadIdx.x; i < n; i += stride)
        m = nan_max(fabs(y == nullptr ? x[i] : x[i] - y[i]), m);
    cache[threadIdx.x] = m;
    __syncthreads();
    for (int half = MAX_BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) cache[threadIdx.x] = nan_max(cache[threadIdx.x + half], cache[threadIdx.x]);
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = cache[0];
}

extern "C" __global__ void final_max(int count, const double* partials, double* out)
{
    __shared__ double cache[MAX_SLOTS];
    const int t = threadIdx.x;
    cache[t] = t < count ? partials[t] : 0.0;
    __syncthreads();
    for (int half = MAX_SLOTS / 2; half > 0; half >>= 1) {
        if (t < half) cache[t] = nan_max(cache[t + half], cache[t]);
        __syncthreads();
    }
    if (t == 0) out[0] = cache[0];
}

// w = x word by word (4 bytes): a copy as a kernel node of a CUDA graph, where a memcpy node costs the
// graph's launch more host time
extern "C" __global__ void copy_words(long long n, const unsigned int* x, unsigned int* w)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i < n) w[i] = x[i];
}

// w = value (in place of a memset node)
extern "C" __global__ void fill(long long n, double value, double* w)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i < n) w[i] = value;
}
