"""CG's vector and scalar steps on the GPU (``pcg.cu``)."""

import functools
import pathlib

import cupy
import numpy

from . import AFTER_ITERATION

BLOCK, SUM_BLOCK = 256, 1024  # as pcg.cu
_NULL = numpy.uint64(0)


_TYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}  # z's, where a kernel takes both
TEMPLATES = tuple(f"{kernel}<{z}>" for kernel in ("dots_direction_step", "update_direction") for z in _TYPES.values())


@functools.cache
def _module():
    return cupy.RawModule(code=pathlib.Path(__file__).with_name("pcg.cu").read_text(), name_expressions=TEMPLATES)


def _kernel(name):
    return _module().get_function(name)


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


def _history_step(step, s, sums, history, start, dots, test):
    """beta_step's and record_step's launches (``step`` "beta" or "record"): the scalar step alone, or with its
    dot products (``dots``: partials, arrivals, r and beta's z), and with the test after an iteration in the
    same launch where both are given."""
    if dots is None:
        _kernel(f"{step}_step")((1,), (1,), (s, sums, history, numpy.int32(bool(start))))
    else:
        partials, arrivals, *vectors = dots
        grid, length = (partials.shape[1],), numpy.int64(vectors[0].size)
        if test is not None:
            column, rtol, atol, dtol, limit, handle = test
            r, z = vectors if step == "beta" else vectors * 2  # record's one product is r . r
            _loop_kernel(f"dots_test_step<{str(step == 'beta').lower()}>")(
                grid, (BLOCK,), (length, r, z, partials, arrivals, sums, s, history, numpy.int32(column),
                                 numpy.float64(rtol), numpy.float64(atol), numpy.float64(dtol), numpy.int32(limit),
                                 numpy.uint64(handle)))
            return
        _kernel(f"dots_{step}_step")(grid, (BLOCK,), (length, *vectors, partials, arrivals, sums, s, history,
                                                      numpy.int32(bool(start))))
    if test is not None:
        loop_test(s, history, *test[:5], AFTER_ITERATION, test[5])


def beta_step(s, sums, history, start, dots=None, test=None):
    _history_step("beta", s, sums, history, start, dots, test)


def record_step(s, sums, history, start, dots=None, test=None):
    _history_step("record", s, sums, history, start, dots, test)


def direction_step(s, sums, dots=None):
    if dots is None:
        _kernel("direction_step")((1,), (1,), (s, sums))
        return
    partials, arrivals, r, z = dots
    _kernel(f"dots_direction_step<{_TYPES[z.dtype]}>")((partials.shape[1],), (BLOCK,),
                                                        (numpy.int64(r.size), r, z, partials, arrivals, sums, s))


def remove_mean(v, sums, total=None):
    n = v.size
    if n:
        _kernel("remove_mean")((-(-n // BLOCK),), (BLOCK,), (numpy.int64(n), numpy.float64(n if total is None else total),
                                                             sums, v))


LOOP_TEMPLATES = ("dots_test_step<true>", "dots_test_step<false>")  # beta's, record's


@functools.cache
def _loop_module():
    """loop.cu after pcg.cu, a module of their own: its kernels call the device runtime's
    cudaGraphSetConditional, which the others do not."""
    code = "".join(pathlib.Path(__file__).with_name(f).read_text() for f in ("pcg.cu", "loop.cu"))
    return cupy.RawModule(code=code, name_expressions=LOOP_TEMPLATES)


def _loop_kernel(name):
    return _loop_module().get_function(name)


def loop_test(s, history, column, rtol, atol, dtol, limit, mode, handle):
    _loop_kernel("loop_test")((1,), (1,), (s, history, numpy.int32(column), numpy.float64(rtol), numpy.float64(atol),
                                numpy.float64(dtol), numpy.int32(limit), numpy.int32(mode), numpy.uint64(handle)))


def update_iterate(s, x, r, p, w):
    n = x.size
    if n:
        _kernel("update_iterate")((-(-n // BLOCK),), (BLOCK,), (numpy.int64(n), s, x, r, p, w))


def update_record_step(s, sums, history, x, r, p, w, partials, arrivals, test=None, rounded=None, z=None, az=None):
    grid = (partials.shape[1],)
    z, az, rounded = (_NULL if v is None else v for v in (z, az, rounded))
    if test is None:
        _kernel("update_record_step")(grid, (BLOCK,), (numpy.int64(x.size), s, x, r, p, w, z, az, rounded, partials,
                                                       arrivals, sums, history))
        return
    column, rtol, atol, dtol, limit, handle = test
    _loop_kernel("update_test_step")(grid, (BLOCK,), (
        numpy.int64(x.size), s, x, r, p, w, z, az, rounded, partials, arrivals, sums, history, numpy.int32(column),
        numpy.float64(rtol), numpy.float64(atol), numpy.float64(dtol), numpy.int32(limit), numpy.uint64(handle)))


def single_step(s, sums, dots=None):
    if dots is None:
        _kernel("single_step")((1,), (1,), (s, sums))
        return
    partials, arrivals, r, z, az = dots
    _kernel("dots_single_step")((partials.shape[1],), (BLOCK,),
                                (numpy.int64(r.size), r, z, az, partials, arrivals, sums, s))


def single_update(s, x, r, p, w, z, az):
    n = x.size
    if n:
        _kernel("single_update")((-(-n // BLOCK),), (BLOCK,), (numpy.int64(n), s, x, r, p, w, z, az))


def update_direction(s, p, z):
    n = p.size
    if n:
        _kernel(f"update_direction<{_TYPES[z.dtype]}>")((-(-n // BLOCK),), (BLOCK,), (numpy.int64(n), s, p, z))


def clear_unless_converged(flag, records, column):
    count, stride = records.shape
    _kernel("clear_unless_converged")((1,), (1,), (flag, records, numpy.int32(count), numpy.int64(stride),
                                                   numpy.int32(column)))
