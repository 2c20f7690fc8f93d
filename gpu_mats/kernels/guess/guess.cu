// Fischer's basis on the GPU (gpu_mats.kernels.guess): its dot products, combination and update steps, the
// count of vectors in use read from device memory. Each dot product ends in one partial sum per block
// (basis_partials) added in one block per row (sum_rows), both in a fixed order, so that a replay gives the
// same bits.

#define BLOCK 256
#define SUM_BLOCK 1024
#define COUNT 0
#define RESTART 1
#define SLOTS 2

// The block's sum of a into cache[0], by a tree over shared memory in a fixed order
__device__ double block_sum(double* cache, double a)
{
    cache[threadIdx.x] = a;
    __syncthreads();
    for (int half = BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) cache[threadIdx.x] += cache[threadIdx.x + half];
        __syncthreads();
    }
    const double sum = cache[0];
    __syncthreads();
    return sum;
}

// partials[i * gridDim.x + block] = this block's share of X[i] . v for i below the count, 0 beyond
extern "C" __global__ void basis_partials(long long n, int rows, const double* X, const double* state,
                                          const double* v, double* partials)
{
    __shared__ double cache[BLOCK];
    const int count = (int)state[COUNT];
    const long long stride = (long long)gridDim.x * BLOCK;
    for (int i = 0; i < rows; ++i) {
        double a = 0.0;
        if (i < count)
            for (long long j = blockIdx.x * (long long)BLOCK + threadIdx.x; j < n; j += stride) a += X[i * n + j] * v[j];
        const double sum = block_sum(cache, a);
        if (threadIdx.x == 0) partials[i * gridDim.x + blockIdx.x] = sum;
    }
}

// sums[row] = the row's ``count`` partials summed by one block (a block a row), a tree over the least power of
// two of slots that holds the count, so that every launch on as many partials adds the same pairs
extern "C" __global__ void sum_rows(int count, const double* partials, double* sums)
{
    __shared__ double cache[SUM_BLOCK];
    const double* row = partials + (long long)blockIdx.x * count;
    int slots = 1;
    while (slots < count) slots <<= 1;
    for (int j = threadIdx.x; j < slots; j += blockDim.x) cache[j] = j < count ? row[j] : 0.0;
    __syncthreads();
    for (int half = slots / 2; half > 0; half >>= 1) {
        for (int j = threadIdx.x; j < half; j += blockDim.x) cache[j] += cache[j + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = cache[0];
}

// out = v + sign sum_{i < count} coeffs[i] X[i] (v null: 0)
extern "C" __global__ void combine(long long n, const double* X, const double* coeffs, const double* state,
                                   const double* v, double sign, double* out)
{
    const int count = (int)state[COUNT];
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += (long long)gridDim.x * blockDim.x) {
        double total = 0.0;
        for (int i = 0; i < count; ++i) total += coeffs[i] * X[i * n + j];
        out[j] = (v ? v[j] : 0.0) + sign * total;
    }
}

extern "C" __global__ void begin_update(double* state, int rows)
{
    const bool restart = state[COUNT] >= rows;
    state[RESTART] = restart ? 1.0 : 0.0;
    if (restart) state[COUNT] = 0.0;
}

extern "C" __global__ void new_direction(long long n, double* w, const double* x, const double* guess,
                                         const double* state)
{
    const bool restart = state[RESTART] != 0.0;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += (long long)gridDim.x * blockDim.x)
        w[j] = restart ? x[j] : x[j] - guess[j];
}

extern "C" __global__ void append(long long n, double* X, const double* w, const double* norm_squared,
                                  const double* state)
{
    if (!(norm_squared[0] > 0.0)) return;
    const double scale = 1.0 / sqrt(norm_squared[0]);
    double* slot = X + (long long)state[COUNT] * n;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += (long long)gridDim.x * blockDim.x)
        slot[j] = w[j] * scale;
}

extern "C" __global__ void count_up(double* state, const double* norm_squared)
{
    if (norm_squared[0] > 0.0) state[COUNT] += 1.0;
}

// saved_state = state and saved_row = the row the next update may write: COUNT's, or 0 where the basis is full
extern "C" __global__ void keep(long long n, int rows, const double* X, const double* state, double* saved_row,
                                double* saved_state)
{
    const int count = (int)state[COUNT];
    const double* row = X + (long long)(count < rows ? count : 0) * n;
    const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (first < SLOTS) saved_state[first] = state[first];
    for (long long j = first; j < n; j += (long long)gridDim.x * blockDim.x) saved_row[j] = row[j];
}
