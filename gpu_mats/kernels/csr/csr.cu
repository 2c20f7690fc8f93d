// y = A x for a CSR matrix, one warp per row: the lanes stride through the
// row's entries and their partial sums are added by shuffles. For matrices
// with long rows (AMG restrictions), where one thread per row starves.
template <typename Value>
__device__ void warp_spmv(long long rows, const long long* indptr, const int* indices, const Value* data,
                          const double* x, double* y)
{
    const long long row = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;  // the whole warp leaves together
    double sum = 0.0;
    for (long long k = indptr[row] + lane; k < indptr[row + 1]; k += 32)
        sum = fma(static_cast<double>(data[k]), x[indices[k]], sum);
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[row] = sum;
}

extern "C" __global__ void csr_spmv_f64(long long rows, const long long* indptr, const int* indices,
                                        const double* data, const double* x, double* y)
{
    warp_spmv(rows, indptr, indices, data, x, y);
}

extern "C" __global__ void csr_spmv_f32(long long rows, const long long* indptr, const int* indices,
                                        const float* data, const double* x, double* y)
{
    warp_spmv(rows, indptr, indices, data, x, y);
}
