"""The stencil family on the GPU: launchers for ``stencil.cu``, compiled once
per process with ``cupy.RawModule``."""

import functools
import pathlib

import cupy
import numpy

_VALUE_TYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}
BLOCK = 256
WIDTHS = (1, 2, 3, 4)  # table widths of tensor_transfer compiled


@functools.cache
def _module():
    source = pathlib.Path(__file__).with_name("stencil.cu").read_text()
    types = _VALUE_TYPES.values()
    names = [f"{kernel}<{value},{vector}>" for kernel in ("stencil_spmv", "stencil_chebyshev", "stencil_chebyshev_first")
             for value in types for vector in types] + [f"tensor_transfer<{width},{vector}>" for width in WIDTHS
                                                          for vector in types]
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=names)


def _grid(S):
    """The kernels' grid arguments: nx, ny, nz, the periodic axes' bits, cx, cy, cz (2D: one cell along z)."""
    shape, couplings = tuple(S.shape) + (1,) * (3 - len(S.shape)), tuple(S.couplings) + (0.0,) * (3 - len(S.shape))
    bits = sum(1 << d for d, wraps in enumerate(S.periodic) if wraps)
    return (*(numpy.int32(n) for n in shape), numpy.int32(bits), *(numpy.float64(c) for c in couplings))


def _launch(kernel, S, x, *args):
    """``kernel`` for S's values and the vectors' type, that of ``x``, the first vector of ``args``."""
    n = S.diag.size
    if n:
        function = _module().get_function(f"{kernel}<{_VALUE_TYPES[S.diag.dtype]},{_VALUE_TYPES[x.dtype]}>")
        function((-(-n // BLOCK),), (BLOCK,), (numpy.int64(n), *_grid(S), S.diag, x, *args))


def spmv(S, x, y, z, alpha, beta):
    """y = alpha S x + beta z (stencil.cu's stencil_spmv)."""
    _launch("stencil_spmv", S, x, y, z, numpy.float64(alpha), numpy.float64(beta))


def chebyshev_step(S, d, d_next, r, z, scaling, x, a, c):
    """r = z - S d; d_next = a d + c scaling r; x += d_next (stencil.cu's stencil_chebyshev)."""
    _launch("stencil_chebyshev", S, d, d_next, r, z, scaling, x, numpy.float64(a), numpy.float64(c))


def chebyshev_first(S, b, scaling, d_next, r, x, c0, a, c):
    """The first two smoothing steps from x = 0 (stencil.cu's stencil_chebyshev_first)."""
    _launch("stencil_chebyshev_first", S, b, scaling, d_next, r, x, numpy.float64(c0), numpy.float64(a),
            numpy.float64(c))


def transfer(T, x, y, z, alpha, beta):
    """y = alpha T x + beta z (stencil.cu's tensor_transfer)."""
    n = int(numpy.prod(T.out_shape))
    if n:
        tables = [a for d in range(3) for a in (T.cols[d], T.weights[d])]
        _module().get_function(f"tensor_transfer<{T.width},{_VALUE_TYPES[x.dtype]}>")(
            (-(-n // BLOCK),), (BLOCK,),
            (numpy.int32(n), numpy.int32(T.out_shape[0]), numpy.int32(T.out_shape[1]), numpy.int32(T.in_shape[0]),
             numpy.int32(T.in_shape[1]), *tables, x, y, z, numpy.float64(alpha),
             numpy.float64(beta)))
