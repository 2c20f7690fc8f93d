"""Launchers for ``sell.cu``, compiled once per process with ``cupy.RawModule``.

Kernels run on CuPy's current stream; ``petsc_ext`` makes that PETSc's stream.
``TUNING`` holds the launch choices measured by benchmarks/spmv.py.
"""

import functools
import pathlib
import weakref

import cupy
import numpy

MAX_VECTORS = 4  # widest generalized SpMV compiled; more vectors go in chunks
_VALUE_TYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}
_NULL = numpy.uint64(0)

# Rows per thread (16-byte value loads) and threads per block, per value type
# (BENCHMARKS.md, "kernel tuning").
TUNING = {
    numpy.dtype(numpy.float64): {"rows_per_thread": 2, "block": 256},
    numpy.dtype(numpy.float32): {"rows_per_thread": 4, "block": 256},
}


def _spmv_name(value_type, nvec, rows):
    return f"sell_spmv<{value_type},{nvec},{rows}>"


@functools.cache
def _module(value_type, rows):
    """The kernels of one value type and row grouping, compiled on first use."""
    source = pathlib.Path(__file__).with_name("sell.cu").read_text()
    names = [_spmv_name(value_type, n, rows) for n in range(1, MAX_VECTORS + 1)] + [f"sell_diagonal<{value_type}>"]
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=names)


class _Launch:
    """What one matrix's launches share: kernels, grid, leading arguments."""

    def __init__(self, A):
        tuning = TUNING[A.vals.dtype]
        rows = tuning["rows_per_thread"] if A.slice_height % tuning["rows_per_thread"] == 0 else 1
        value_type = _VALUE_TYPES[A.vals.dtype]
        module = _module(value_type, rows)
        self.spmv = [module.get_function(_spmv_name(value_type, n, rows)) for n in range(1, MAX_VECTORS + 1)]
        self.diagonal = module.get_function(f"sell_diagonal<{value_type}>")
        block = tuning["block"]
        self.block = (block,)
        self.grid = (-(-A.shape[0] // (rows * block)),)
        self.diagonal_grid = (-(-A.shape[0] // block),)
        row_of = A.row_of if A.row_of is not None else _NULL
        self.args = (A.slice_ptr, A.cols, A.vals, row_of, numpy.int32(A.shape[0]), numpy.int32(A.slice_height))


_launches = weakref.WeakKeyDictionary()


def _launch(A):
    launch = _launches.get(A)
    if launch is None:
        launch = _launches[A] = _Launch(A)
    return launch


def spmv(A, x, y, z, alpha, beta):
    """Y = alpha A X + beta Z; 1-D vectors, or 2-D (k, n) blocks of k vectors."""
    if A.shape[0] == 0:
        return
    launch = _launch(A)
    scalars = (numpy.float64(alpha), numpy.float64(beta))
    if x.ndim == 1:
        launch.spmv[0](launch.grid, launch.block, launch.args + (x, numpy.int64(0), y, z, numpy.int64(0)) + scalars)
        return
    ldx, ldy = numpy.int64(x.strides[0] // 8), numpy.int64(y.strides[0] // 8)
    for j in range(0, x.shape[0], MAX_VECTORS):
        nvec = min(MAX_VECTORS, x.shape[0] - j)
        launch.spmv[nvec - 1](launch.grid, launch.block, launch.args + (x[j], ldx, y[j], z[j], ldy) + scalars)


def diagonal(A, d):
    if A.shape[0] == 0:
        return
    launch = _launch(A)
    launch.diagonal(launch.diagonal_grid, launch.block, launch.args + (numpy.int32(min(A.shape)), d))


def forget(A):
    """Drop cached launches of A (after TUNING changed, or A's arrays were replaced)."""
    _launches.pop(A, None)


LOCAL_SIZES = (8, 16, 32, 64)  # compiled bounds on a task's pattern length


@functools.cache
def _local_kernel(bound):
    """The local-solve kernel for patterns of up to ``bound`` entries, compiled on first use."""
    source = pathlib.Path(__file__).with_name("local_solves.cu").read_text()
    name = f"local_cholesky_solve<{bound}>"
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=[name]).get_function(name)


def local_cholesky_solve(pattern_ptr, pattern_cols, b_ptr, b_cols, b_vals, rhs):
    """Per task, Cholesky-solve B[P, P] x = rhs on P (local_solves.cu)."""
    ntasks = pattern_ptr.size - 1
    x = cupy.zeros(pattern_cols.size)
    info = cupy.zeros(ntasks, dtype=cupy.int32)
    if ntasks == 0:
        return x, info
    longest = int((pattern_ptr[1:] - pattern_ptr[:-1]).max())
    bound = next(m for m in LOCAL_SIZES if m >= longest)
    block = 128
    _local_kernel(bound)(
        (-(-ntasks // block),), (block,),
        (numpy.int32(ntasks), pattern_ptr, pattern_cols, b_ptr, b_cols, b_vals, rhs, x, info))
    return x, info


@functools.cache
def _blas1(name):
    source = pathlib.Path(__file__).with_name("blas1.cu").read_text()
    return cupy.RawModule(code=source).get_function(name)


def three_term(w, a, x, b, y, c, z, d=None, scaled=None):
    """w = a x + b y + c z, and scaled = d w when d is given (blas1.cu)."""
    n = w.size
    if n:
        block = 256
        _blas1("three_term")((-(-n // block),), (block,), (numpy.int64(n), numpy.float64(a), x, numpy.float64(b),
                                                           y, numpy.float64(c), z, w,
                                                           _NULL if d is None else d, _NULL if d is None else scaled))


def explicit_update(out, u, s, r, w):
    """out = u + w (s - r), w one weight per column of the (dim, n) blocks (blas1.cu)."""
    total = out.size
    if total:
        block = 256
        _blas1("explicit_update")((-(-total // block),), (block,),
                                  (numpy.int64(w.size), numpy.int64(total), u, s, r, w, out))


def ts_gram(X, Y, chunk=1024):
    """X Y^T for tall-skinny blocks: one cuBLAS strided-batched GEMM over chunks
    of columns, straight on the row blocks (no copies), then a sum of the
    partial products (seed 004, section 1.7; accurate as well as fast)."""
    from cupy.cuda import cublas

    s1, s2, n = len(X), len(Y), X.shape[1]
    nchunks = n // chunk
    total = cupy.zeros((s2, s1))  # column-major s1 x s2
    if nchunks:
        partial = cupy.empty((nchunks, s2, s1))
        one, zero = numpy.ones(1), numpy.zeros(1)
        handle = cupy.cuda.device.get_cublas_handle()
        cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
        cublas.dgemmStridedBatched(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, s1, s2, chunk,
                                   one.ctypes.data, X.data.ptr, X.strides[0] // 8, chunk,
                                   Y.data.ptr, Y.strides[0] // 8, chunk,
                                   zero.ctypes.data, partial.data.ptr, s1, s1 * s2, nchunks)
        total = partial.sum(axis=0)
    rest = nchunks * chunk
    return total.T + (X[:, rest:] @ Y[:, rest:].T if rest < n else 0.0)


def gemm_accumulate(C, alpha, A, B):
    """C += alpha A B in place (one cuBLAS dgemm with beta = 1, no temporary),
    for row-major blocks whose rows are contiguous: C (m, n), A (m, k), B (k, n)."""
    from cupy.cuda import cublas

    m, n, k = C.shape[0], C.shape[1], A.shape[1]
    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    A = cupy.ascontiguousarray(A)
    alpha, one = numpy.array([alpha], dtype=numpy.float64), numpy.ones(1)
    # row-major C = A B is column-major C^T = B^T A^T
    cublas.dgemm(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, m, k, alpha.ctypes.data,
                 B.data.ptr, _leading_dimension(B), A.data.ptr, k, one.ctypes.data, C.data.ptr, _leading_dimension(C))


def _leading_dimension(M):
    """Row stride in elements; a single row may carry any stride, cuBLAS wants at least its length."""
    return M.strides[0] // 8 if M.shape[0] > 1 else M.shape[1]


def capture(fn):
    """A CUDA graph of the work ``fn`` queues on the current stream; fn runs
    once, on the host, while a private stream captures that work."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            fn()
        finally:
            graph = stream.end_capture()
    return graph


def replay(graph):
    """Launch a captured graph on the current stream."""
    graph.launch(cupy.cuda.get_current_stream())
