// Block ILU(0) level by level (seed 001): factorization and the two sweeps.
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
// Neighbour values are read through L2 (__ldcg): in the persistent kernel
// other SMs wrote them since the last grid barrier.
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
            t = UPPER ? __ldcg(x + row * BS + comp) : b[row * BS + comp];
            for (long long e = ptr[r]; e < ptr[r + 1]; ++e) {
                const double *block = vals + e * BS * BS + comp * BS;
                const double *xk = x + cols[e] * BS;
                for (int c = 0; c < BS; ++c) t -= block[c] * __ldcg(xk + c);
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

// All levels in one cooperative launch, a grid barrier between levels.
template <int BS, bool UPPER>
__global__ void bilu_sweep_persistent(int num_levels, const long long *level_ptr, const long long *rows,
                                      const long long *ptr, const long long *cols, const double *vals,
                                      const double *dinv, const double *b, double *x)
{
    extern __shared__ double shared[];
    cg::grid_group grid = cg::this_grid();
    for (int i = 0; i < num_levels; ++i) {
        int level = UPPER ? num_levels - 1 - i : i;
        sweep_rows<BS, UPPER>((int)level_ptr[level], (int)level_ptr[level + 1], blockIdx.x, gridDim.x, rows, ptr,
                              cols, vals, dinv, b, x, shared);
        grid.sync();
    }
}
