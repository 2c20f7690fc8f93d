// Preconditioned CG with its scalars in device memory (see __init__.py).
// s = {rz, alpha, beta, flag, row, go, target, divergence, reference}. Dot products: each block of a grid-stride
// loop leaves one partial sum (partial_dots), and they are added in one block (sum_partials): both in a fixed
// order, so that every run gives the same bits. On one rank dots_alpha_step and dots_beta_step do both and the
// step in one launch: the last block to finish sums the partials, in the same order whichever block it is.

#define BLOCK 256
#define SUM_BLOCK 1024
#define WARPS (BLOCK / 32)

// A warp's three sums into its lane 0, by shuffles in a fixed order
__device__ void warp_sum3(double& a0, double& a1, double& a2)
{
    for (int offset = 16; offset > 0; offset >>= 1) {
        a0 += __shfl_down_sync(0xffffffffu, a0, offset);
        a1 += __shfl_down_sync(0xffffffffu, a1, offset);
        a2 += __shfl_down_sync(0xffffffffu, a2, offset);
    }
}

// The block's three sums into cache[k][0]: each warp's by shuffles, then the warps' by the first warp, one
// __syncthreads between (a tree over shared memory took one per halving)
__device__ void block_sum3(double (*cache)[WARPS], double a0, double a1, double a2)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    warp_sum3(a0, a1, a2);
    if (lane == 0) {
        cache[0][warp] = a0;
        cache[1][warp] = a1;
        cache[2][warp] = a2;
    }
    __syncthreads();
    if (warp == 0) {
        a0 = lane < WARPS ? cache[0][lane] : 0.0;
        a1 = lane < WARPS ? cache[1][lane] : 0.0;
        a2 = lane < WARPS ? cache[2][lane] : 0.0;
        warp_sum3(a0, a1, a2);
        if (lane == 0) {
            cache[0][0] = a0;
            cache[1][0] = a1;
            cache[2][0] = a2;
        }
    }
}

// The block's three sums (block_sum3's) into partials[k * gridDim.x + block], by the thread that holds them
__device__ void write_partials(double (*cache)[WARPS], double* partials)
{
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = cache[0][0];
        partials[gridDim.x + blockIdx.x] = cache[1][0];
        partials[2 * gridDim.x + blockIdx.x] = cache[2][0];
    }
}

// Each block's partial sums of x_k . y_k (k < pairs) into partials[k * gridDim.x + block]; y0 may be float (a
// float32 cycle's z, exact in double)
template <typename Z>
__device__ void block_partials(long long n, int pairs, const double* x0, const Z* y0, const double* x1,
                               const double* y1, const double* x2, const double* y2, double* partials)
{
    __shared__ double cache[3][WARPS];
    double a0 = 0.0, a1 = 0.0, a2 = 0.0;
    const long long stride = static_cast<long long>(gridDim.x) * BLOCK;
    for (long long i = blockIdx.x * static_cast<long long>(BLOCK) + threadIdx.x; i < n; i += stride) {
        a0 = fma(x0[i], static_cast<double>(y0[i]), a0);
        if (pairs > 1) a1 = fma(x1[i], y1[i], a1);
        if (pairs > 2) a2 = fma(x2[i], y2[i], a2);
    }
    block_sum3(cache, a0, a1, a2);
    write_partials(cache, partials);
}

// update_iterate's x += alpha p and r -= alpha w, and the block's partial sum of the new r . r as block_partials
// leaves r . r's (update_record_step): one pass; r also into ``rounded`` as float where it is not null (a float32
// cycle's right-hand side). Where z is not null (Chronopoulos and Gear's iteration, single_update), the new
// direction first: p = z + beta p and w = az + beta w (p and w not read where beta is 0).
__device__ void update_partials(long long n, const double* s, double* x, double* r, double* p, double* w,
                                const double* z, const double* az, float* rounded, double* partials)
{
    __shared__ double cache[3][WARPS];
    const double alpha = s[1], beta = s[2];
    double a0 = 0.0;
    const long long stride = static_cast<long long>(gridDim.x) * BLOCK;
    for (long long i = blockIdx.x * static_cast<long long>(BLOCK) + threadIdx.x; i < n; i += stride) {
        double pi = p[i], wi = w[i];
        if (z) {
            pi = beta == 0.0 ? z[i] : fma(beta, pi, z[i]);
            wi = beta == 0.0 ? az[i] : fma(beta, wi, az[i]);
            p[i] = pi;
            w[i] = wi;
        }
        x[i] = fma(alpha, pi, x[i]);
        const double ri = fma(-alpha, wi, r[i]);
        r[i] = ri;
        if (rounded) rounded[i] = static_cast<float>(ri);
        a0 = fma(ri, ri, a0);
    }
    block_sum3(cache, a0, 0.0, 0.0);
    write_partials(cache, partials);
}

extern "C" __global__ void partial_dots(long long n, int pairs, const double* x0, const double* y0,
                                        const double* x1, const double* y1, const double* x2, const double* y2,
                                        double* partials)
{
    block_partials(n, pairs, x0, y0, x1, y1, x2, y2, partials);
}

// Whether this block is the grid's last to have written its partials (``arrivals`` counts them; the last sets it
// back to 0 for the next launch), after which every block's partials are visible to it.
__device__ bool last_block(unsigned int* arrivals)
{
    __shared__ bool last;
    __threadfence();
    if (threadIdx.x == 0) {
        last = atomicAdd(arrivals, 1u) == gridDim.x - 1;
        if (last) *arrivals = 0u;
    }
    __syncthreads();
    return last;
}

// sums = each row of partials summed by one block in a fixed order: a tree over the least power of two of slots
// that holds the count, whatever the block's size (each thread takes the slots blockDim.x apart), so that every
// launch on as many partials adds the same pairs
__device__ void sum_rows(int count, const double* partials, double* sums)
{
    __shared__ double cache[3][SUM_BLOCK];
    int slots = 1;
    while (slots < count) slots <<= 1;
    for (int j = threadIdx.x; j < slots; j += blockDim.x)
        for (int k = 0; k < 3; ++k) cache[k][j] = j < count ? __ldcg(partials + k * count + j) : 0.0;
    __syncthreads();
    for (int half = slots / 2; half > 0; half >>= 1) {
        for (int j = threadIdx.x; j < half; j += blockDim.x)
            for (int k = 0; k < 3; ++k) cache[k][j] += cache[k][j + half];
        __syncthreads();
    }
    if (threadIdx.x < 3) sums[threadIdx.x] = cache[threadIdx.x][0];
    __syncthreads();
}

// A step that takes its own dot products (x_k . y_k, k < pairs) in its launch: each block leaves its partial
// sums, the last block to finish sums them into sums and its first thread takes ``step`` (a lambda).
template <typename Z, typename Step>
__device__ void dots_then(long long n, int pairs, const double* x0, const Z* y0, const double* x1,
                          const double* y1, const double* x2, const double* y2, double* partials,
                          unsigned int* arrivals, double* sums, Step step)
{
    block_partials(n, pairs, x0, y0, x1, y1, x2, y2, partials);
    if (!last_block(arrivals)) return;
    sum_rows(gridDim.x, partials, sums);
    if (threadIdx.x == 0) step();
}

// update_partials' pass, then as dots_then: the last block sums the partials of r . r and takes ``step``
template <typename Step>
__device__ void update_then(long long n, double* s, double* x, double* r, double* p, double* w, const double* z,
                            const double* az, float* rounded, double* partials, unsigned int* arrivals, double* sums,
                            Step step)
{
    update_partials(n, s, x, r, p, w, z, az, rounded, partials);
    if (!last_block(arrivals)) return;
    sum_rows(gridDim.x, partials, sums);
    if (threadIdx.x == 0) step();
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

// The residual's record before the preconditioner (record_step): history[row] = (0, r . r, 0), r . r in sums[0]
__device__ void record(double* s, const double* sums, double* history, int start)
{
    s[4] = start ? 0.0 : s[4] + 1.0;
    const int row = static_cast<int>(s[4]);
    history[3 * row] = 0.0;
    history[3 * row + 1] = sums[0];
    history[3 * row + 2] = 0.0;
}

// beta from r . z in sums[0] after the preconditioner (direction_step); beta = 0 where rz is 0
__device__ void direction(double* s, const double* sums)
{
    const double rz = sums[0];
    s[2] = s[0] == 0.0 ? 0.0 : rz / s[0];
    s[0] = rz;
    if (!(rz >= 0.0)) s[3] = 2.0;
}

// Chronopoulos and Gear's step (single_step) from sums = (r . z, z . A z): beta = (r . z) / rz (0 where rz is 0: a
// solve's first direction), rz = r . z, and alpha = rz / (p . A p) with p . A p = z . A z - beta rz / alpha (the
// last alpha); alpha = 0 where rz is 0 or negative (FLAG INDEFINITE_PRECONDITIONER) or p . A p is not positive
// (FLAG INDEFINITE_OPERATOR)
__device__ void single(double* s, const double* sums)
{
    const double rz = sums[0], zaz = sums[1];
    const double beta = s[0] == 0.0 ? 0.0 : rz / s[0];
    const double pap = beta == 0.0 ? zaz : zaz - beta * rz / s[1];
    s[0] = rz;
    s[2] = beta;
    if (!(rz >= 0.0)) {
        s[1] = 0.0;
        s[3] = 2.0;
    } else if (rz == 0.0) {
        s[1] = 0.0;
    } else if (!(pap > 0.0)) {
        s[1] = 0.0;
        s[3] = 1.0;
    } else {
        s[1] = rz / pap;
    }
}

extern "C" __global__ void single_step(double* s, const double* sums)
{
    single(s, sums);
}

// r . z and z . A z and the single step from them, in one launch of partial_count(n) blocks of BLOCK threads
extern "C" __global__ void dots_single_step(long long n, const double* r, const double* z, const double* az,
                                            double* partials, unsigned int* arrivals, double* sums, double* s)
{
    dots_then(n, 2, r, z, az, z, nullptr, nullptr, partials, arrivals, sums, [&] { single(s, sums); });
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

// x . y and the alpha step from it, in one launch of partial_count(n) blocks of BLOCK threads
extern "C" __global__ void dots_alpha_step(long long n, const double* x, const double* y, double* partials,
                                           unsigned int* arrivals, double* sums, double* s)
{
    dots_then(n, 1, x, y, nullptr, nullptr, nullptr, nullptr, partials, arrivals, sums, [&] { alpha(s, sums); });
}

// r . z, r . r and z . z and the beta step from them, in one launch of partial_count(n) blocks of BLOCK threads
extern "C" __global__ void dots_beta_step(long long n, const double* r, const double* z, double* partials,
                                          unsigned int* arrivals, double* sums, double* s, double* history, int start)
{
    dots_then(n, 3, r, z, r, r, z, z, partials, arrivals, sums, [&] { beta(s, sums, history, start); });
}

extern "C" __global__ void record_step(double* s, const double* sums, double* history, int start)
{
    record(s, sums, history, start);
}

extern "C" __global__ void direction_step(double* s, const double* sums)
{
    direction(s, sums);
}

// r . r and the record from it, in one launch of partial_count(n) blocks of BLOCK threads
extern "C" __global__ void dots_record_step(long long n, const double* r, double* partials, unsigned int* arrivals,
                                            double* sums, double* s, double* history, int start)
{
    dots_then(n, 1, r, r, nullptr, nullptr, nullptr, nullptr, partials, arrivals, sums,
              [&] { record(s, sums, history, start); });
}

// r . z and the direction step from it, in one launch of partial_count(n) blocks of BLOCK threads; z double or
// float (a float32 cycle's own output)
template <typename Z>
__global__ void dots_direction_step(long long n, const double* r, const Z* z, double* partials,
                                    unsigned int* arrivals, double* sums, double* s)
{
    dots_then(n, 1, r, z, nullptr, nullptr, nullptr, nullptr, partials, arrivals, sums, [&] { direction(s, sums); });
}

// update_iterate (single_update where z is not null: Chronopoulos and Gear's iteration), then dots_record_step on
// the new r, in one launch of partial_count(n) blocks of BLOCK threads
extern "C" __global__ void update_record_step(long long n, double* s, double* x, double* r, double* p, double* w,
                                              const double* z, const double* az, float* rounded, double* partials,
                                              unsigned int* arrivals, double* sums, double* history)
{
    update_then(n, s, x, r, p, w, z, az, rounded, partials, arrivals, sums, [&] { record(s, sums, history, 0); });
}

extern "C" __global__ void single_update(long long n, const double* s, double* x, double* r, double* p, double* w,
                                         const double* z, const double* az)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const double alpha = s[1], beta = s[2];
    const double pi = beta == 0.0 ? z[i] : fma(beta, p[i], z[i]);
    const double wi = beta == 0.0 ? az[i] : fma(beta, w[i], az[i]);
    p[i] = pi;
    w[i] = wi;
    x[i] = fma(alpha, pi, x[i]);
    r[i] = fma(-alpha, wi, r[i]);
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

template <typename Z>
__global__ void update_direction(long long n, const double* s, double* p, const Z* z)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const double beta = s[2];
    const double zi = static_cast<double>(z[i]);
    p[i] = beta == 0.0 ? zi : fma(beta, p[i], zi);
}

extern "C" __global__ void remove_mean(long long n, double total, const double* sums, double* v)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    v[i] -= sums[0] / total;
}

// flag[0] = 0 unless each of the count stores (rows of records, each s then its history) ended converged by its
// loop's own test: FLAG 0, its last row finite and its norm (the square root of column) at most TARGET
extern "C" __global__ void clear_unless_converged(double* flag, const double* records, int count, long long stride,
                                                  int column)
{
    for (int k = 0; k < count; ++k) {
        const double* s = records + k * stride;
        const double* h = s + 9 + 3 * static_cast<long long>(s[4]);
        const bool finite = isfinite(h[0]) && isfinite(h[1]) && isfinite(h[2]);
        if (!(s[3] == 0.0 && finite && sqrt(fmax(h[column], 0.0)) <= s[6])) flag[0] = 0.0;
    }
}
