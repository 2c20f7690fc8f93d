// Block ILU(0) level by level (Luo et al. 2015): factorization and the two sweeps.
// Blocks are BS x BS, row-major, stored with the rows regrouped by level;
// vectors are in the natural order (block row `rows[r]` of level-ordered r).
// NumPy twins: gpu_mats/kernels/bilu_host.py.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// Gauss-Jordan with partial pivoting; returns 0, or 1 + the column whose
// pivot is below tol times the block's largest entry (or not finite).
template <int BS>
__device__ int invert_block(const double *a, double *inv, double tol)
{
    double m[BS][2 * BS];
    double scale = 0.0;
    for (int i = 0; i < BS; ++i)
        for (int j = 0; j < BS; ++j) {
            m[i][j] = a[i * BS + j];
            m[i][BS + j] = (i == j) ? 1.0 : 0.0;
            scale = fmax(scale, fabs(m[i][j]));
        }
    int info = 0;
    for (int c = 0; c < BS; ++c) {
        int p = c;
        for (int i = c + 1; i < BS; ++i)
            if (fabs(m[i][c]) > fabs(m[p][c])) p = i;
        for (int j = 0; j < 2 * BS; ++j) {
            double t = m[c][j]; m[c][j] = m[p][j]; m[p][j] = t;
        }
        double pivot = m[c][c];
        if (!(fabs(pivot) > tol * scale)) {
            if (!info) info = c + 1;
            pivot = 1.0;
        }
        for (int j = 0; j < 2 * BS; ++j) m[c][j] /= pivot;
        for (int i = 0; i < BS; ++i) {
            if (i == c) continue;
            double f = m[i][c];
            for (int j = 0; j < 2 * BS; ++j) m[i][j] -= f * m[c][j];
        }
    }
    for (int i = 0; i < BS; ++i)
        for (int j = 0; j < BS; ++j) inv[i * BS + j] = m[i][BS + j];
    return info;
}

// One thread per row of the level: l_rk = a_rk d_k^-1 for each lower block in
// column order, each followed by its updates a_rj -= l_rk u_kj; then d_r^-1.
template <int BS>
__global__ void bilu_factor_level(int r0, int r1, const long long *ptr, const long long *diag,
                                  const long long *col_rank, const long long *tri_ptr,
                                  const long long *tri_target, const long long *tri_source,
                                  double *vals, double *dinv, int *info, double tol)
{
    int r = r0 + blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= r1) return;
    for (long long e = ptr[r]; e < diag[r]; ++e) {
        double l[BS * BS];
        const double *a = vals + e * BS * BS, *d = dinv + col_rank[e] * BS * BS;
        for (int i = 0; i < BS; ++i)
            for (int j = 0; j < BS; ++j) {
                double s = 0.0;
                for (int q = 0; q < BS; ++q) s += a[i * BS + q] * d[q * BS + j];
                l[i * BS + j] = s;
            }
        for (int q = 0; q < BS * BS; ++q) vals[e * BS * BS + q] = l[q];
        for (long long t = tri_ptr[e]; t < tri_ptr[e + 1]; ++t) {
            double *target = vals + tri_target[t] * BS * BS;
            const double *u = vals + tri_source[t] * BS * BS;
            for (int i = 0; i < BS; ++i)
                for (int j = 0; j < BS; ++j) {
                    double s = 0.0;
                    for (int q = 0; q < BS; ++q) s += l[i * BS + q] * u[q * BS + j];
                    target[i * BS + j] -= s;
                }
        }
    }
    info[r] = invert_block<BS>(vals + diag[r] * BS * BS, dinv + (long long)r * BS * BS, tol);
}

// Rows r0..r1 of one level, BS threads per row (one per component), the
// thread block's rows starting at `first` and advancing by `stride` blocks.
// lower: x_r = b_r - sum_k l_rk x_k; upper: x_r = d_r^-1 (x_r - sum_j u_rj x_j).
template <int BS, bool UPPER>
__device__ void sweep_rows(int r0, int r1, int first, int stride, const long long *rows, const long long *ptr,
                           const long long *cols, const double *vals, const double *dinv, const double *b,
                           double *x, double *shared)
{
    const int per_block = blockDim.x / BS, slot = threadIdx.x / BS, comp = threadIdx.x % BS;
    for (int base = r0 + first * per_block; base < r1; base += stride * per_block) {
        int r = base + slot;
        bool active = slot < per_block && r < r1;
        double t = 0.0;
        long long row = 0;
        if (active) {
            row = rows[r];
            t = UPPER ? x[row * BS + comp] : b[row * BS + comp];
            for (long long e = ptr[r]; e < ptr[r + 1]; ++e) {
                const double *block = vals + e * BS * BS + comp * BS;
                const double *xk = x + cols[e] * BS;
                for (int c = 0; c < BS; ++c) t -= block[c] * xk[c];
            }
        }
        if (UPPER) {
            if (active) shared[slot * BS + comp] = t;
            __syncthreads();
            if (active) {
                const double *d = dinv + (long long)r * BS * BS + comp * BS;
                double s = 0.0;
                for (int c = 0; c < BS; ++c) s += d[c] * shared[slot * BS + c];
                t = s;
            }
            __syncthreads();
        }
        if (active) x[row * BS + comp] = t;
    }
}

template <int BS, bool UPPER>
__global__ void bilu_sweep_level(int r0, int r1, const long long *rows, const long long *ptr, const long long *cols,
                                 const double *vals, const double *dinv, const double *b, double *x)
{
    extern __shared__ double shared[];
    sweep_rows<BS, UPPER>(r0, r1, blockIdx.x, gridDim.x, rows, ptr, cols, vals, dinv, b, x, shared);
}

// The persistent sweep: all levels in one cooperative launch, a grid barrier
// between levels. A warp holds 32 / BS rows of a level, BS lanes per row (one
// per component), and strides over the level by warps. All that a row needs
// except its neighbours' new values (its first K blocks and their columns,
// b_r or x_r, its row of d_r^-1) is loaded before the barrier that opens its
// level, so after the barrier only the x_k loads lie on the critical path:
// one value per lane, passed around the row's lanes by shuffles.
template <int BS, int K>
struct PendingRow {
    long long row, first;  // natural block row (-1: none), its first block
    int count;             // its blocks; those past the first K are read late
    long long cols[K];
    double vals[K][BS];    // this lane's row of each block
    double start;          // b_r (lower) or x_r (upper), this component
    double dinv[BS];       // upper: this lane's row of d_r^-1
};

template <int BS, int K, bool UPPER>
__device__ void fetch_row(PendingRow<BS, K> &p, long long r, long long r1, bool lane_used, int comp,
                          const long long *rows, const long long *ptr, const long long *cols, const double *vals,
                          const double *dinv, const double *b, const double *x)
{
    p.row = -1;
    p.count = 0;
    if (!lane_used || r >= r1) return;
    p.row = __ldg(rows + r);
    p.first = __ldg(ptr + r);
    p.count = (int)(__ldg(ptr + r + 1) - p.first);
    for (int k = 0; k < K && k < p.count; ++k) {
        p.cols[k] = __ldg(cols + p.first + k);
        for (int c = 0; c < BS; ++c) p.vals[k][c] = __ldg(vals + (p.first + k) * BS * BS + comp * BS + c);
    }
    // Row r is written only in its own level: b_r (even when x is b) and the
    // lower sweep's x_r are final here.
    p.start = UPPER ? x[p.row * BS + comp] : b[p.row * BS + comp];
    if (UPPER)
        for (int c = 0; c < BS; ++c) p.dinv[c] = __ldg(dinv + r * BS * BS + comp * BS + c);
}

// t -= block row `comp` of one block times x_k, x_k's components gathered
// from the row's lanes (`base` is the lane of component 0). Every lane of the
// warp calls it (shuffles); `use` says whether the block is real.
template <int BS>
__device__ double subtract_block(double t, const double *vals, long long col, bool use, int base, int comp,
                                 const double *x)
{
    double mine = use ? __ldcg(x + col * BS + comp) : 0.0;
    for (int c = 0; c < BS; ++c) {
        double xc = __shfl_sync(0xffffffffu, mine, base + c);
        if (use) t -= vals[c] * xc;
    }
    return t;
}

template <int BS, int K, bool UPPER>
__device__ double finish_row(const PendingRow<BS, K> &p, int base, int comp, const long long *cols,
                             const double *vals, const double *x)
{
    double t = p.start;
    for (int k = 0; k < K; ++k) t = subtract_block<BS>(t, p.vals[k], p.cols[k], k < p.count, base, comp, x);
    int late = __reduce_max_sync(0xffffffffu, p.count > K ? p.count - K : 0);
    for (int k = 0; k < late; ++k) {
        bool use = K + k < p.count;
        long long e = p.first + K + k;
        double row_vals[BS];
        for (int c = 0; c < BS; ++c) row_vals[c] = use ? __ldg(vals + e * BS * BS + comp * BS + c) : 0.0;
        t = subtract_block<BS>(t, row_vals, use ? __ldg(cols + e) : 0, use, base, comp, x);
    }
    if (UPPER) {
        double s = 0.0;
        for (int c = 0; c < BS; ++c) s += p.dinv[c] * __shfl_sync(0xffffffffu, t, base + c);
        t = s;
    }
    return t;
}

template <int BS, int K, bool UPPER>
__global__ void bilu_sweep_persistent(int num_levels, const long long *level_ptr, const long long *rows,
                                      const long long *ptr, const long long *cols, const double *vals,
                                      const double *dinv, const double *b, double *x)
{
    constexpr int ROWS = 32 / BS;  // rows per warp
    cg::grid_group grid = cg::this_grid();
    const int lane = threadIdx.x % 32, slot = lane / BS, comp = lane % BS, base = slot * BS;
    const bool lane_used = slot < ROWS;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    const long long stride = gridDim.x * (long long)blockDim.x / 32 * ROWS;
    PendingRow<BS, K> p;
    int level = UPPER ? num_levels - 1 : 0;
    fetch_row<BS, K, UPPER>(p, __ldg(level_ptr + level) + warp * ROWS + slot, __ldg(level_ptr + level + 1),
                            lane_used, comp, rows, ptr, cols, vals, dinv, b, x);
    for (int i = 0; i < num_levels; ++i) {
        const long long r0 = __ldg(level_ptr + level), r1 = __ldg(level_ptr + level + 1);
        for (long long first = r0 + warp * ROWS; first < r1; first += stride) {
            if (first != r0 + warp * ROWS)
                fetch_row<BS, K, UPPER>(p, first + slot, r1, lane_used, comp, rows, ptr, cols, vals, dinv, b, x);
            double t = finish_row<BS, K, UPPER>(p, base, comp, cols, vals, x);
            if (p.row >= 0) x[p.row * BS + comp] = t;
        }
        if (i + 1 == num_levels) break;
        level += UPPER ? -1 : 1;
        fetch_row<BS, K, UPPER>(p, __ldg(level_ptr + level) + warp * ROWS + slot, __ldg(level_ptr + level + 1),
                                lane_used, comp, rows, ptr, cols, vals, dinv, b, x);
        grid.sync();
    }
}
