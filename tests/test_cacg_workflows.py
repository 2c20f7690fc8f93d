"""cacg where real workflows put it: operators whose values change between
solves (a time-dependent problem), a (nearly) exact preconditioner, small
systems that CG finishes inside one s-step block, a matrix-free operator
accurate only to finite-difference noise, and pyamg's example matrices. In
each, cacg takes CG's iterations, give or take one block of s."""

import numpy
import pytest
import scipy.sparse
from petsc4py import PETSc

import plugin  # noqa: F401  (registers cacg)
from conftest import krylov_solve
from petsc_ext.matrices import aij_from_csr
from petsc_ext.options import option_defaults
from stencils import laplacian

S = 8  # cacg's default block
SELF = PETSc.COMM_SELF


def _csr(matrix):
    matrix = scipy.sparse.csr_matrix(matrix)
    matrix.sort_indices()
    return matrix.indptr, matrix.indices, matrix.data


def _laplacian_1d(n):
    return scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))


def _iterations(matrix, options, rhs=None):
    ksp, _ = krylov_solve(_csr(matrix), matrix.shape[0], options, comm=SELF, rhs=rhs)
    assert ksp.getConvergedReason() > 0, (options, ksp.getConvergedReason())
    return ksp.getIterationNumber()


def _ksp(A, options):
    ksp = PETSc.KSP().create(comm=A.getComm())
    ksp.setOptionsPrefix("w_")
    ksp.setOperators(A)
    ksp.setTolerances(rtol=1e-8, max_it=2000)
    with option_defaults("w_", options):
        ksp.setFromOptions()
    return ksp


def test_new_values_of_the_operator_get_new_eigenvalue_bounds():
    """A.shift(50) between two solves on the same KSP: the second solve needs
    the new spectrum's bounds (with the old ones it broke down at iteration 0)."""
    indptr, indices, data = laplacian(8)
    iterations = {}
    for ksp_type in ("cg", "cacg"):
        A = aij_from_csr(indptr, indices, data, (512, 512), comm=SELF, mat_type="gpusell")
        ksp = _ksp(A, {"ksp_type": ksp_type, "pc_type": "jacobi"})
        b, x = A.createVecs()
        b.set(1.0)
        ksp.solve(b, x)
        A.shift(50.0)
        ksp.solve(b, x)
        assert ksp.getConvergedReason() > 0, (ksp_type, ksp.getConvergedReason())
        iterations[ksp_type] = ksp.getIterationNumber()
        ksp.destroy()
    assert abs(iterations["cacg"] - iterations["cg"]) <= S, iterations


@pytest.mark.parametrize("pc", ["jacobi", "ainv"])
def test_a_heat_equation_with_a_new_time_step_each_step_takes_cgs_iterations(pc):
    """Backward Euler for u_t = u_xx + u_yy on a 2D grid, (I + dt L) u' = u
    with dt growing each step, as petsc4py's heat demo does: the matrix's
    values change in place every step and the same KSP solves each."""
    n = 24
    lap = scipy.sparse.kronsum(_laplacian_1d(n), _laplacian_1d(n)).tocsr() * n**2
    identity = scipy.sparse.identity(n * n, format="csr")
    pattern = (identity + lap).tocsr()
    pattern.sort_indices()
    counts = {}
    for ksp_type in ("cg", "cacg"):
        A = aij_from_csr(*_csr(pattern), pattern.shape, comm=SELF, mat_type="gpusell")
        ksp = _ksp(A, {"ksp_type": ksp_type, "pc_type": pc})
        u, x = A.createVecs()
        u.setArray(numpy.random.default_rng(3).random(n * n))
        counts[ksp_type] = []
        for step in range(20):
            dt = 1e-4 * 1.5**step
            values = (identity + dt * lap).tocsr()
            values.sort_indices()
            A.setValuesCSR(values.indptr, values.indices, values.data)
            A.assemble()
            ksp.solve(u, x)
            assert ksp.getConvergedReason() > 0, (ksp_type, step, ksp.getConvergedReason())
            counts[ksp_type].append(ksp.getIterationNumber())
            x.copy(u)
        ksp.destroy()
    assert all(abs(a - b) <= S for a, b in zip(counts["cacg"], counts["cg"])), str(counts)


@pytest.mark.parametrize("n", [10, 12, 16, 40])
@pytest.mark.parametrize("pc", ["none", "jacobi", "ainv"])
def test_a_system_cg_finishes_inside_one_block(n, pc):
    """A 1D Laplacian of n rows: CG's Krylov space is exhausted after about
    n / 2 iterations, inside a block of s = 8 (n = 40 stopped at 16 of cg's
    20, petsc4py's ex23 at 0 with ainv)."""
    matrix = _laplacian_1d(n)
    cg = _iterations(matrix, {"ksp_type": "cg", "pc_type": pc})
    assert abs(_iterations(matrix, {"ksp_type": "cacg", "pc_type": pc}) - cg) <= S


def test_an_exact_preconditioner_gives_bounds_and_one_iteration():
    """gpuamg on a system of fewer rows than its coarse size is one dense
    solve: M^-1 A = I. The eigenvalue estimate stops when CG is done, not
    iterating on rounding (bounds down to -1e260 before)."""
    matrix = _laplacian_1d(300) + scipy.sparse.identity(300) * 1e-3
    assert _iterations(matrix, {"ksp_type": "cg", "pc_type": "gpuamg"}) == 1
    ksp, _ = krylov_solve(_csr(matrix), 300, {"ksp_type": "cacg", "pc_type": "gpuamg"}, comm=SELF)
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= 2
    low, high = ksp.getPythonContext().bounds
    assert 0.0 <= low <= 1.0 <= high < 1.1


def _bratu(n, ksp_type):
    """Newton on the Bratu problem -lap(u) = 6 e^u on n^3 cells with a
    matrix-free Jacobian (-snes_mf: finite differences of F, accurate to
    about 1e-8) and ``ksp_type``: (SNES reason, each Newton step's KSP
    iterations and reason, cacg's block length and linearity defect)."""
    h = 1.0 / (n + 1)

    def residual(snes, X, F):
        u = numpy.pad(X.getArray(readonly=True).reshape(n, n, n), 1)
        c = u[1:-1, 1:-1, 1:-1]
        lap = 6 * c - u[2:, 1:-1, 1:-1] - u[:-2, 1:-1, 1:-1] - u[1:-1, 2:, 1:-1] - u[1:-1, :-2, 1:-1] \
            - u[1:-1, 1:-1, 2:] - u[1:-1, 1:-1, :-2]
        F.setArray((lap - h * h * 6.0 * numpy.exp(c)).ravel())

    snes = PETSc.SNES().create(comm=SELF)
    snes.setOptionsPrefix("bratu_")
    F = PETSc.Vec().createSeq(n**3, comm=SELF)
    snes.setFunction(residual, F)
    steps = []
    with option_defaults("bratu_", {"snes_mf": None, "ksp_type": ksp_type, "pc_type": "none"}):
        snes.setFromOptions()
    snes.getKSP().setPostSolve(lambda ksp, b, x: steps.append((ksp.getIterationNumber(),
                                                                ksp.getConvergedReason())))
    x = F.duplicate()
    x.set(0.0)
    snes.solve(None, x)
    reason = snes.getConvergedReason()
    context = snes.getKSP().getPythonContext() if ksp_type == "cacg" else None
    blocks = (context.block, context.defect) if context else None
    snes.destroy()
    return reason, steps, blocks


def test_newton_with_a_matrix_free_jacobian_takes_cgs_iterations_with_cacg():
    """A finite-difference Jacobian is linear to about 1e-8, which a basis of
    8 Chebyshev vectors does not survive (cacg took more than twice cg's
    iterations on petsc4py's bratu3d.py): the set-up measures the defect,
    shortens the blocks to what it leaves at the tolerance, and each Newton
    step takes cg's iterations within one block."""
    reason_cg, cg, _ = _bratu(10, "cg")
    reason, cacg, (block, defect) = _bratu(10, "cacg")
    assert reason_cg > 0 and reason > 0 and len(cacg) == len(cg), (cg, cacg)
    assert block < S and 1e-10 < defect < 1e-6, (block, defect)
    assert all(r > 0 and abs(its - its_cg) <= block for (its, r), (its_cg, _) in zip(cacg, cg)), (cg, cacg)


def test_an_assembled_operator_keeps_the_whole_block():
    """The linearity measure of A M^-1 is at rounding for a matrix and jacobi."""
    ksp, _ = krylov_solve(_csr(_laplacian_1d(50)), 50, {"ksp_type": "cacg", "pc_type": "jacobi"}, comm=SELF)
    context = ksp.getPythonContext()
    assert context.block == S and context.defect < 1e-13


def _spd_examples():
    """pyamg's example matrices that are symmetric positive definite."""
    from pyamg.gallery import load_example

    names = ("airfoil", "bar", "knot", "local_disc_galerkin_diffusion", "recirc_flow", "unit_cube", "unit_square")
    found = {}
    for name in names:
        A = scipy.sparse.csr_matrix(load_example(name)["A"]).astype(float)
        A = (A + A.T) / 2 if abs(A - A.T).max() <= 1e-10 * abs(A).max() else None
        if A is not None:
            try:
                numpy.linalg.cholesky(A.toarray())
            except numpy.linalg.LinAlgError:
                continue
            found[name] = A
    return found


SPD_EXAMPLES = _spd_examples()


def test_the_spd_examples_are_found():
    assert {"airfoil", "bar", "knot", "local_disc_galerkin_diffusion", "unit_cube"} <= set(SPD_EXAMPLES)


@pytest.mark.parametrize("pc", ["jacobi", "gpuamg"])
@pytest.mark.parametrize("name", sorted(SPD_EXAMPLES))
def test_pyamgs_spd_examples_take_cgs_iterations(name, pc):
    matrix = SPD_EXAMPLES[name]
    rhs = matrix @ numpy.random.default_rng(7).standard_normal(matrix.shape[0])
    cg = _iterations(matrix, {"ksp_type": "cg", "pc_type": pc}, rhs=rhs)
    cacg = _iterations(matrix, {"ksp_type": "cacg", "pc_type": pc}, rhs=rhs)
    assert abs(cacg - cg) <= S, (cg, cacg)
