"""The flow driver's vector updates on the GPU (``flow.cu``)."""

import functools
import pathlib

import cupy
import numpy

from .. import family
from . import BASE

_NULL = numpy.uint64(0)


@functools.cache
def _module():
    return cupy.RawModule(code=pathlib.Path(__file__).with_name("flow.cu").read_text())


def _kernel(name):
    return _module().get_function(name)


@functools.cache
def _loop_module():
    """loop.cu, a module of its own: its kernels call the device runtime's cudaGraphSetConditional."""
    return cupy.RawModule(code=pathlib.Path(__file__).with_name("loop.cu").read_text())


def _loop_kernel(name):
    return _loop_module().get_function(name)


def explicit_update(out, u, s, r, w):
    """out = u + w (s - r), w one weight per column of the (dim, n) blocks (flow.cu)."""
    total = out.size
    if total:
        block = 256
        _kernel("explicit_update")((-(-total // block),), (block,),
                                  (numpy.int64(w.size), numpy.int64(total), u, s, r, w, out))


def upwind_outflow(out, u_s, faces):
    """out = u_s, max(u_s, 0) on faces (flow.cu; the copy by the blas family's kernel, in place)."""
    if out is not u_s:
        family("blas", cupy).copy(out, u_s)
    count = faces.size
    if count:
        block = 256
        _kernel("upwind_outflow")((-(-count // block),), (block,), (numpy.int64(count), faces, u_s, out))


def functional(out, starts, which, index, weight, s0, s1, s2, s3):
    """Linear functionals of up to four arrays (flow.cu), one block a row."""
    if out.size:
        _kernel("functional")((out.size,), (128,), (starts, which, index, weight, s0, s1, s2, s3, out))


def gather_plan(sources):
    """The sources' addresses, lengths and offsets in out, in device memory, and their total length."""
    lengths = numpy.array([a.size for a in sources], dtype=numpy.int64)
    offsets = numpy.concatenate([[0], numpy.cumsum(lengths)[:-1]]).astype(numpy.int64)
    pointers = numpy.array([a.data.ptr for a in sources], dtype=numpy.uint64)
    return (*(cupy.asarray(a) for a in (pointers, lengths, offsets)), int(lengths.sum()))


def gather(out, plan, at=None):
    """The plan's sources into out (device or pinned host memory), one kernel (flow.cu)."""
    pointers, lengths, offsets, total = plan
    if pointers.size:
        address = out.data.ptr if isinstance(out, cupy.ndarray) else out.ctypes.data
        row = _NULL if at is None else at[BASE:]
        _kernel("gather")((pointers.size,), (128,), (pointers, lengths, offsets, numpy.uint64(address), row,
                                                    numpy.int64(total)))


def stamp(out, slot):
    """The device's %globaltimer into out[slot], one thread (flow.cu)."""
    address = out.data.ptr if isinstance(out, cupy.ndarray) else out.ctypes.data
    _kernel("stamp")((1,), (1,), (numpy.uint64(address), numpy.int64(slot)))


def lap(out, slot, since):
    """out[slot] += the device's %globaltimer - out[since], one thread (flow.cu)."""
    address = out.data.ptr if isinstance(out, cupy.ndarray) else out.ctypes.data
    _kernel("lap")((1,), (1,), (numpy.uint64(address), numpy.int64(slot), numpy.int64(since)))


def loop_start(status, limit, base):
    _loop_kernel("loop_start")((1,), (1,), (status, numpy.float64(limit), numpy.float64(base)))


def loop_go(status, handle):
    _loop_kernel("loop_go")((1,), (1,), (status, numpy.uint64(handle)))


def step_verdict(status, rate, change, dt, rule, handle):
    cfl, other_limit, band, cfl_max, steady_tol, fixed = rule
    _loop_kernel("step_verdict")((1,), (1,), (status, rate, change, *map(numpy.float64, (dt, cfl, other_limit, band,
                                                                                          cfl_max, steady_tol)),
                                              numpy.int32(bool(fixed)), numpy.uint64(handle)))
