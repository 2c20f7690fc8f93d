"""Subgrid-scale eddy viscosities on the GPU (``les.cu``)."""

import functools
import math
import pathlib

import cupy
import numpy

MODELS = ("smagorinsky", "wale", "sigma")  # les.cu's model numbers, in order


@functools.cache
def _kernel():
    return cupy.RawModule(code=pathlib.Path(__file__).with_name("les.cu").read_text()).get_function("eddy_viscosity")


def eddy_viscosity(model, gradient, width, constant, out):
    """nu_t of ``model`` for each cell (les.cu)."""
    n = out.size
    if n:
        block = 256
        dim = math.isqrt(gradient.shape[0])
        _kernel()((-(-n // block),), (block,), (numpy.int64(n), numpy.int32(dim), numpy.int32(MODELS.index(model)),
                                               cupy.ascontiguousarray(gradient, dtype=cupy.float64),
                                               cupy.ascontiguousarray(width, dtype=cupy.float64),
                                               numpy.float64(constant), out))
