"""Values written in place (petsc_ext.matrix_values) and array products with
an added vector or on blocks (petsc_ext.array_operators), for gpusell and AIJ,
serial and parallel."""

import numpy
import pytest
import scipy.sparse
from petsc4py import PETSc

import plugin  # noqa: F401
from gpu_mats.backend import to_host
from petsc_ext.array_operators import matrix_product
from petsc_ext.arrays import ArrayVecs, matrix_array_module
from petsc_ext.matrices import aij_from_rows
from petsc_ext.matrix_values import value_target


def rank_rows(comm, nrows, ncols, seed=5):
    """The same random matrix on every rank, and this rank's block of rows (columns split like rows)."""
    rng = numpy.random.default_rng(seed)
    dense = (rng.random((nrows, ncols)) < 0.3) * rng.standard_normal((nrows, ncols))
    dense[numpy.arange(nrows), numpy.arange(nrows) % ncols] += 1.0
    whole = scipy.sparse.csr_matrix(dense)
    rows = PETSc.Vec().createMPI(nrows, comm=comm).getOwnershipRange()
    cols = PETSc.Vec().createMPI(ncols, comm=comm).getLocalSize()
    return whole, whole[rows[0]:rows[1]], rows, cols


@pytest.mark.mpi
@pytest.mark.parametrize("mat_type", ["gpusell", "aij"])
def test_values_written_in_place_are_the_matrix_values(mat_type):
    comm = PETSc.COMM_WORLD
    whole, mine, rows, cols = rank_rows(comm, 37, 29)
    mat = aij_from_rows(mine.indptr, mine.indices, mine.data, cols, comm=comm, mat_type=mat_type)
    xp = matrix_array_module(mat)
    target = value_target(mat)
    assert target.slots.size == mine.nnz and len(set(target.slots.tolist())) == mine.nnz
    new = numpy.random.default_rng(comm.getRank()).standard_normal(mine.nnz)
    buffer = to_host(xp, target.buffer).copy()
    buffer[target.slots] = new
    target.buffer[...] = xp.asarray(buffer)
    state = mat.stateGet()
    target.commit()
    assert mat.stateGet() > state  # KSPs see new values and set their preconditioners up again
    x, y = mat.createVecs()
    x.setRandom()
    mat.mult(x, y)
    expected = scipy.sparse.csr_matrix((new, mine.indices, mine.indptr), shape=mine.shape) @ \
        numpy.concatenate(comm.tompi4py().allgather(x.getArray(readonly=True)))
    numpy.testing.assert_allclose(y.getArray(readonly=True), expected, rtol=1e-13, atol=1e-13)
    if mat_type == "aij":  # the AIJ storage itself holds the new values
        numpy.testing.assert_array_equal(mat.getValuesCSR()[2], new)


def test_value_targets_are_refused_for_other_types():
    mat = PETSc.Mat().createDense((4, 4), comm=PETSc.COMM_SELF)
    mat.setUp()
    mat.assemble()
    with pytest.raises(TypeError, match="cannot be written in place"):
        value_target(mat)


@pytest.mark.mpi
@pytest.mark.parametrize("mat_type", ["gpusell", "aij"])
def test_array_products_add_a_vector_and_take_blocks(mat_type):
    comm = PETSc.COMM_WORLD
    whole, mine, rows, cols = rank_rows(comm, 41, 41, seed=8)
    mat = aij_from_rows(mine.indptr, mine.indices, mine.data, cols, comm=comm, mat_type=mat_type)
    xp = matrix_array_module(mat)
    product = matrix_product(mat, xp, ArrayVecs(comm))
    rng = numpy.random.default_rng(2)
    X, Z = rng.standard_normal((3, 41)), rng.standard_normal((3, 41))
    start = sum(comm.tompi4py().allgather(cols)[:comm.getRank()])
    x = xp.asarray(numpy.ascontiguousarray(X[:, start:start + cols]))
    z = xp.asarray(numpy.ascontiguousarray(Z[:, rows[0]:rows[1]]))
    y = xp.empty_like(z)
    product(x, y, z)
    numpy.testing.assert_allclose(to_host(xp, y), (whole @ X.T).T[:, rows[0]:rows[1]] + Z[:, rows[0]:rows[1]],
                                  rtol=1e-13, atol=1e-13)
    product(x[1], y[0])
    numpy.testing.assert_allclose(to_host(xp, y[0]), (whole @ X[1])[rows[0]:rows[1]], rtol=1e-13, atol=1e-13)
