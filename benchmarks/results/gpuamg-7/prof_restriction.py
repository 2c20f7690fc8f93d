"""Restriction R r at 256^3 (level 0 and 1 of the default aggregation): the csr kernel at 4-32 lanes, cuSPARSE,
and P^T r scattered from P's rows with atomics (thread per fine row; and a warp-combined variant)."""
import sys, json
sys.path[:0] = ["tests", "."]
import cupy, numpy
from stencils import laplacian
from gpu_mats.amg import AggregationAMG
from gpu_mats.kernels.csr import cuda as csr_cuda
from gpu_mats.ops import spmv

SRC = r'''
extern "C" __global__ void scatter_t(long long rows, const long long* __restrict__ indptr, const int* __restrict__ indices,
    const double* __restrict__ data, const double* __restrict__ x, double* y)
{
    long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const double xr = x[row];
    for (long long k = indptr[row]; k < indptr[row + 1]; ++k) atomicAdd(y + indices[k], data[k] * xr);
}
// P with at most W entries a row stored as ELL (column-major: entry j of row i at j*rows+i), -1 padding
extern "C" __global__ void scatter_ell(long long rows, int width, const int* __restrict__ cols,
    const double* __restrict__ vals, const double* __restrict__ x, double* y)
{
    long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const double xr = x[row];
    for (int j = 0; j < width; ++j) {
        int c = cols[j * rows + row];
        if (c >= 0) atomicAdd(y + c, vals[j * rows + row] * xr);
    }
}
'''
mod = cupy.RawModule(code=SRC)

def timeit(fn, reps=30):
    fn(); cupy.cuda.Device().synchronize()
    s, e = cupy.cuda.Event(), cupy.cuda.Event()
    s.record()
    for _ in range(reps): fn()
    e.record(); e.synchronize()
    return cupy.cuda.get_elapsed_time(s, e) / reps

n = 256
indptr, indices, data = (cupy.asarray(a) for a in laplacian(n))
amg = AggregationAMG(indptr, indices, data, n**3, cupy)
out = {}
for k in range(2):
    level = amg.levels[k]
    R = level.galerkin_R  # float64 CSR
    P = R.T.tocsr(); P.sort_indices()
    rows_c, rows_f = R.shape
    r = cupy.random.standard_normal(rows_f)
    y = cupy.zeros(rows_c); ref = R @ r
    ip, ix, dv = R.indptr.astype(cupy.int64), R.indices.astype(cupy.int32), R.data
    res = {}
    for L in (4, 8, 16, 32):
        fn = csr_cuda._module().get_function(f"csr_spmv<double,{L}>")
        def go(fn=fn, L=L):
            fn((-(-rows_c * L // 256),), (256,), (numpy.int64(rows_c), ip, ix, dv, r, y, y, numpy.float64(1.0), numpy.float64(0.0)))
        res[f"csr lanes {L}"] = timeit(go); assert float(abs(y - ref).max()) < 1e-9 * float(abs(ref).max())
    res["cusparse R @ r"] = timeit(lambda: R @ r)
    pip, pix, pdv = P.indptr.astype(cupy.int64), P.indices.astype(cupy.int32), P.data
    f = mod.get_function("scatter_t")
    def scat():
        y.fill(0.0)
        f((-(-rows_f // 256),), (256,), (numpy.int64(rows_f), pip, pix, pdv, r, y))
    res["scatter P rows (atomics) incl. zeroing"] = timeit(scat); assert float(abs(y - ref).max()) < 1e-9 * float(abs(ref).max())
    width = int(cupy.diff(P.indptr).max())
    cols = cupy.full((width, rows_f), -1, dtype=cupy.int32); vals = cupy.zeros((width, rows_f))
    cnt = cupy.diff(P.indptr); rowid = cupy.repeat(cupy.arange(rows_f), cnt.get().tolist()) if False else None
    rowid = cupy.searchsorted(P.indptr[1:], cupy.arange(P.nnz), side="right")
    slot = cupy.arange(P.nnz) - P.indptr[rowid]
    cols[slot, rowid] = P.indices; vals[slot, rowid] = P.data
    g = mod.get_function("scatter_ell")
    def ell():
        y.fill(0.0)
        g((-(-rows_f // 256),), (256,), (numpy.int64(rows_f), numpy.int32(width), cols, vals, r, y))
    res[f"scatter P ELL width {width} (atomics) incl. zeroing"] = timeit(ell); assert float(abs(y - ref).max()) < 1e-9 * float(abs(ref).max())
    res["zeroing alone"] = timeit(lambda: y.fill(0.0))
    res["P x_c (SELL, the cycle's)"] = timeit(lambda: spmv(level.P, y, r))
    res["nnz"] = int(R.nnz); res["rows"] = [rows_c, rows_f]
    out[k] = res
    print(k, json.dumps(res, indent=1), flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
