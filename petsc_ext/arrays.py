"""Vec <-> array views without copies.

Every access goes through PETSc's Get/Restore...AndMemType pair, so PETSc knows
which copy (host or device) is valid and syncs it when needed; the NumPy or
CuPy array wrapping the pointer PETSc returns is cached per (pointer, length,
memory type), so a repeated access costs a few C calls and a dictionary lookup.
"""

import contextlib
import ctypes

import numpy
from mpi4py import MPI
from petsc4py import PETSc

from gpu_mats.backend import address

from . import libpetsc as lp

_GET = {"r": lp.VecGetArrayReadAndMemType, "w": lp.VecGetArrayWriteAndMemType, "rw": lp.VecGetArrayAndMemType}
_RESTORE = {"r": lp.VecRestoreArrayReadAndMemType, "w": lp.VecRestoreArrayWriteAndMemType,
            "rw": lp.VecRestoreArrayAndMemType}
_CACHE_SIZE = 256
_views = {}
# Out-arguments of the C calls, made once: PETSc is not thread-safe anyway.
_address, _memtype, _length = lp.c_ptr(), ctypes.c_int(), lp.c_petscint()
_ADDRESS, _MEMTYPE, _LENGTH = ctypes.byref(_address), ctypes.byref(_memtype), ctypes.byref(_length)


def _wrap(address, length, on_device):
    if length == 0:
        return _module(on_device).empty(0)
    if not on_device:
        return numpy.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctypes.c_double)), shape=(length,))
    cupy = _module(True)
    memory = cupy.cuda.UnownedMemory(address, length * 8, owner=None)
    return cupy.ndarray((length,), numpy.float64, cupy.cuda.MemoryPointer(memory, 0))


def _module(on_device):
    if on_device:
        import cupy
        return cupy
    return numpy


def _handle(vec):
    return vec if vec.__class__ is int else vec.handle


def get_array(vec, mode, length=None):
    """The local part of ``vec`` (a petsc4py Vec or a raw handle) as a NumPy or CuPy array.

    mode is "r", "w" or "rw"; pair every call with ``restore_array`` in the
    same mode. ``length``, the local size, saves a C call where the caller
    knows it (a Mat whose sizes PETSc has checked). Every MatMult of a
    gpusell matrix passes here twice: it is kept lean.
    """
    handle = _handle(vec)
    if length is None:
        lp.check(lp.VecGetLocalSize(handle, _LENGTH))
        length = _length.value
    ierr = _GET[mode](handle, _ADDRESS, _MEMTYPE)
    if ierr:
        raise PETSc.Error(ierr)
    key = (_address.value, length, _memtype.value != lp.PETSC_MEMTYPE_HOST)
    view = _views.get(key)
    if view is None:
        if len(_views) >= _CACHE_SIZE:
            _views.clear()
        view = _views[key] = _wrap(*key)
    return view


def module_for_vec_type(vec_type):
    """numpy or cupy: where vectors of PETSc type ``vec_type`` keep their values."""
    if "cuda" in vec_type:
        return _module(True)
    if vec_type in _HOST_VEC_TYPES:
        return numpy
    raise TypeError(f"petsc-gpu-fv works on host vectors or CUDA vectors, not on vectors of type {vec_type}")


_HOST_VEC_TYPES = ("seq", "mpi", "standard", "shared")


def matrix_array_module(mat):
    """numpy or cupy: where the vectors of ``mat`` (MatCreateVecs) keep their values."""
    return module_for_vec_type(mat.getVecType())


def restore_array(vec, mode):
    ierr = _RESTORE[mode](_handle(vec), None)
    if ierr:
        raise PETSc.Error(ierr)


def vec_over(array, comm, size=None):
    """A PETSc Vec whose local part is ``array`` (NumPy: a standard vector,
    CuPy: a CUDA one), sharing its memory. ``size`` is the global size;
    without it the ranks' lengths are summed (collective)."""
    sizes = (array.size, PETSc.DECIDE if size is None else size)
    if isinstance(array, numpy.ndarray):
        return PETSc.Vec().createWithArray(array, size=sizes, comm=comm)
    return PETSc.Vec().createCUDAWithArrays(cudahandle=array.data.ptr, size=sizes, comm=comm)


class ArrayVecs:
    """PETSc Vecs over arrays, one per (address, length), made on first use.

    Making a Vec is collective over ``comm`` (the global size is summed), so
    ranks must ask for their arrays in the same order; and on several ranks
    they agree at each call whether every one of them has its Vec already:
    one rank may find an address it used before where another finds a new
    one (an array of the same length allocated where an old one was), and a
    Vec made on one rank alone would pair with another call's on the others
    (the channel and cylinder demos failed so on 2 ranks).
    """

    def __init__(self, comm):
        self.comm, self._vecs = comm, {}
        self._mpi = comm.tompi4py() if comm.getSize() > 1 else None

    def __call__(self, array):
        key = (address(array), array.size)
        vec = self._vecs.get(key)
        if self._mpi is not None and not self._mpi.allreduce(vec is not None, op=MPI.LAND):
            vec = None  # some rank makes a new Vec: all do, together
        if vec is None:
            old = self._vecs.pop(key, None)
            if old is not None:
                old.destroy()
            vec = self._vecs[key] = vec_over(array, self.comm)
        return vec

    def destroy(self):
        for vec in self._vecs.values():
            vec.destroy()
        self._vecs.clear()


@contextlib.contextmanager
def in_out_arrays(x, y, xp, owner):
    """x's array (read) and y's (write) for the length of a block, both in
    ``xp``'s memory, or a TypeError naming ``owner`` (a PC set up elsewhere)."""
    n = x.getLocalSize()
    try:
        xa, ya = get_array(x, "r", n), get_array(y, "w", n)
        if not isinstance(xa, xp.ndarray) or not isinstance(ya, xp.ndarray):
            raise TypeError(f"{owner} was set up for vectors in {'host' if xp is numpy else 'device'} memory; "
                            "got another kind")
        yield xa, ya
    finally:
        restore_array(x, "r")
        restore_array(y, "w")
