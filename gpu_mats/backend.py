"""Array backends: NumPy for host memory, CuPy for device memory.

The backend follows the data: a CuPy array is worked on by the CUDA kernels, a
NumPy array by their NumPy twins. ``resolve`` turns a user's choice
(``auto``, ``cupy`` or ``numpy``) into an array module, failing clearly when
``cupy`` is asked for and no GPU is usable, and telling once when ``auto``
falls back to NumPy.
"""

import contextlib
import functools
import sys
import time

import numpy

BACKENDS = ("auto", "cupy", "numpy")


class BackendError(RuntimeError):
    """The requested backend cannot be used here."""


@functools.cache
def cupy_status():
    """Return ``(cupy module or None, reason it is unusable or '')``."""
    try:
        import cupy
    except ImportError as exc:
        return None, f"CuPy is not installed ({exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver or runtime missing
        return None, f"CuPy cannot reach a CUDA device ({exc})"
    if count < 1:
        return None, "no CUDA device is visible"
    return cupy, ""


_notified = False


def _notify_once(message, notify):
    global _notified
    if not _notified:
        _notified = True
        notify(message)


def _stderr(message):
    print(message, file=sys.stderr)


def resolve(choice="auto", *, unavailable_reason="", notify=_stderr):
    """Return the array module for ``choice``.

    ``unavailable_reason`` lets a caller veto the GPU for its own reasons
    (a PETSc built without CUDA, say); it is treated like a missing GPU.
    """
    if choice not in BACKENDS:
        raise BackendError(f"unknown GPU backend '{choice}': valid values are {', '.join(BACKENDS)}")
    if choice == "numpy":
        return numpy
    cupy, reason = cupy_status()
    reason = unavailable_reason or reason
    if cupy is not None and not reason:
        return cupy
    if choice == "cupy":
        raise BackendError(f"GPU backend 'cupy' was requested but cannot be used: {reason}")
    _notify_once(f"petsc-gpu-fv: no usable GPU ({reason}); using the NumPy backend", notify)
    return numpy


def to_host(xp, array):
    """``array`` (of module ``xp``) as a NumPy array: itself on the host, a copy from the device."""
    return array if xp is numpy else xp.asnumpy(array)


def address(array):
    """Where a NumPy or CuPy array's values start in memory: the key of what reads them (a Vec over
    them, a CUDA graph)."""
    return array.ctypes.data if isinstance(array, numpy.ndarray) else array.data.ptr


def sparse_module(xp):
    """scipy.sparse for NumPy arrays, cupyx.scipy.sparse (the same API) for CuPy ones."""
    if xp is numpy:
        import scipy.sparse

        return scipy.sparse
    import cupyx.scipy.sparse

    return cupyx.scipy.sparse


def array_module(array):
    """The module (numpy or cupy) that owns ``array``."""
    if isinstance(array, numpy.ndarray):
        return numpy
    cupy, _ = cupy_status()
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy
    raise TypeError(f"expected a NumPy or CuPy array, got {type(array).__name__}")


def scatter_min(xp, out, index, values):
    """out[index] = min(out[index], values), repeated indices included (numpy.minimum.at, cupyx.scatter_min)."""
    if xp is numpy:
        numpy.minimum.at(out, index, values)
    else:
        import cupyx

        cupyx.scatter_min(out, index, values)


def scatter_max(xp, out, index, values):
    """out[index] = max(out[index], values), repeated indices included (numpy.maximum.at, cupyx.scatter_max)."""
    if xp is numpy:
        numpy.maximum.at(out, index, values)
    else:
        import cupyx

        cupyx.scatter_max(out, index, values)


def hashed_bits(xp, n, seed=0):
    """n pseudo-random uint64 made where they are used, the same on NumPy and
    CuPy: SplitMix64's finalizer of (seed, index) (Steele, Lea and Flood,
    "Fast splittable pseudorandom number generators", OOPSLA 2014). A host
    generator's 16.7M numbers, copied to the GPU, took most of gpuamg's
    smoother set-up at 256^3."""
    z = xp.arange(n, dtype=xp.uint64) + xp.uint64((seed * 0x9E3779B97F4A7C15 + 1) % 2**64)
    z = (z ^ (z >> xp.uint64(30))) * xp.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> xp.uint64(27))) * xp.uint64(0x94D049BB133111EB)
    return z ^ (z >> xp.uint64(31))


@contextlib.contextmanager
def timed(xp, seconds, name):
    """Add the wall time of the block to ``seconds[name]``, taken after a device
    synchronize for CuPy so that it counts the GPU work queued, not only its
    launches."""
    start = time.perf_counter()
    try:
        yield
    finally:
        if xp is not numpy:
            xp.cuda.get_current_stream().synchronize()
        seconds[name] += time.perf_counter() - start
