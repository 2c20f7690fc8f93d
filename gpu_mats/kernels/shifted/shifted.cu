// Products of a CSR matrix with a block of vectors X (rows x m, row-major),
// column j belonging to member j / parts of the family L + mu_k C: each entry
// a_ik = l_ik + mu_k c_ik (C's values on L's pattern). One thread per entry
// of the block: the threads of a row (consecutive columns) read its entries
// once between them and the block's rows coalesced. SHIFTED false: the
// plain product with l (restriction, prolongation). Sums in double.

template <bool SHIFTED>
__device__ __forceinline__ double block_row_sum(long long row, int column, int m, const long long* __restrict__ indptr,
                                                const int* __restrict__ indices, const double* __restrict__ l,
                                                const double* __restrict__ c, double mu, const double* __restrict__ x)
{
    double sum = 0.0;
    for (long long k = indptr[row]; k < indptr[row + 1]; ++k) {
        double value = l[k];
        if constexpr (SHIFTED) value = fma(mu, c[k], value);
        sum = fma(value, x[static_cast<long long>(indices[k]) * m + column], sum);
    }
    return sum;
}

// Y = alpha A X + beta Z; beta == 0 never reads Z; Z may be Y.
template <bool SHIFTED>
__global__ void block_product(long long rows, int m, int parts, const long long* __restrict__ indptr,
                              const int* __restrict__ indices, const double* __restrict__ l,
                              const double* __restrict__ c, const double* __restrict__ shifts,
                              const double* __restrict__ x, double* y, const double* z, double alpha, double beta)
{
    const long long entry = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (entry >= rows * m) return;
    const long long row = entry / m;
    const int column = static_cast<int>(entry % m);
    const double mu = SHIFTED ? shifts[column / parts] : 0.0;
    double out = alpha * block_row_sum<SHIFTED>(row, column, m, indptr, indices, l, c, mu, x);
    if (beta != 0.0) out = fma(beta, z[entry], out);
    y[entry] = out;
}

// R = Z - A D; D_next = a D + c scaling R; X += D_next. D_next is not D (other
// rows read D); Z may be R.
__global__ void block_chebyshev(long long rows, int m, int parts, const long long* __restrict__ indptr,
                                const int* __restrict__ indices, const double* __restrict__ l,
                                const double* __restrict__ c, const double* __restrict__ shifts,
                                const double* __restrict__ d, double* __restrict__ d_next, double* r, const double* z,
                                const double* __restrict__ scaling, double* __restrict__ x, double a, double cc)
{
    const long long entry = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (entry >= rows * m) return;
    const long long row = entry / m;
    const int column = static_cast<int>(entry % m);
    const double residual = z[entry] - block_row_sum<true>(row, column, m, indptr, indices, l, c,
                                                           shifts[column / parts], d);
    const double step = fma(a, d[entry], cc * scaling[entry] * residual);
    r[entry] = residual;
    d_next[entry] = step;
    x[entry] += step;
}

// X[i, k, p] = sum_j inverse[k, i, j] B[j, k, p]: a thread per entry of X.
__global__ void coarse_solve(long long n, int members, int parts, const double* __restrict__ inverse,
                             const double* __restrict__ b, double* __restrict__ x)
{
    const long long entry = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    const long long m = static_cast<long long>(members) * parts;
    if (entry >= n * m) return;
    const long long i = entry / m;
    const long long column = entry % m;
    const double* row = inverse + (column / parts * n + i) * n;
    double sum = 0.0;
    for (long long j = 0; j < n; ++j) sum = fma(row[j], b[j * m + column], sum);
    x[entry] = sum;
}

// out[j] += sum_i u[i, j] v[i, j]: each thread sums one column over a stride
// of rows, then adds its sum by an atomic.
__global__ void column_dots(long long rows, int m, const double* __restrict__ u, const double* __restrict__ v,
                            double* __restrict__ out)
{
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    const long long threads = static_cast<long long>(gridDim.x) * blockDim.x / m * m;
    if (thread >= threads) return;
    const int column = static_cast<int>(thread % m);
    double sum = 0.0;
    for (long long row = thread / m; row < rows; row += threads / m) {
        const long long entry = row * m + column;
        sum = fma(u[entry], v[entry], sum);
    }
    atomicAdd(out + column, sum);
}

// X += alpha D, R -= alpha Q with alpha_j = rz_j / dq_j (0 where dq_j <= 0).
__global__ void cg_update(long long entries, int m, double* __restrict__ x, double* __restrict__ r,
                          const double* __restrict__ d, const double* __restrict__ q, const double* __restrict__ rz,
                          const double* __restrict__ dq)
{
    const long long entry = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (entry >= entries) return;
    const int column = static_cast<int>(entry % m);
    const double alpha = dq[column] > 0.0 ? rz[column] / dq[column] : 0.0;
    x[entry] = fma(alpha, d[entry], x[entry]);
    r[entry] = fma(-alpha, q[entry], r[entry]);
}

// D = Z + beta D with beta_j = rz_next_j / rz_j (0 where rz_j <= 0).
__global__ void cg_direction(long long entries, int m, double* __restrict__ d, const double* __restrict__ z,
                             const double* __restrict__ rz_next, const double* __restrict__ rz)
{
    const long long entry = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (entry >= entries) return;
    const int column = static_cast<int>(entry % m);
    const double beta = rz[column] > 0.0 ? rz_next[column] / rz[column] : 0.0;
    d[entry] = fma(beta, d[entry], z[entry]);
}
