"""PETSc matrices from CSR arrays, each rank taking its block of rows."""

import numpy
from petsc4py import PETSc


def aij_from_csr(indptr, indices, data, shape, comm=PETSc.COMM_WORLD, mat_type=PETSc.Mat.Type.AIJ, prefix=None):
    """An assembled matrix of ``mat_type`` holding the global CSR (same arrays on every rank).

    Rows are split as PETSc.DECIDE splits them; ``mat_type`` may be any AIJ
    type (aij, aijcusparse, gpusell, ...). With an options ``prefix`` the
    matrix also reads its options (``-<prefix>mat_gpusell_value_type``, ...).
    """
    nrows, ncols = shape
    rows = PETSc.Vec().createMPI(nrows, comm=comm).getOwnershipRange()
    cols = PETSc.Vec().createMPI(ncols, comm=comm).getLocalSize()
    first, last = (int(indptr[r]) for r in rows)
    local = (numpy.asarray(indptr[rows[0]:rows[1] + 1]) - first).astype(PETSc.IntType)
    mat = PETSc.Mat().create(comm=comm)
    mat.setSizes(((rows[1] - rows[0], nrows), (cols, ncols)))
    mat.setType(mat_type)
    if prefix is not None:
        mat.setOptionsPrefix(prefix)
        mat.setFromOptions()
    mat.setPreallocationCSR((local, numpy.asarray(indices[first:last], dtype=PETSc.IntType),
                             numpy.asarray(data[first:last], dtype=PETSc.ScalarType)))
    mat.assemble()
    return mat
