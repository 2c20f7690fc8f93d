"""Launchers for ``sell.cu``, compiled once per process with ``cupy.RawModule``.

Kernels run on CuPy's current stream; ``petsc_ext`` makes that PETSc's stream.
"""

import functools
import pathlib

import cupy
import numpy

BLOCK = 256
MAX_VECTORS = 4  # widest generalized SpMV compiled; more vectors go in chunks
_VALUE_TYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}
_NULL = numpy.uint64(0)


def _spmv_name(value_type, nvec):
    return f"sell_spmv<{value_type},{nvec}>"


def _diagonal_name(value_type):
    return f"sell_diagonal<{value_type}>"


@functools.cache
def _module():
    source = pathlib.Path(__file__).with_name("sell.cu").read_text()
    names = [_spmv_name(v, n) for v in _VALUE_TYPES.values() for n in range(1, MAX_VECTORS + 1)]
    names += [_diagonal_name(v) for v in _VALUE_TYPES.values()]
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=names)


@functools.cache
def _kernel(name):
    return _module().get_function(name)


def _matrix_args(A):
    row_of = A.row_of if A.row_of is not None else _NULL
    return (A.slice_ptr, A.cols, A.vals, row_of, numpy.int32(A.shape[0]), numpy.int32(A.slice_height))


def spmv(A, x, y, z, alpha, beta):
    """Y = alpha A X + beta Z; 1-D vectors, or 2-D (k, n) blocks of k vectors."""
    nrows = A.shape[0]
    if nrows == 0:
        return
    grid = ((nrows + BLOCK - 1) // BLOCK,)
    value_type = _VALUE_TYPES[A.vals.dtype]
    alpha, beta = numpy.float64(alpha), numpy.float64(beta)
    if x.ndim == 1:
        _kernel(_spmv_name(value_type, 1))(grid, (BLOCK,), _matrix_args(A) + (
            x, numpy.int64(0), y, z, numpy.int64(0), alpha, beta))
        return
    ldx, ldy = numpy.int64(x.strides[0] // 8), numpy.int64(y.strides[0] // 8)
    for j in range(0, x.shape[0], MAX_VECTORS):
        nvec = min(MAX_VECTORS, x.shape[0] - j)
        _kernel(_spmv_name(value_type, nvec))(grid, (BLOCK,), _matrix_args(A) + (
            x[j], ldx, y[j], z[j], ldy, alpha, beta))


def diagonal(A, d):
    nrows = A.shape[0]
    if nrows == 0:
        return
    grid = ((nrows + BLOCK - 1) // BLOCK,)
    _kernel(_diagonal_name(_VALUE_TYPES[A.vals.dtype]))(grid, (BLOCK,), _matrix_args(A) + (
        numpy.int32(d.size), d))
