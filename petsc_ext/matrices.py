"""PETSc matrices from CSR arrays."""

import ctypes

import numpy
from petsc4py import PETSc

from . import libpetsc as lp


def dm_mat_type(dm):
    """The matrix type a DM creates (DMGetMatType: -dm_mat_type, or the DM's own setting)."""
    name = lp.c_str()
    lp.check(lp.DMGetMatType(dm.handle, ctypes.byref(name)))
    return name.value.decode() if name.value else PETSc.Mat.Type.AIJ


def aij_from_rows(indptr, indices, data, local_columns, comm=PETSc.COMM_WORLD, mat_type=PETSc.Mat.Type.AIJ,
                  prefix=None):
    """An assembled matrix of ``mat_type`` whose rows on this rank are the CSR
    (indptr, indices, data) with global column numbers; ``local_columns`` is
    this rank's share of the columns (the local size of the vectors it
    multiplies). ``mat_type`` may be any AIJ type (aij, aijcusparse, gpusell,
    ...); with an options ``prefix`` the matrix also reads its options
    (``-<prefix>mat_gpusell_value_type``, ...)."""
    mat = PETSc.Mat().create(comm=comm)
    mat.setSizes(((len(indptr) - 1, PETSc.DECIDE), (local_columns, PETSc.DECIDE)))
    mat.setType(mat_type)
    if prefix is not None:
        mat.setOptionsPrefix(prefix)
        mat.setFromOptions()
    first = int(indptr[0])
    mat.setPreallocationCSR((numpy.asarray(indptr, dtype=PETSc.IntType) - first,
                             numpy.asarray(indices, dtype=PETSc.IntType), numpy.asarray(data, dtype=PETSc.ScalarType)))
    mat.assemble()
    return mat


def aij_from_csr(indptr, indices, data, shape, comm=PETSc.COMM_WORLD, mat_type=PETSc.Mat.Type.AIJ, prefix=None):
    """An assembled matrix holding the global CSR (same arrays on every rank),
    rows and columns split as PETSc.DECIDE splits them."""
    nrows, ncols = shape
    rows = PETSc.Vec().createMPI(nrows, comm=comm).getOwnershipRange()
    cols = PETSc.Vec().createMPI(ncols, comm=comm).getLocalSize()
    first, last = (int(indptr[r]) for r in rows)
    return aij_from_rows(indptr[rows[0]:rows[1] + 1], indices[first:last], data[first:last], cols, comm=comm,
                         mat_type=mat_type, prefix=prefix)
