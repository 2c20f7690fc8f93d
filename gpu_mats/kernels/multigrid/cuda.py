"""The multigrid cycle's vector kernels on the GPU (``multigrid.cu``)."""

import functools
import pathlib

import cupy
import numpy

_VECTOR_TYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}
_TEMPLATES = ("chebyshev_step", "chebyshev_start", "dense_matvec")  # on the vectors' type


@functools.cache
def _module():
    source = pathlib.Path(__file__).with_name("multigrid.cu").read_text()
    names = [f"{name}<{vector}>" for name in _TEMPLATES for vector in _VECTOR_TYPES.values()]
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=names)


def _kernel(name, vectors=None):
    """The kernel ``name``; one of _TEMPLATES for the type of the array ``vectors``."""
    return _module().get_function(name if vectors is None else f"{name}<{_VECTOR_TYPES[vectors.dtype]}>")


def chebyshev_step(x, d, r, inv_diag, a, b):
    """d = a d + b inv_diag r, then x += d (multigrid.cu)."""
    n = x.size
    if n:
        block = 256
        _kernel("chebyshev_step", x)((-(-n // block),), (block,), (numpy.int64(n), numpy.float64(a), numpy.float64(b),
                                                                r, inv_diag, d, x))


def chebyshev_start(x, d, r, inv_diag, b):
    """d = b inv_diag r, then x = d (multigrid.cu)."""
    n = x.size
    if n:
        block = 256
        _kernel("chebyshev_start", x)((-(-n // block),), (block,), (numpy.int64(n), numpy.float64(b), r, inv_diag, d, x))


def dot_pairs(out, xs, ys):
    """out[k] = xs[k] . ys[k] for up to 3 pairs, left in device memory (multigrid.cu)."""
    out[...] = 0.0
    n, pairs = xs[0].size, len(xs)
    if n:
        block = 256
        grid = min(-(-n // block), 1024)
        vectors = [v for pair in zip(xs, ys) for v in pair] + [xs[0]] * (6 - 2 * pairs)
        _kernel("dot_pairs")((grid,), (block,), (numpy.int64(n), numpy.int32(pairs), *vectors, out))


def kcycle_residual(rt, s, b, v1):
    """rt = b - (s[1] / s[0]) v1 (multigrid.cu)."""
    n = rt.size
    if n:
        block = 256
        _kernel("kcycle_residual")((-(-n // block),), (block,), (numpy.int64(n), s, b, v1, rt))


def kcycle_combine(x, s, c1, c2):
    """The K-cycle's correction x from its two directions and the coefficients s (multigrid.cu)."""
    n = x.size
    if n:
        block = 256
        _kernel("kcycle_combine")((-(-n // block),), (block,), (numpy.int64(n), s, c1, c2, x))


def matvec(y, A, x):
    """y = A x (multigrid.cu's dense_matvec: a warp per row), capturable in a CUDA
    graph, which cuBLAS and cupy.matmul are not under CuPy."""
    m, n = A.shape
    if m:
        block = 256
        _kernel("dense_matvec", x)((-(-m * 32 // block),), (block,), (numpy.int64(m), numpy.int64(n), A, x, y))
