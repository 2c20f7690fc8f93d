"""The Krylov building blocks on the GPU: the fused three-term vector update
(``krylov.cu``) and the tall-skinny Gram and block products by cuBLAS."""

import functools
import pathlib

import cupy
import numpy

_NULL = numpy.uint64(0)


_VECTOR_TYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}
_TEMPLATES = ("chebyshev_step", "chebyshev_start", "dense_matvec")  # on the vectors' type


@functools.cache
def _module():
    source = pathlib.Path(__file__).with_name("krylov.cu").read_text()
    names = [f"{name}<{vector}>" for name in _TEMPLATES for vector in _VECTOR_TYPES.values()]
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=names)


def _kernel(name, vectors=None):
    """The kernel ``name``; one of _TEMPLATES for the type of the array ``vectors``."""
    return _module().get_function(name if vectors is None else f"{name}<{_VECTOR_TYPES[vectors.dtype]}>")


def three_term(w, a, x, b, y, c, z, d=None, scaled=None):
    """w = a x + b y + c z, and scaled = d w when d is given (krylov.cu)."""
    n = w.size
    if n:
        block = 256
        _kernel("three_term")((-(-n // block),), (block,), (numpy.int64(n), numpy.float64(a), x, numpy.float64(b),
                                                           y, numpy.float64(c), z, w,
                                                           _NULL if d is None else d, _NULL if d is None else scaled))


def chebyshev_step(x, d, r, inv_diag, a, b):
    """d = a d + b inv_diag r, then x += d (krylov.cu)."""
    n = x.size
    if n:
        block = 256
        _kernel("chebyshev_step", x)((-(-n // block),), (block,), (numpy.int64(n), numpy.float64(a), numpy.float64(b),
                                                                r, inv_diag, d, x))


def chebyshev_start(x, d, r, inv_diag, b):
    """d = b inv_diag r, then x = d (krylov.cu)."""
    n = x.size
    if n:
        block = 256
        _kernel("chebyshev_start", x)((-(-n // block),), (block,), (numpy.int64(n), numpy.float64(b), r, inv_diag, d, x))


def dot_pairs(out, xs, ys):
    """out[k] = xs[k] . ys[k] for up to 3 pairs, left in device memory (krylov.cu)."""
    out[...] = 0.0
    n, pairs = xs[0].size, len(xs)
    if n:
        block = 256
        grid = min(-(-n // block), 1024)
        vectors = [v for pair in zip(xs, ys) for v in pair] + [xs[0]] * (6 - 2 * pairs)
        _kernel("dot_pairs")((grid,), (block,), (numpy.int64(n), numpy.int32(pairs), *vectors, out))


def kcycle_residual(rt, s, b, v1):
    """rt = b - (s[1] / s[0]) v1 (krylov.cu)."""
    n = rt.size
    if n:
        block = 256
        _kernel("kcycle_residual")((-(-n // block),), (block,), (numpy.int64(n), s, b, v1, rt))


def kcycle_combine(x, s, c1, c2):
    """The K-cycle's correction x from its two directions and the coefficients s (krylov.cu)."""
    n = x.size
    if n:
        block = 256
        _kernel("kcycle_combine")((-(-n // block),), (block,), (numpy.int64(n), s, c1, c2, x))


def ts_gram(X, Y, chunk=1024):
    """X Y^T for tall-skinny blocks: one cuBLAS strided-batched GEMM over chunks
    of columns, straight on the row blocks (no copies), then a sum of the
    partial products (Ali et al. 2019, section IV.C; accurate as well as fast)."""
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


def matvec(y, A, x):
    """y = A x (krylov.cu's dense_matvec: a warp per row), capturable in a CUDA
    graph, which cuBLAS and cupy.matmul are not under CuPy."""
    m, n = A.shape
    if m:
        block = 256
        _kernel("dense_matvec", x)((-(-m * 32 // block),), (block,), (numpy.int64(m), numpy.int64(n), A, x, y))


def _leading_dimension(M):
    """Row stride in elements; a single row may carry any stride, cuBLAS wants at least its length."""
    return M.strides[0] // 8 if M.shape[0] > 1 else M.shape[1]
