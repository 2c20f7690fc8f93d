// CSR products with L lanes (threads of one warp: 4, 8, 16 or 32) per row:
// the lanes stride through the row's entries and their partial sums are
// added by shuffles. For matrices with long rows or few of them (AMG
// restrictions; the coarse levels of a hierarchy), where one thread per row
// starves: a 1,099-row level of 150 entries a row took 50 us per SELL product
// at 256^3 (BENCHMARKS.md). Values are V (double, or float for mixed
// precision); vectors and sums are double.

// The sum of the products of row `row` with x, in each of its L lanes
// (`lane` counts 0..L-1). Every lane of the warp calls it, rows past the end
// with no entries: the shuffles need the whole warp.
template <typename V, int L>
__device__ __forceinline__ double row_sum(long long row, long long rows, int lane,
                                          const long long* __restrict__ indptr, const int* __restrict__ indices,
                                          const V* __restrict__ data, const double* __restrict__ x)
{
    double sum = 0.0;
    if (row < rows)
        for (long long k = indptr[row] + lane; k < indptr[row + 1]; k += L)
            sum = fma(static_cast<double>(data[k]), __ldg(x + indices[k]), sum);
    for (int offset = L / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    return sum;
}

// y = alpha A x + beta z; beta == 0 never reads z; z may be y.
template <typename V, int L>
__global__ void csr_spmv(long long rows, const long long* __restrict__ indptr, const int* __restrict__ indices,
                         const V* __restrict__ data, const double* __restrict__ x, double* y, const double* z,
                         double alpha, double beta)
{
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (thread / 32 * 32 >= rows * L) return;  // the whole warp leaves together
    const long long row = thread / L;
    const int lane = threadIdx.x % L;
    const double sum = row_sum<V, L>(row, rows, lane, indptr, indices, data, x);
    if (lane == 0 && row < rows) {
        double out = alpha * sum;
        if (beta != 0.0) out = fma(beta, z[row], out);
        y[row] = out;
    }
}

// One smoothing step fused into the product, as sell.cu's sell_chebyshev:
// r = z - A d, then d_next = a d + c scaling r and x += d_next. d_next is not
// d (other rows read d); z may be r.
template <typename V, int L>
__global__ void csr_chebyshev(long long rows, const long long* __restrict__ indptr, const int* __restrict__ indices,
                              const V* __restrict__ data, const double* __restrict__ d, double* __restrict__ d_next,
                              double* r, const double* z, const double* __restrict__ scaling, double* __restrict__ x,
                              double a, double c)
{
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (thread / 32 * 32 >= rows * L) return;
    const long long row = thread / L;
    const int lane = threadIdx.x % L;
    const double sum = row_sum<V, L>(row, rows, lane, indptr, indices, data, d);
    if (lane == 0 && row < rows) {
        const double residual = z[row] - sum;
        const double step = fma(a, d[row], c * scaling[row] * residual);
        r[row] = residual;
        d_next[row] = step;
        x[row] += step;
    }
}

// A level's coarse correction and the first smoothing step after it, in one
// pass over the rows of A P (multigrid's cycle): P's values (zero where P
// has no entry) and A P's on one pattern. x += P xc; r -= A P xc (r held
// b - A x before the correction); d = c scaling r; x += d. Every row reads
// only xc, which no row writes.
template <typename V, int L>
__global__ void csr_coarse_correction(long long rows, const long long* __restrict__ indptr,
                                      const int* __restrict__ indices, const V* __restrict__ p_data,
                                      const V* __restrict__ ap_data, const double* __restrict__ xc,
                                      double* __restrict__ x, double* __restrict__ r, double* __restrict__ d,
                                      const double* __restrict__ scaling, double c)
{
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (thread / 32 * 32 >= rows * L) return;
    const long long row = thread / L;
    const int lane = threadIdx.x % L;
    const double prolonged = row_sum<V, L>(row, rows, lane, indptr, indices, p_data, xc);
    const double change = row_sum<V, L>(row, rows, lane, indptr, indices, ap_data, xc);
    if (lane == 0 && row < rows) {
        const double residual = r[row] - change;
        const double step = c * scaling[row] * residual;
        r[row] = residual;
        d[row] = step;
        x[row] = x[row] + prolonged + step;  // as the host twin: x += P xc, then x += d
    }
}
