"""Vector and block products on the GPU: the fused three-term vector update,
the copy and the fill (``blas.cu``) and the tall-skinny Gram and block
products by cuBLAS."""

import functools
import pathlib

import cupy
import numpy

from .layout import check_fill, copy_words

_NULL = numpy.uint64(0)


@functools.cache
def _module():
    return cupy.RawModule(code=pathlib.Path(__file__).with_name("blas.cu").read_text())


def three_term(w, a, x, b, y, c, z, d=None, scaled=None):
    """w = a x + b y + c z, and scaled = d w when d is given (blas.cu)."""
    n = w.size
    if n:
        block = 256
        _module().get_function("three_term")((-(-n // block),), (block,), (numpy.int64(n), numpy.float64(a), x, numpy.float64(b),
                                                           y, numpy.float64(c), z, w,
                                                           _NULL if d is None else d, _NULL if d is None else scaled))


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


def _leading_dimension(M):
    """Row stride in elements; a single row may carry any stride, cuBLAS wants at least its length."""
    return M.strides[0] // 8 if M.shape[0] > 1 else M.shape[1]


_MAX_BLOCK, _MAX_SLOTS = 256, 1024  # as blas.cu


def reduction_slots(n):
    """One partial maximum per block of the grid, at most one final block's worth."""
    return max(1, min(-(-n // _MAX_BLOCK), _MAX_SLOTS))


def max_abs(out, x, y=None, partials=None):
    """out[0] = max |x - y| (blas.cu: two passes into ``partials``, no temporaries)."""
    slots = reduction_slots(x.size)
    _module().get_function("partial_max_abs")((slots,), (_MAX_BLOCK,),
                                              (numpy.int64(x.size), x, _NULL if y is None else y, partials))
    _module().get_function("final_max")((1,), (_MAX_SLOTS,), (numpy.int32(slots), partials, out))


def copy(w, x):
    """w = x by one kernel (blas.cu's copy_words), not a memcpy."""
    words = copy_words(w, x)
    if words:
        block = 256
        _module().get_function("copy_words")((-(-words // block),), (block,), (numpy.int64(words), x, w))


def fill(w, value):
    """w = value by one kernel (blas.cu), not a memset."""
    check_fill(w)
    if w.size:
        block = 256
        _module().get_function("fill")((-(-w.size // block),), (block,), (numpy.int64(w.size), numpy.float64(value), w))
