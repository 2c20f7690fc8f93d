// CSR products with L lanes (threads of one warp: 4, 8, 16 or 32) per row:
// the lanes stride through the row's entries and their partial sums are
// added by shuffles. For matrices with long rows or few of them (AMG
// restrictions; the coarse levels of a hierarchy), where one thread per row
// starves: a 1,099-row level of 150 entries a row took 50 us per SELL product
// at 256^3 (BENCHMARKS.md). Values are V (double, or float for mixed
// precision); vectors are T (double, or float in a mixed-precision cycle);
// sums are double, rounded once to T.

// The sum of the products of row `row` with x, in each of its L lanes
// (`lane` counts 0..L-1). Every lane of the warp calls it, rows past the end
// with no entries: the shuffles need the whole warp. FIRST: with d0 = c0
// scaling x at each column instead, rounded to T as the step that stores it
// rounds it (csr_chebyshev_first).
template <typename V, typename T, int L, bool FIRST = false>
__device__ __forceinline__ double row_sum(long long row, long long rows, int lane,
                                          const long long* __restrict__ indptr, const int* __restrict__ indices,
                                          const V* __restrict__ data, const T* __restrict__ x,
                                          const T* __restrict__ scaling = nullptr, double c0 = 0.0)
{
    double sum = 0.0;
    if (row < rows)
        for (long long k = indptr[row] + lane; k < indptr[row + 1]; k += L) {
            const int column = indices[k];
            double xc = static_cast<double>(__ldg(x + column));
            if constexpr (FIRST)
                xc = static_cast<double>(static_cast<T>(c0 * static_cast<double>(__ldg(scaling + column)) * xc));
            sum = fma(static_cast<double>(data[k]), xc, sum);
        }
    for (int offset = L / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    return sum;
}

// The sums of the products of row `row` with x of two sets of values on
// one pattern (u, v), in each of its L lanes, in one pass over the row's
// columns: each lane's two loads of an entry are independent.
template <typename V, typename T, int L>
__device__ __forceinline__ void row_sums2(long long row, long long rows, int lane,
                                          const long long* __restrict__ indptr, const int* __restrict__ indices,
                                          const V* __restrict__ u, const V* __restrict__ v,
                                          const T* __restrict__ xu, const T* __restrict__ xv, double& su,
                                          double& sv)
{
    su = sv = 0.0;
    if (row < rows)
        for (long long k = indptr[row] + lane; k < indptr[row + 1]; k += L) {
            const int column = indices[k];
            su = fma(static_cast<double>(u[k]), static_cast<double>(__ldg(xu + column)), su);
            sv = fma(static_cast<double>(v[k]), static_cast<double>(__ldg(xv + column)), sv);
        }
    for (int offset = L / 2; offset > 0; offset /= 2) {
        su += __shfl_xor_sync(0xffffffffu, su, offset);
        sv += __shfl_xor_sync(0xffffffffu, sv, offset);
    }
}

// y = alpha A x + beta z; beta == 0 never reads z; z may be y.
template <typename V, typename T, int L>
__global__ void csr_spmv(long long rows, const long long* __restrict__ indptr, const int* __restrict__ indices,
                         const V* __restrict__ data, const T* __restrict__ x, T* y, const T* z,
                         double alpha, double beta)
{
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (thread / 32 * 32 >= rows * L) return;  // the whole warp leaves together
    const long long row = thread / L;
    const int lane = threadIdx.x % L;
    const double sum = row_sum<V, T, L>(row, rows, lane, indptr, indices, data, x);
    if (lane == 0 && row < rows) {
        double out = alpha * sum;
        if (beta != 0.0) out = fma(beta, static_cast<double>(z[row]), out);
        y[row] = static_cast<T>(out);
    }
}

// One smoothing step fused into the product, as sell.cu's sell_chebyshev:
// r = z - A d, then d_next = a d + c scaling r and x += d_next. d_next is not
// d (other rows read d); z may be r.
template <typename V, typename T, int L>
__global__ void csr_chebyshev(long long rows, const long long* __restrict__ indptr, const int* __restrict__ indices,
                              const V* __restrict__ data, const T* __restrict__ d, T* __restrict__ d_next, T* r,
                              const T* z, const T* __restrict__ scaling, T* __restrict__ x, double a, double c)
{
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (thread / 32 * 32 >= rows * L) return;
    const long long row = thread / L;
    const int lane = threadIdx.x % L;
    const double sum = row_sum<V, T, L>(row, rows, lane, indptr, indices, data, d);
    if (lane == 0 && row < rows) {
        const double residual = static_cast<double>(z[row]) - sum;
        const double step = fma(a, static_cast<double>(d[row]), c * static_cast<double>(scaling[row]) * residual);
        r[row] = static_cast<T>(residual);
        d_next[row] = static_cast<T>(step);
        x[row] = static_cast<T>(static_cast<double>(x[row]) + step);
    }
}

// The first two smoothing steps from x = 0 in one pass, as sell.cu's
// sell_chebyshev_first: d0 = c0 scaling b where read; r = b - A d0;
// d_next = a d0 + c scaling r; x = d0 + d_next.
template <typename V, typename T, int L>
__global__ void csr_chebyshev_first(long long rows, const long long* __restrict__ indptr,
                                    const int* __restrict__ indices, const V* __restrict__ data,
                                    const T* __restrict__ b, const T* __restrict__ scaling, T* __restrict__ d_next,
                                    T* __restrict__ r, T* __restrict__ x, double c0, double a, double c)
{
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (thread / 32 * 32 >= rows * L) return;
    const long long row = thread / L;
    const int lane = threadIdx.x % L;
    const double sum = row_sum<V, T, L, true>(row, rows, lane, indptr, indices, data, b, scaling, c0);
    if (lane == 0 && row < rows) {
        const double d0 = static_cast<double>(static_cast<T>(c0 * static_cast<double>(scaling[row]) *
                                                             static_cast<double>(b[row])));
        const double residual = static_cast<double>(b[row]) - sum;
        const double step = fma(a, d0, c * static_cast<double>(scaling[row]) * residual);
        r[row] = static_cast<T>(residual);
        d_next[row] = static_cast<T>(step);
        x[row] = static_cast<T>(d0 + step);
    }
}

// The restriction of a level's residual in one pass over the rows of R A
// (multigrid's cycle): R's values (zero where R has no entry) and R A's on
// one pattern. bc = R b - R A y, the restricted residual of y, without
// the fine residual b - A y stored first.
template <typename V, typename T, int L>
__global__ void csr_restrict_residual(long long rows, const long long* __restrict__ indptr,
                                      const int* __restrict__ indices, const V* __restrict__ r_data,
                                      const V* __restrict__ ra_data, const T* __restrict__ b,
                                      const T* __restrict__ y, T* __restrict__ bc)
{
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (thread / 32 * 32 >= rows * L) return;
    const long long row = thread / L;
    const int lane = threadIdx.x % L;
    double restricted, applied;
    row_sums2<V, T, L>(row, rows, lane, indptr, indices, r_data, ra_data, b, y, restricted, applied);
    if (lane == 0 && row < rows) bc[row] = static_cast<T>(restricted - applied);
}

// A level's coarse correction and the first smoothing step after it, in one
// pass over the rows of A (a_*: the level's operator) and of A P (P's
// values, zero where P has no entry, and A P's on one pattern): from y,
// the smoothed iterate before the correction, r = b - A y - A P xc (the
// residual of the corrected iterate); d = c scaling r; x = y + P xc + d.
// Rows read y and xc, which no row writes (x is not y).
template <typename V, typename T, int L>
__global__ void csr_residual_correction(long long rows, const long long* __restrict__ indptr,
                                        const int* __restrict__ indices, const V* __restrict__ p_data,
                                        const V* __restrict__ ap_data, const long long* __restrict__ a_indptr,
                                        const int* __restrict__ a_indices, const V* __restrict__ a_data,
                                        const T* __restrict__ xc, const T* __restrict__ b,
                                        const T* __restrict__ y, T* __restrict__ x, T* __restrict__ r,
                                        T* __restrict__ d, const T* __restrict__ scaling, double c)
{
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (thread / 32 * 32 >= rows * L) return;
    const long long row = thread / L;
    const int lane = threadIdx.x % L;
    double prolonged, change;
    row_sums2<V, T, L>(row, rows, lane, indptr, indices, p_data, ap_data, xc, xc, prolonged, change);
    const double applied = row_sum<V, T, L>(row, rows, lane, a_indptr, a_indices, a_data, y);
    if (lane == 0 && row < rows) {
        const double residual = static_cast<double>(b[row]) - applied - change;
        const double step = c * static_cast<double>(scaling[row]) * residual;
        r[row] = static_cast<T>(residual);
        d[row] = static_cast<T>(step);
        x[row] = static_cast<T>(static_cast<double>(y[row]) + prolonged + step);  // as the host twin
    }
}
