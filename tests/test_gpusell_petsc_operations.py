"""Every Mat operation petsc4py offers for AIJ, and PETSc's own preconditioners,
on a gpusell matrix against the same on AIJ.

PETSc rebuilds or swaps a matrix's insides in many of them (MatHeaderReplace
in an in-place MatConvert, MatHeaderMerge in an in-place MatTranspose or a
MatAXPY with another pattern, MatSetType inside the symbolic products, a
MatDuplicate whose SeqAIJ blocks GAMG then writes directly): each result, and
the matrix the operation ran on, must still give AIJ's products and entries.
"""

import gc
import weakref

import numpy
import pytest
import scipy.sparse
from petsc4py import PETSc

import plugin  # noqa: F401  (registers gpusell)
from petsc_ext import gpusell
from petsc_pairs import COMM, assert_close, nonsymmetric_poisson, pair, random_vecs
from stencils import laplacian

DIFFERENT = PETSc.Mat.Structure.DIFFERENT_NONZERO_PATTERN


def other_pattern(M):
    """An AIJ matrix of M's layout with entries where M has none (a diagonal three places off)."""
    n = M.getSize()[0]
    S = PETSc.Mat().createAIJ(M.getSizes(), nnz=(1, 1), comm=COMM)
    S.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, False)
    start, end = M.getOwnershipRange()
    for row in range(start, end):
        S.setValue(row, (row + n // 2 + 3) % n, 0.5 + row / n)
    S.assemble()
    return S


def local_rows(M):
    """The rank's rows of M as a CSR array over all columns."""
    indptr, indices, data = M.getValuesCSR()
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(indptr.size - 1, M.getSize()[1])).toarray()


def assert_same_matrix(R, Q):
    """R (from gpusell) has Q's (from AIJ) sizes, entries and products."""
    assert (R.getSize(), R.getLocalSize()) == (Q.getSize(), Q.getLocalSize())
    numpy.testing.assert_allclose(local_rows(R), local_rows(Q), rtol=1e-13, atol=1e-13)
    for side, product in (("right", "mult"), ("left", "multTranspose")):
        (x,) = random_vecs(R, 1, side)
        (x_q,) = random_vecs(Q, 1, side)
        y, w = (R.createVecLeft(), Q.createVecLeft()) if side == "right" else (R.createVecRight(), Q.createVecRight())
        getattr(R, product)(x, y)
        getattr(Q, product)(x_q, w)
        assert_close(y, w)


def _vector(product):
    def run(M):
        x, z = random_vecs(M, 2)
        y = M.createVecLeft()
        product(M, x, z, y)
        return y
    return run


def _in_place(change):
    def run(M):
        change(M)
        return M
    return run


def _own_rows(M, step):
    start, end = M.getOwnershipRange()
    return PETSc.IS().createStride((end - start + step - 1) // step, first=start, step=step, comm=COMM)


def _convert_in_place_and_back(M):
    kind = M.getType()
    M.convert("aij", M)
    M.convert(kind, M)
    return M


def _set_values_after_use(M):
    M.mult(*random_vecs(M, 2))
    first = M.getOwnershipRange()[0]
    M.setValue(first, first, 9.0, PETSc.InsertMode.ADD_VALUES)
    M.assemble()


def _duplicate_then_copy(M):
    D = M.duplicate()
    M.copy(D)
    return D


OPERATIONS = {
    "mult": _vector(lambda M, x, z, y: M.mult(x, y)),
    "multAdd": _vector(lambda M, x, z, y: M.multAdd(x, z, y)),
    "multTranspose": _vector(lambda M, x, z, y: M.multTranspose(x, y)),
    "multTransposeAdd": _vector(lambda M, x, z, y: M.multTransposeAdd(x, z, y)),
    "multHermitian": _vector(lambda M, x, z, y: M.multHermitian(x, y)),
    "getDiagonal": lambda M: M.getDiagonal(),
    "getRowSum": lambda M: M.getRowSum(),
    "duplicate": lambda M: M.duplicate(copy=True),
    "duplicate-then-copy": _duplicate_then_copy,
    "copy": lambda M: M.copy(),
    "copy-into-another-pattern": _in_place(lambda M: other_pattern(M).copy(M, DIFFERENT)),
    "convert": lambda M: M.convert("aij", PETSc.Mat()),
    "convert-in-place": _in_place(lambda M: M.convert("aij", M)),
    "convert-in-place-and-back": _convert_in_place_and_back,
    "transpose": lambda M: M.transpose(PETSc.Mat()),
    "transpose-in-place": _in_place(lambda M: M.transpose(M)),
    "axpy-same-pattern": _in_place(lambda M: M.axpy(0.5, M.duplicate(copy=True))),
    "axpy-another-pattern": _in_place(lambda M: M.axpy(2.0, other_pattern(M), DIFFERENT)),
    "aypx-another-pattern": _in_place(lambda M: M.aypx(2.0, other_pattern(M), DIFFERENT)),
    "scale": _in_place(lambda M: M.scale(-3.0)),
    "shift": _in_place(lambda M: M.shift(2.5)),
    "zeroEntries": _in_place(lambda M: M.zeroEntries()),
    "zeroRows": _in_place(lambda M: M.zeroRows(_own_rows(M, 3), diag=4.0)),
    "zeroRowsColumns": _in_place(lambda M: M.zeroRowsColumns(_own_rows(M, 4), diag=2.0)),
    "diagonalScale": _in_place(lambda M: M.diagonalScale(*random_vecs(M, 2))),
    "setDiagonal": _in_place(lambda M: M.setDiagonal(random_vecs(M, 1)[0])),
    "setValues-after-use": _in_place(_set_values_after_use),
    "createSubMatrix": lambda M: M.createSubMatrix(_own_rows(M, 2), _own_rows(M, 2)),
    "matMult": lambda M: M.matMult(M),
    "ptap": lambda M: M.ptap(M),
    "rart": lambda M: M.rart(M),
    "matTransposeMult": lambda M: M.matTransposeMult(M),
    "transposeMatMult": lambda M: M.transposeMatMult(M),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", OPERATIONS)
def test_operation_on_gpusell_gives_what_it_gives_on_aij(name):
    aij, sell = pair(*nonsymmetric_poisson(4))
    if name == "rart" and COMM.getSize() > 1:
        pytest.skip("MatRARt has no MPIAIJ implementation in PETSc")
    results = [OPERATIONS[name](M) for M in (sell, aij)]
    if isinstance(results[0], PETSc.Vec):
        assert_close(*results)
    else:
        assert_same_matrix(*results)
    assert_same_matrix(sell, aij)  # the matrix operated on still agrees (in-place operations, stale copies)
    assert sell.getType().endswith("aijgpusell") or name == "convert-in-place"


def test_the_sell_copy_goes_with_the_matrix():
    """Destroying the matrix, or swapping its insides, lets go of its SELL copy."""
    _, sell = pair(*nonsymmetric_poisson(3), comm=PETSc.COMM_SELF)
    sell.mult(*random_vecs(sell, 2))
    first = weakref.ref(gpusell.context(sell))
    sell.transpose(sell)  # MatHeaderMerge: new insides, same handle
    sell.mult(*random_vecs(sell, 2))
    gc.collect()
    assert first() is None
    second = weakref.ref(gpusell.context(sell))
    sell.destroy()
    gc.collect()
    assert second() is None


PRECONDITIONERS = ("gamg", "ilu", "icc", "sor", "lu", "bjacobi", "asm", "jacobi")


def _solve(A, pc_type):
    ksp = PETSc.KSP().create(comm=COMM)
    ksp.setOperators(A)
    ksp.setType("cg")
    ksp.getPC().setType(pc_type)
    ksp.setTolerances(rtol=1e-10, max_it=500)
    b, x = A.createVecs()
    b.set(1.0)
    try:
        ksp.solve(b, x)
    except PETSc.Error as error:
        return error
    assert ksp.getConvergedReason() > 0
    return ksp.getIterationNumber(), x


@pytest.mark.mpi
@pytest.mark.parametrize("pc_type", PRECONDITIONERS)
def test_petsc_preconditioner_on_gpusell_works_as_on_aij(pc_type):
    """Same iterations and solution; where PETSc has no parallel version (ilu,
    icc, lu on MPIAIJ) the same refusal."""
    aij_result, sell_result = (_solve(M, pc_type) for M in pair(laplacian(6), (216, 216)))
    if isinstance(aij_result, PETSc.Error):
        assert isinstance(sell_result, PETSc.Error) and sell_result.ierr == aij_result.ierr, sell_result
        return
    assert not isinstance(sell_result, PETSc.Error), sell_result
    (aij_its, aij_x), (sell_its, sell_x) = aij_result, sell_result
    assert sell_its == aij_its
    assert_close(sell_x, aij_x, rtol=1e-9)
