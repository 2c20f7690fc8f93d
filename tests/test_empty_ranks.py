"""Every PC and KSP of the project on a rank that owns no rows (the middle rank
under mpiexec -n 3, the last under -n 2) and on a system with no rows at all."""

import pytest
import scipy.sparse
from petsc4py import PETSc

import plugin  # noqa: F401
from conftest import krylov_solve
from petsc_ext.matrices import aij_from_rows
from stencils import laplacian

COMM = PETSc.COMM_WORLD
SOLVERS = {
    "cacg + jacobi": {"ksp_type": "cacg", "pc_type": "jacobi"},
    "cacg + ainv": {"ksp_type": "cacg", "pc_type": "ainv"},
    "cg + ainv fsai": {"ksp_type": "cg", "pc_type": "ainv"},
    "gmres + ainv spai": {"ksp_type": "gmres", "pc_type": "ainv", "pc_ainv_type": "spai"},
    "cg + ainv chebyshev": {"ksp_type": "cg", "pc_type": "ainv", "pc_ainv_type": "chebyshev"},
    "gmres + wbilu": {"ksp_type": "gmres", "pc_type": "wbilu"},
    "cg + gpuamg": {"ksp_type": "cg", "pc_type": "gpuamg"},
}


def rows_with_an_empty_rank(n):
    """This rank's (start, end) of n rows: rank 1 owns none (rank 0 alone on one rank)."""
    size, rank = COMM.getSize(), COMM.getRank()
    owners = [r for r in range(size) if r != 1] or [0]
    counts = [n // len(owners) + (i < n % len(owners)) for i in range(len(owners))]
    local = dict(zip(owners, counts)).get(rank, 0)
    start = COMM.tompi4py().exscan(local) or 0
    return start, start + local


@pytest.mark.mpi
@pytest.mark.parametrize("solver", list(SOLVERS))
def test_a_rank_without_rows_changes_nothing(solver):
    indptr, indices, data = laplacian(6)
    n = indptr.size - 1
    start, end = rows_with_an_empty_rank(n)
    first, last = int(indptr[start]), int(indptr[end])
    A = aij_from_rows(indptr[start:end + 1], indices[first:last], data[first:last], end - start, COMM,
                      mat_type="gpusell")
    ksp = PETSc.KSP().create(comm=COMM)
    ksp.setOptionsPrefix("empty_")
    ksp.setOperators(A)
    ksp.setTolerances(rtol=1e-10, max_it=2000)
    options = PETSc.Options("empty_")
    for key, value in SOLVERS[solver].items():
        options[key] = value
    ksp.setFromOptions()
    for key in SOLVERS[solver]:
        options.delValue(key)
    b, x = A.createVecs()
    b.set(1.0)
    ksp.solve(b, x)
    assert ksp.getConvergedReason() > 0, (solver, ksp.getConvergedReason())
    r = b.duplicate()
    A.mult(x, r)
    r.aypx(-1.0, b)
    assert r.norm() <= 1e-8 * b.norm()
    ksp.view(PETSc.Viewer().createASCII("/dev/null", comm=COMM))  # the views reduce over every rank


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_a_system_without_rows(solver):
    empty = scipy.sparse.csr_matrix((0, 0))
    ksp, x = krylov_solve((empty.indptr, empty.indices, empty.data), 0, SOLVERS[solver], comm=PETSc.COMM_SELF)
    assert ksp.getConvergedReason() >= 0 and x.getSize() == 0, (solver, ksp.getConvergedReason())
