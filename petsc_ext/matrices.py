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
    (``-<prefix>mat_gpusell_value_type``, ``-<prefix>mat_type``, ...).

    On one rank the matrix is a copy (MatDuplicate, memory PETSc owns and
    may grow) of one over the arrays (MatCreateSeqAIJWithArrays), not filled
    row by row, then becomes ``mat_type`` (or ``-<prefix>mat_type``) in place."""
    first = int(indptr[0])
    csr = (numpy.asarray(indptr, dtype=PETSc.IntType) - first, numpy.asarray(indices, dtype=PETSc.IntType),
           numpy.asarray(data, dtype=PETSc.ScalarType))
    rows = len(csr[0]) - 1
    if comm.getSize() == 1:
        over = PETSc.Mat().createAIJWithArrays(((rows, rows), (local_columns, local_columns)), csr, comm=comm)
        mat = over.duplicate(copy=True)
        over.destroy()
        if prefix is not None:
            mat.setOptionsPrefix(prefix)
            mat_type = PETSc.Options(prefix).getString("mat_type", mat_type)
        if mat_type not in (PETSc.Mat.Type.AIJ, mat.getType()):
            mat.convert(mat_type, mat)
        if prefix is not None:
            mat.setFromOptions()
        return mat
    mat = _empty(rows, local_columns, comm, mat_type, prefix)
    mat.setPreallocationCSR(csr)
    mat.assemble()
    return mat


def _empty(rows, local_columns, comm, mat_type, prefix):
    """A Mat of this rank's ``rows`` and ``local_columns``, of ``mat_type``, with its prefix's options read."""
    mat = PETSc.Mat().create(comm=comm)
    mat.setSizes(((rows, PETSc.DECIDE), (local_columns, PETSc.DECIDE)))
    mat.setType(mat_type)
    if prefix is not None:
        mat.setOptionsPrefix(prefix)
        mat.setFromOptions()
    return mat


def aij_from_device_csr(matrix, local_columns, comm=PETSc.COMM_WORLD, mat_type="aijcusparse", prefix=None):
    """An assembled device AIJ matrix (aijcusparse) whose rows on this rank are
    the cupyx CSR ``matrix`` (global columns): its pattern from COO indices
    (MatSetPreallocationCOO, copied to the host), its values straight from the
    GPU (MatSetValuesCOO with the device array), no host copy of the values."""
    import cupy

    mat = _empty(matrix.shape[0], local_columns, comm, mat_type, prefix)
    start = mat.getOwnershipRange()[0]
    coo = matrix.tocoo()
    mat.setPreallocationCOO((coo.row + start).astype(PETSc.IntType).get(), coo.col.astype(PETSc.IntType).get())
    values = cupy.ascontiguousarray(coo.data, dtype=PETSc.ScalarType)
    set_coo_values(mat, values)
    marker = lp.new_container()
    marker.setAttr("entries", values.size)
    mat.compose(COO_IN_CSR_ORDER, marker)
    return mat


# Composed on a Mat whose COO entries are the rank's CSR entries in order; its attribute "entries" counts them.
COO_IN_CSR_ORDER = "petsc_gpu_fv_coo_in_csr_order"


def set_coo_values(mat, values):
    """MatSetValuesCOO(INSERT_VALUES) with a contiguous float64 CuPy array (read on the GPU)."""
    lp.check(lp.MatSetValuesCOO(mat.handle, values.data.ptr, lp.INSERT_VALUES))
    if not mat.isAssembled():
        mat.assemble()


def split_range(size, comm):
    """This rank's (start, end) of ``size`` items split as PETSc.DECIDE splits them."""
    local = PETSc.Sys.splitOwnership(size, comm=comm)[0]
    start = comm.tompi4py().exscan(local) or 0
    return start, start + local


def aij_from_csr(indptr, indices, data, shape, comm=PETSc.COMM_WORLD, mat_type=PETSc.Mat.Type.AIJ, prefix=None):
    """An assembled matrix holding the global CSR (same arrays on every rank),
    rows and columns split as PETSc.DECIDE splits them."""
    nrows, ncols = shape
    rows = split_range(nrows, comm)
    cols = PETSc.Sys.splitOwnership(ncols, comm=comm)[0]
    first, last = (int(indptr[r]) for r in rows)
    return aij_from_rows(indptr[rows[0]:rows[1] + 1], indices[first:last], data[first:last], cols, comm=comm,
                         mat_type=mat_type, prefix=prefix)


def baij_from_bsr(indptr, indices, blocks, comm=PETSc.COMM_WORLD):
    """An assembled BAIJ matrix holding the global block CSR (indptr, indices,
    blocks (nnzb, bs, bs) row-major; same arrays on every rank), block rows
    split as PETSc.DECIDE splits them."""
    nb, bs = len(indptr) - 1, blocks.shape[1]
    lo, hi = split_range(nb, comm)
    mat = PETSc.Mat().createBAIJ(((bs * (hi - lo), PETSc.DECIDE), (bs * (hi - lo), PETSc.DECIDE)), bs, comm=comm)
    owned = (indices[indptr[lo]:indptr[hi]] >= lo) & (indices[indptr[lo]:indptr[hi]] < hi)
    rows = numpy.repeat(numpy.arange(hi - lo), numpy.diff(indptr[lo:hi + 1]))
    mat.setPreallocationNNZ((numpy.bincount(rows[owned], minlength=hi - lo).astype(PETSc.IntType),
                             numpy.bincount(rows[~owned], minlength=hi - lo).astype(PETSc.IntType)))
    # Column-oriented input: each block's values contiguous, column-major.
    mat.setOption(PETSc.Mat.Option.ROW_ORIENTED, False)
    local_ptr = numpy.asarray(indptr[lo:hi + 1] - indptr[lo], dtype=PETSc.IntType)
    mat.setValuesBlockedCSR(local_ptr, numpy.asarray(indices[indptr[lo]:indptr[hi]], dtype=PETSc.IntType),
                            numpy.ascontiguousarray(blocks[indptr[lo]:indptr[hi]].transpose(0, 2, 1)).ravel())
    mat.assemble()
    mat.setOption(PETSc.Mat.Option.ROW_ORIENTED, True)
    return mat
