"""CSR SpMV on the GPU, a warp per row (``csr.cu``): no library call, so a
CUDA graph can capture it."""

import functools
import pathlib

import cupy
import numpy

_NAMES = {numpy.dtype(numpy.float64): "csr_spmv_f64", numpy.dtype(numpy.float32): "csr_spmv_f32"}


@functools.cache
def _kernel(name):
    source = pathlib.Path(__file__).with_name("csr.cu").read_text()
    return cupy.RawModule(code=source, options=("--std=c++14",)).get_function(name)


def spmv(indptr, indices, data, x, y):
    """y = A x (csr.cu)."""
    rows = y.size
    if rows:
        block = 256
        _kernel(_NAMES[data.dtype])((-(-rows * 32 // block),), (block,),
                                    (numpy.int64(rows), indptr, indices, data, x, y))
