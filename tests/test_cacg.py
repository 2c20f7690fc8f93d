"""-ksp_type cacg against PETSc's cg: equivalence, reductions, stability, bad input.

On a GPU machine the solves run on CUDA vectors through gpusell; elsewhere
with NumPy. Tests marked mpi also run under mpiexec -n 2 and -n 3.
"""

import re

import numpy
import pytest
import scipy.sparse
from petsc4py import PETSc

import plugin  # noqa: F401  (registers cacg)
from stencils import laplacian
from petsc_ext import cacg
from petsc_ext.matrices import aij_from_csr

from conftest import gpu_usable, krylov_solve
from test_gpusell import COMM

Reason = PETSc.KSP.ConvergedReason


def solve(csr, n, opts, comm=COMM, **kwargs):
    return krylov_solve(csr, n, {"ksp_type": "cacg", **opts}, comm=comm, **kwargs)


def relative_difference(x, y):
    return (x - y).norm() / y.norm()


@pytest.mark.parametrize("pc", ["jacobi", "ainv"])
def test_cacg_takes_cg_iterations_and_reaches_its_solution_at_64_cubed(pc):
    csr, n = laplacian(64), 64**3
    cg, x_cg = solve(csr, n, {"ksp_type": "cg", "pc_type": pc})
    for s in (2, 4, 8, 12):
        ksp, x = solve(csr, n, {"ksp_type": "cacg", "ksp_cacg_s": s, "pc_type": pc})
        assert ksp.getConvergedReason() > 0
        assert ksp.getIterationNumber() <= 1.1 * cg.getIterationNumber(), (s, ksp.getIterationNumber())
        assert relative_difference(x, x_cg) < 1e-6


def test_s_equal_one_is_cg():
    history = []
    for opts in ({"ksp_type": "cg", "ksp_norm_type": "unpreconditioned"}, {"ksp_type": "cacg", "ksp_cacg_s": 1}):
        ksp, x = solve(laplacian(12), 12**3, {**opts, "pc_type": "jacobi"})
        history.append((ksp.getIterationNumber(), x))
    (its_cg, x_cg), (its, x) = history
    assert its == its_cg
    assert relative_difference(x, x_cg) < 1e-12


@pytest.mark.mpi
def test_direct_array_paths_agree_with_petsc_calls():
    """gpusell and jacobi run on the basis arrays directly (jacobi fused into the
    recurrence); an AIJ matrix with pbjacobi (the same diagonal scaling) goes
    through PETSc's MatMult and PCApply on wrapped vectors: same iterations."""
    csr, n = laplacian(16), 16**3
    plain = "aijcusparse" if gpu_usable() else "aij"
    direct, x = solve(csr, n, {"ksp_cacg_s": 6, "pc_type": "jacobi"})
    through_petsc, y = solve(csr, n, {"ksp_cacg_s": 6, "pc_type": "pbjacobi"}, mat_type=plain)
    assert direct.getConvergedReason() > 0 and through_petsc.getConvergedReason() > 0
    assert direct.getIterationNumber() == through_petsc.getIterationNumber()
    assert relative_difference(x, y) < 1e-10
    unpreconditioned, _ = solve(csr, n, {"ksp_cacg_s": 6, "pc_type": "none"})
    assert unpreconditioned.getConvergedReason() > 0


class CountingComm:
    """A communicator that counts the Allreduce calls made through it."""

    def __init__(self, comm):
        self.comm, self.allreduces = comm, 0

    def Allreduce(self, *args, **kwargs):
        self.allreduces += 1
        return self.comm.Allreduce(*args, **kwargs)


@pytest.mark.mpi
@pytest.mark.parametrize("s", [4, 8])
def test_reductions_are_at_most_two_per_s_iterations(s, monkeypatch):
    counters = []

    def counting(self, ksp):
        counters.append(CountingComm(ksp.getComm().tompi4py()))
        return counters[-1]

    monkeypatch.setattr(cacg.CommunicationAvoidingCG, "_communicator", counting)
    csr, n = laplacian(24), 24**3
    A = aij_from_csr(*csr, (n, n), comm=COMM, mat_type="gpusell")
    ksp = PETSc.KSP().create(comm=COMM)
    ksp.setOperators(A)
    ksp.setType("cacg")
    ksp.getPythonContext().s = s
    ksp.getPC().setType("jacobi")
    ksp.setTolerances(rtol=1e-8)
    b, x = A.createVecs()
    b.set(1.0)
    ksp.setUp()  # eigenvalue estimate: set-up, not counted
    ksp.solve(b, x)
    its, made = ksp.getIterationNumber(), counters[-1].allreduces
    assert ksp.getConvergedReason() > 0 and its > 4 * s
    assert made == ksp.getPythonContext().getReductionCount()
    assert made <= 2 * -(-its // s) + 1  # two per block of s iterations, one to confirm the final residual


def test_stability_of_the_three_bases():
    """The largest s at which each basis converges like CG on the 32^3 Poisson
    problem with Jacobi (the table in BENCHMARKS.md comes from this test)."""
    csr, n = laplacian(32), 32**3
    cg, _ = solve(csr, n, {"ksp_type": "cg", "pc_type": "jacobi"})
    largest = {}
    for basis in ("monomial", "newton", "chebyshev"):
        largest[basis] = 0
        for s in range(1, 17):
            ksp, _ = solve(csr, n, {"ksp_type": "cacg", "ksp_cacg_s": s, "ksp_cacg_basis": basis,
                                    "pc_type": "jacobi"})
            if ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= 1.1 * cg.getIterationNumber():
                largest[basis] = s
            else:
                break
    print("largest s converging within 1.1x of cg:", largest)  # measured: monomial 6, newton 12, chebyshev 16
    assert largest["monomial"] < largest["newton"] <= largest["chebyshev"]
    assert largest["monomial"] < 10 < largest["chebyshev"]  # Ali et al. 2019: monomial fails early, chebyshev beyond 10


def test_monitor_once_per_block_in_cg_iterations_and_view(capsys):
    PETSc.Log.begin()
    eigen = PETSc.Log.Event("CACGEigen")
    before = eigen.getPerfInfo()["count"]
    ksp, _ = solve(laplacian(16), 16**3, {"ksp_type": "cacg", "ksp_cacg_s": 5, "pc_type": "jacobi",
                                          "ksp_monitor": None})
    its = [int(m) for m in re.findall(r"^\s*(\d+) KSP Residual norm", capsys.readouterr().out, re.MULTILINE)]
    assert its[0] == 0 and all(k % 5 == 0 for k in its[:-1]) and its[-1] == ksp.getIterationNumber()
    assert its[-1] % 5 != 0 or its[-1] == its[-2] + 5  # the last line: the exact CG-equivalent iteration
    b, x = ksp.getOperators()[0].createVecs()
    b.set(2.0)
    ksp.solve(b, x)  # same operator: the eigenvalue bounds are reused
    assert eigen.getPerfInfo()["count"] == before + 1
    ksp.view()
    out = capsys.readouterr().out
    assert "type: cacg" in out and "cacg: s = 5, basis chebyshev" in out
    assert re.search(r"eigenvalue interval of M\^-1 A: \[\S+, \S+\] from 20 CG \(Ritz values\) steps", out)
    assert re.search(r"last solve: \d+ blocks, \d+ MPI_Allreduce calls", out)


@pytest.mark.mpi
def test_parallel_solution_matches_serial_with_block_jacobi():
    csr, n = laplacian(12), 12**3
    opts = {"ksp_type": "cacg", "ksp_cacg_s": 6, "pc_type": "bjacobi"}
    ksp, x = solve(csr, n, opts)
    serial, xs = solve(csr, n, {**opts, "pc_type": "jacobi"}, comm=PETSc.COMM_SELF)
    assert ksp.getConvergedReason() > 0 and serial.getConvergedReason() > 0
    lo, hi = x.getOwnershipRange()
    numpy.testing.assert_allclose(x.getArray(readonly=True), xs.getArray(readonly=True)[lo:hi],
                                  rtol=1e-6, atol=1e-6 * abs(xs.getArray(readonly=True)).max())


# --- bad input ---------------------------------------------------------------


def test_indefinite_matrix_is_reported_not_returned_as_converged():
    indptr, indices, data = laplacian(6)
    A = scipy.sparse.csr_matrix((data, indices, indptr)) - 3.0 * scipy.sparse.eye(216)  # indefinite
    A = A.tocsr()
    ksp, _ = solve((A.indptr, A.indices, A.data), 216, {"ksp_type": "cacg", "pc_type": "none",
                                                        "ksp_cacg_basis": "monomial"})
    assert ksp.getConvergedReason() in (Reason.DIVERGED_INDEFINITE_MAT, Reason.DIVERGED_BREAKDOWN)
    assert ksp.getPythonContext().failure


class NegatedIdentity:
    """An indefinite (negative definite) preconditioner."""

    def apply(self, pc, x, y):
        x.copy(y)
        y.scale(-1.0)


def test_indefinite_preconditioner_is_reported():
    A = aij_from_csr(*laplacian(6), (216, 216), comm=PETSc.COMM_SELF, mat_type="gpusell")
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setOperators(A)
    ksp.setType("cacg")
    ctx = ksp.getPythonContext()
    ctx.basis = "monomial"
    ksp.getPC().setType("python")
    ksp.getPC().setPythonContext(NegatedIdentity())
    b, x = A.createVecs()
    b.set(1.0)
    ksp.solve(b, x)
    assert ksp.getConvergedReason() in (Reason.DIVERGED_INDEFINITE_PC, Reason.DIVERGED_INDEFINITE_MAT)
    assert "not positive definite" in ctx.failure


def test_nan_in_the_matrix_never_converges():
    indptr, indices, data = laplacian(6)
    data = data.copy()
    data[10] = numpy.nan
    ksp, _ = solve((indptr, indices, data), 216, {"ksp_type": "cacg", "pc_type": "none",
                                                  "ksp_cacg_basis": "monomial"})
    assert ksp.getConvergedReason() < 0


@pytest.mark.parametrize("s", [0, 64])
def test_s_out_of_range_is_refused_with_the_range(s):
    with pytest.raises(PETSc.Error, match=f"-t_ksp_cacg_s {s} is out of range: valid values are 1 to 16"):
        solve(laplacian(3), 27, {"ksp_type": "cacg", "ksp_cacg_s": s})


def test_singular_neumann_laplacian_with_its_null_space_attached(rng):
    """The pressure equation of the flow driver: the eigenvalue bounds come from
    the nonzero spectrum (the random start vector loses its null-space part)."""
    from plugin.flow.box import box_geometry
    from plugin.flow.operators import compact_laplacian

    A = (-compact_laplacian(box_geometry((12, 12, 12), (1.0, 1.0, 1.0), (False,) * 3))).tocsr()
    rhs = rng.standard_normal(A.shape[0])
    rhs -= rhs.mean()
    for basis in ("chebyshev", "newton"):
        ksp, x = solve((A.indptr, A.indices, A.data), A.shape[0],
                       {"ksp_cacg_s": 8, "ksp_cacg_basis": basis, "pc_type": "jacobi"}, rhs=rhs, nullspace=True)
        assert ksp.getConvergedReason() > 0, basis
        residual = ksp.getOperators()[0] * x
        lo, hi = residual.getOwnershipRange()
        assert numpy.linalg.norm(residual.getArray(readonly=True) - rhs[lo:hi]) <= 1e-7 * numpy.linalg.norm(rhs)


# --- easy problems and limits (where CG converges, cacg must too) -----------


def _tridiagonal(n):
    A = scipy.sparse.diags([-numpy.ones(n - 1), 2 * numpy.ones(n), -numpy.ones(n - 1)], [-1, 0, 1], format="csr")
    A.sort_indices()
    return A


EASY = {
    "laplacian1d": (_tridiagonal(100), "jacobi"),
    "laplacian1d-none": (_tridiagonal(100), "none"),
    "identity": (scipy.sparse.identity(50, format="csr"), "none"),
    "diagonal": (scipy.sparse.diags(numpy.linspace(1.0, 9.0, 40), format="csr"), "jacobi"),
    "one-by-one": (scipy.sparse.csr_matrix(numpy.array([[3.0]])), "jacobi"),
    "empty": (scipy.sparse.csr_matrix((0, 0)), "jacobi"),
}


@pytest.mark.mpi
@pytest.mark.parametrize("case", list(EASY))
def test_converges_where_cg_converges(case):
    """A Krylov space exhausted inside a block is convergence (a lucky
    breakdown), and a one-point spectrum still gives a working basis."""
    A, pc = EASY[case]
    n = A.shape[0]
    # the monomial basis loses its independence on ill-conditioned systems (test_basis_stability)
    for basis in ("chebyshev", "newton") + (() if case.startswith("laplacian") else ("monomial",)):
        ksp, x = solve((A.indptr, A.indices, A.data), n, {"pc_type": pc, "ksp_cacg_basis": basis})
        assert ksp.getConvergedReason() > 0, (case, basis, ksp.getConvergedReason(), ksp.getPythonContext().failure)
        r = ksp.getOperators()[0].createVecLeft()
        ksp.getOperators()[0].mult(x, r)
        r.aypx(-1.0, _ones_like(r))  # b = 1
        assert r.norm() <= 1e-7 * max(numpy.sqrt(n), 1.0), (case, basis)
        if n:
            bounds = ksp.getPythonContext().bounds
            assert bounds is None or (numpy.isfinite(bounds).all() and bounds[0] < bounds[1]), bounds


def _ones_like(v):
    ones = v.duplicate()
    ones.set(1.0)
    return ones


def test_max_it_stops_with_diverged_max_it():
    ksp, _ = solve(laplacian(8), 512, {"pc_type": "jacobi", "ksp_cacg_s": 4}, max_it=5)
    assert ksp.getConvergedReason() == Reason.DIVERGED_MAX_IT
    assert ksp.getIterationNumber() >= 5


def test_a_value_that_is_not_an_integer_names_the_option_and_the_value():
    with pytest.raises(PETSc.Error, match="-t_ksp_cacg_s '8.5' is not an integer"):
        solve(laplacian(3), 27, {"ksp_cacg_s": "8.5"}, comm=PETSc.COMM_SELF)
