"""Matrices whose values a solver recomputes on its own arrays.

A flow solver refreshes the convective operator's values every step with one
SpMV (Oyarzún 2015, eq. 2.10: Val(C) = E_C u_s), written straight into the
matrix's storage. ``value_target(mat)`` says where that storage is: a buffer
in the matrix's memory, the position in it of each entry of the rank's rows
(in MatGetValuesCSR order), and a ``commit`` to call after writing. A gpusell
matrix lends its SELL values, which its kernels read (the AIJ copy is left
behind); an AIJ matrix a host buffer that commit copies into its CSR values;
a device matrix made from COO entries (aijcusparse through
petsc_ext.matrices.aij_from_device_csr) a device buffer that commit sets
again with MatSetValuesCOO, on the GPU.
"""

import ctypes
from dataclasses import dataclass

import numpy
from petsc4py import PETSc

from gpu_mats.backend import to_host

from . import gpusell
from . import libpetsc as lp
from .matrices import COO_IN_CSR_ORDER, set_coo_values


@dataclass(eq=False)
class ValueTarget:
    buffer: object  # NumPy or CuPy array the values are written to
    slots: numpy.ndarray  # position in buffer of each CSR entry of the rank's rows
    commit: object  # call after writing


def value_target(mat):
    """Where to write new values of ``mat`` (a gpusell or an AIJ matrix, or a gpusell.SellOperator)."""
    if isinstance(mat, gpusell.SellOperator):
        buffer, slots = mat.value_buffer()
        return ValueTarget(buffer, to_host(mat.xp, slots), mat.values_changed)
    kind = mat.getType()
    if kind in (gpusell.SEQ_TYPE, gpusell.MPI_TYPE):
        ctx = gpusell.context(mat)
        buffer, slots = ctx.value_buffer()
        return ValueTarget(buffer, to_host(ctx.xp, slots), ctx.values_changed)
    marker = mat.query(COO_IN_CSR_ORDER)
    if marker is not None:  # a device matrix made by aij_from_device_csr: its values go in again by COO
        import cupy

        buffer = cupy.zeros(marker.getAttr("entries"))
        return ValueTarget(buffer, numpy.arange(buffer.size), lambda: set_coo_values(mat, buffer))
    if kind == PETSc.Mat.Type.SEQAIJ:
        blocks = [mat.handle]
        nnz = [int(mat.getValuesCSR()[0][-1])]
    elif kind == PETSc.Mat.Type.MPIAIJ:
        diagonal, off_diagonal = lp.c_ptr(), lp.c_ptr()
        lp.check(lp.MatMPIAIJGetSeqAIJ(mat.handle, ctypes.byref(diagonal), ctypes.byref(off_diagonal), None))
        blocks = [diagonal.value, off_diagonal.value]
        indptr, indices, _ = mat.getValuesCSR()
        start, end = mat.getOwnershipRangeColumn()
        owned = (indices >= start) & (indices < end)
        nnz = [int(owned.sum()), int((~owned).sum())]
    else:
        raise TypeError(f"the values of a {kind} matrix cannot be written in place: use gpusell, aij, or a device "
                        "matrix made by petsc_ext.matrices.aij_from_device_csr")
    buffer = numpy.zeros(sum(nnz))
    if len(blocks) == 1:
        slots = numpy.arange(nnz[0])
    else:
        slots = numpy.empty(owned.size, dtype=numpy.int64)
        slots[owned], slots[~owned] = numpy.arange(nnz[0]), nnz[0] + numpy.arange(nnz[1])

    def commit():
        offset = 0
        for block, count in zip(blocks, nnz, strict=True):
            address = lp.c_ptr()
            lp.check(lp.MatSeqAIJGetArray(block, ctypes.byref(address)))
            if count:
                values = numpy.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctypes.c_double)), shape=(count,))
                values[...] = buffer[offset:offset + count]
            lp.check(lp.MatSeqAIJRestoreArray(block, ctypes.byref(address)))
            offset += count
        mat.stateIncrease()

    return ValueTarget(buffer, slots, commit)
