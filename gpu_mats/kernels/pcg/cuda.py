"""CG's vector and scalar steps on the GPU (``pcg.cu``)."""

import functools
import pathlib

import cupy
import numpy

from . import AFTER_ITERATION

BLOCK, SUM_BLOCK = 256, 1024  # as pcg.cu
_NULL = numpy.uint64(0)


@functools.cache
def _kernel(name):
    return cupy.RawModule(code=pathlib.Path(__file__).with_name("pcg.cu").read_text()).get_function(name)


def partial_count(n):
    """One partial sum per block of the grid: enough blocks to fill the GPU, at most one sum block's worth."""
    return max(1, min(-(-n // BLOCK), SUM_BLOCK))


def partial_dots(partials, x0, y0, x1=None, y1=None, x2=None, y2=None):
    pairs = 1 if x1 is None else 2 if x2 is None else 3
    _kernel("partial_dots")((partials.shape[1],), (BLOCK,),
                            (numpy.int64(x0.size), numpy.int32(pairs), x0, y0, _NULL if x1 is None else x1,
                             _NULL if y1 is None else y1, _NULL if x2 is None else x2, _NULL if y2 is None else y2,
                             partials))


def sum_partials(sums, partials):
    _kernel("sum_partials")((1,), (SUM_BLOCK,), (numpy.int32(partials.shape[1]), partials, sums))


def alpha_step(s, sums, dots=None):
    if dots is None:
        _kernel("alpha_step")((1,), (1,), (s, sums))
        return
    partials, arrivals, x, y = dots
    _kernel("dots_alpha_step")((partials.shape[1],), (BLOCK,), (numpy.int64(x.size), x, y, partials, arrivals, sums, s))


def beta_step(s, sums, history, start, dots=None, test=None):
    if dots is not None and test is not None:
        partials, arrivals, r, z = dots
        column, rtol, atol, dtol, limit, handle = test
        _loop_kernel("dots_beta_test_step")(
            (partials.shape[1],), (BLOCK,),
            (numpy.int64(r.size), r, z, partials, arrivals, sums, s, history, numpy.int32(column), numpy.float64(rtol),
             numpy.float64(atol), numpy.float64(dtol), numpy.int32(limit), numpy.uint64(handle)))
        return
    if dots is None:
        _kernel("beta_step")((1,), (1,), (s, sums, history, numpy.int32(bool(start))))
    else:
        partials, arrivals, r, z = dots
        _kernel("dots_beta_step")((partials.shape[1],), (BLOCK,), (numpy.int64(r.size), r, z, partials, arrivals, sums,
                                                                  s, history, numpy.int32(bool(start))))
    if test is not None:
        loop_test(s, history, *test[:5], AFTER_ITERATION, test[5])


def record_step(s, sums, history, start, dots=None, test=None):
    if dots is not None and test is not None:
        partials, arrivals, r = dots
        column, rtol, atol, dtol, limit, handle = test
        _loop_kernel("dots_record_test_step")(
            (partials.shape[1],), (BLOCK,),
            (numpy.int64(r.size), r, partials, arrivals, sums, s, history, numpy.int32(column), numpy.float64(rtol),
             numpy.float64(atol), numpy.float64(dtol), numpy.int32(limit), numpy.uint64(handle)))
        return
    if dots is None:
        _kernel("record_step")((1,), (1,), (s, sums, history, numpy.int32(bool(start))))
    else:
        partials, arrivals, r = dots
        _kernel("dots_record_step")((partials.shape[1],), (BLOCK,), (numpy.int64(r.size), r, partials, arrivals, sums,
                                                                    s, history, numpy.int32(bool(start))))
    if test is not None:
        loop_test(s, history, *test[:5], AFTER_ITERATION, test[5])


def direction_step(s, sums, dots=None):
    if dots is None:
        _kernel("direction_step")((1,), (1,), (s, sums))
        return
    partials, arrivals, r, z = dots
    _kernel("dots_direction_step")((partials.shape[1],), (BLOCK,), (numpy.int64(r.size), r, z, partials, arrivals,
                                                                    sums, s))


def remove_mean(v, sums):
    n = v.size
    if n:
        _kernel("remove_mean")((-(-n // BLOCK),), (BLOCK,), (numpy.int64(n), sums, v))


@functools.cache
def _loop_kernel(name):
    """loop.cu after pcg.cu, a module of their own: its kernels call the device runtime's
    cudaGraphSetConditional, which the others do not."""
    code = "".join(pathlib.Path(__file__).with_name(f).read_text() for f in ("pcg.cu", "loop.cu"))
    return cupy.RawModule(code=code).get_function(name)


def loop_test(s, history, column, rtol, atol, dtol, limit, mode, handle):
    _loop_kernel("loop_test")((1,), (1,), (s, history, numpy.int32(column), numpy.float64(rtol), numpy.float64(atol),
                                numpy.float64(dtol), numpy.int32(limit), numpy.int32(mode), numpy.uint64(handle)))


def update_iterate(s, x, r, p, w):
    n = x.size
    if n:
        _kernel("update_iterate")((-(-n // BLOCK),), (BLOCK,), (numpy.int64(n), s, x, r, p, w))


def update_direction(s, p, z):
    n = p.size
    if n:
        _kernel("update_direction")((-(-n // BLOCK),), (BLOCK,), (numpy.int64(n), s, p, z))
