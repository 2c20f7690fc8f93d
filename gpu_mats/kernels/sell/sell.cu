// SELL-C-sigma kernels. Slice s holds stored rows s*C .. s*C+C-1 column-major,
// so entry k of stored row p is at
//   slice_ptr[s] + k*C + (p - s*C)
// Each thread takes R neighbouring stored rows of one slice (C % R == 0) and
// reads their R values and R columns of entry k with one vector load each:
// entries of neighbouring rows are adjacent, and the offset is a multiple of
// R, so the loads are aligned. Wide loads keep more bytes in flight per
// instruction, which is what a memory-bound kernel needs (Oyarzún 2015, ch. 3
// pairs rows the same way). Values are V (double, or float for mixed
// precision); vectors are T (double, or float in a mixed-precision cycle);
// sums are double, rounded once to T. Stored row p is original row
// row_of[p] (row_of == nullptr: the identity).

// out[0..R) = p[0..R) with loads of up to 16 bytes; p is aligned to R*sizeof(T).
template <typename T, int R>
__device__ __forceinline__ void load_rows(const T* __restrict__ p, T (&out)[R])
{
    constexpr int bytes = R * sizeof(T);
    if constexpr (bytes >= 16) {
#pragma unroll
        for (int k = 0; k < bytes / 16; ++k)
            reinterpret_cast<int4*>(out)[k] = __ldg(reinterpret_cast<const int4*>(p) + k);
    } else if constexpr (bytes == 8) {
        reinterpret_cast<int2*>(out)[0] = __ldg(reinterpret_cast<const int2*>(p));
    } else {
        reinterpret_cast<int*>(out)[0] = __ldg(reinterpret_cast<const int*>(p));
    }
}

// The thread's first stored row p0 (its R rows p0 .. p0 + R - 1 in one
// slice) and the slots of its rows' entries: at, at + C, ... below end;
// false for a thread past the last row.
template <int R>
__device__ __forceinline__ bool thread_rows(const long long* __restrict__ slice_ptr, int nrows, int C, int& p0,
                                            long long& at, long long& end)
{
    p0 = (blockIdx.x * blockDim.x + threadIdx.x) * R;
    if (p0 >= nrows) return false;
    const int s = p0 / C;
    end = slice_ptr[s + 1];
    at = slice_ptr[s] + (p0 - s * C);
    return true;
}

// acc[r][j] = the sum over the entries of stored row p0 + r (slots at, at +
// C, ... below end) of value times X[j] at its column, for the NV vectors j;
// FIRST: times d0 = c0 scaling x at its column instead, rounded to T as
// the step that stores it rounds it (sell_chebyshev_first).
template <typename V, typename T, int NV, int R, bool FIRST = false>
__device__ __forceinline__ void row_sums(const int* __restrict__ cols, const V* __restrict__ vals, long long at,
                                         long long end, int C, const T* __restrict__ x, long long ldx,
                                         double (&acc)[R][NV], const T* __restrict__ scaling = nullptr,
                                         double c0 = 0.0)
{
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < NV; ++j) acc[r][j] = 0.0;
#pragma unroll 4
    for (; at < end; at += C) {
        alignas(16) int c[R];
        alignas(16) V v[R];
        load_rows<int, R>(cols + at, c);
        load_rows<V, R>(vals + at, v);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int j = 0; j < NV; ++j) {
                double xc = static_cast<double>(__ldg(x + j * ldx + c[r]));
                if constexpr (FIRST)
                    xc = static_cast<double>(static_cast<T>(c0 * static_cast<double>(__ldg(scaling + c[r])) * xc));
                acc[r][j] = fma(static_cast<double>(v[r]), xc, acc[r][j]);
            }
    }
}

// Y[j] = alpha * A X[j] + beta * Z[j] for the NV vectors j; vector j starts
// at j*ldx in X and j*ldy in Y and Z. beta == 0 never reads Z; Z may be Y.
template <typename V, typename T, int NV, int R>
__global__ void sell_spmv(const long long* __restrict__ slice_ptr,
                          const int* __restrict__ cols,
                          const V* __restrict__ vals,
                          const int* __restrict__ row_of,
                          int nrows, int C,
                          const T* __restrict__ x, long long ldx,
                          T* y, const T* z, long long ldy,
                          double alpha, double beta)
{
    int p0;
    long long at, end;
    if (!thread_rows<R>(slice_ptr, nrows, C, p0, at, end)) return;
    // Empty slice added onto itself: nothing to write (off-diagonal blocks
    // are mostly empty rows).
    if (at >= end && beta == 1.0 && z == y) return;

    double acc[R][NV];
    row_sums<V, T, NV, R>(cols, vals, at, end, C, x, ldx, acc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int p = p0 + r;
        if (p >= nrows) break;
        const int row = row_of ? row_of[p] : p;
#pragma unroll
        for (int j = 0; j < NV; ++j) {
            double out = alpha * acc[r][j];
            if (beta != 0.0) out = fma(beta, static_cast<double>(z[j * ldy + row]), out);
            y[j * ldy + row] = static_cast<T>(out);
        }
    }
}

// One step of a smoothing iteration fused into the product (gpu_mats.amg's
// Chebyshev-Jacobi and l1-Jacobi): r = z - A d, then d_next = a d + c
// scaling r and x += d_next, each row's update right after its sum, so that
// r, d and x are read and written once per step instead of a second time by
// a separate update kernel. d_next is not d: other rows read d. z may be r.
template <typename V, typename T, int R>
__global__ void sell_chebyshev(const long long* __restrict__ slice_ptr,
                               const int* __restrict__ cols,
                               const V* __restrict__ vals,
                               const int* __restrict__ row_of,
                               int nrows, int C,
                               const T* __restrict__ d, T* __restrict__ d_next,
                               T* r, const T* z, const T* __restrict__ scaling,
                               T* __restrict__ x, double a, double c_)
{
    int p0;
    long long at, end;
    if (!thread_rows<R>(slice_ptr, nrows, C, p0, at, end)) return;
    double acc[R][1];
    row_sums<V, T, 1, R>(cols, vals, at, end, C, d, 0, acc);
#pragma unroll
    for (int k = 0; k < R; ++k) {
        const int p = p0 + k;
        if (p >= nrows) break;
        const int row = row_of ? row_of[p] : p;
        const double residual = static_cast<double>(z[row]) - acc[k][0];
        const double step = fma(a, static_cast<double>(d[row]), c_ * static_cast<double>(scaling[row]) * residual);
        r[row] = static_cast<T>(residual);
        d_next[row] = static_cast<T>(step);
        x[row] = static_cast<T>(static_cast<double>(x[row]) + step);
    }
}

// The first two smoothing steps from x = 0 in one pass (gpu_mats.amg's
// cycle on a level's right-hand side b): d0 = c0 scaling b, computed again
// wherever a row reads it, so that no pass stores it first; r = b - A d0;
// d_next = a d0 + c scaling r; x = d0 + d_next. The bits of multigrid.cu's
// chebyshev_start then sell_chebyshev, one kernel and one pass fewer.
template <typename V, typename T, int R>
__global__ void sell_chebyshev_first(const long long* __restrict__ slice_ptr,
                                     const int* __restrict__ cols,
                                     const V* __restrict__ vals,
                                     const int* __restrict__ row_of,
                                     int nrows, int C,
                                     const T* __restrict__ b, const T* __restrict__ scaling,
                                     T* __restrict__ d_next, T* __restrict__ r, T* __restrict__ x,
                                     double c0, double a, double c_)
{
    int p0;
    long long at, end;
    if (!thread_rows<R>(slice_ptr, nrows, C, p0, at, end)) return;
    double acc[R][1];
    row_sums<V, T, 1, R, true>(cols, vals, at, end, C, b, 0, acc, scaling, c0);
#pragma unroll
    for (int k = 0; k < R; ++k) {
        const int p = p0 + k;
        if (p >= nrows) break;
        const int row = row_of ? row_of[p] : p;
        const double d0 = static_cast<double>(static_cast<T>(c0 * static_cast<double>(scaling[row]) *
                                                             static_cast<double>(b[row])));
        const double residual = static_cast<double>(b[row]) - acc[k][0];
        const double step = fma(a, d0, c_ * static_cast<double>(scaling[row]) * residual);
        r[row] = static_cast<T>(residual);
        d_next[row] = static_cast<T>(step);
        x[row] = static_cast<T>(d0 + step);
    }
}

// d[r] = A[r, r] for every row r, 0 past the ndiag = min(rows, cols) diagonal
// entries (padding has value 0, so it adds nothing even where it repeats the
// diagonal column).
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
    const int s = p / C;
    const long long end = slice_ptr[s + 1];
    double sum = 0.0;
    if (r < ndiag)
        for (long long at = slice_ptr[s] + (p - s * C); at < end; at += C)
            if (cols[at] == r) sum += static_cast<double>(vals[at]);
    d[r] = sum;
}
