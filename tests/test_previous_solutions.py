"""Fischer's initial guess (gpu_mats.previous_solutions): its basis against
the definition, and graphcg's queued solves (a flow step's) against PETSc's
cg with the same KSPGuess, -ksp_guess_type fischer -ksp_guess_fischer_model
2,SIZE. The CUDA kernels against their NumPy twins: tests/test_gpu.py."""

import numpy
import pytest
import scipy.sparse
from mpi4py import MPI
from petsc4py import PETSc

import plugin  # noqa: F401  (registers graphcg)
from gpu_mats.exchange import MpiSum
from gpu_mats.previous_solutions import PreviousSolutions
from petsc_ext.matrices import aij_from_csr
from petsc_ext.options import option_defaults
from stencils import laplacian


def _tridiagonal(n):
    return scipy.sparse.diags([-1.0, 2.5, -1.0], [-1, 0, 1], shape=(n, n)).tocsr()


def _filled(A, size, rights):
    """A basis of ``size`` after solving A x = b for each of ``rights`` exactly, and its scratch."""
    n = A.shape[0]
    basis, w, aw = PreviousSolutions(numpy, n, size), numpy.zeros(n), numpy.zeros(n)
    for b in rights:
        basis.guess(b, numpy.zeros(n))
        basis.update(numpy.linalg.solve(A.toarray(), b), lambda v, out: numpy.copyto(out, A @ v), w, aw)
    return basis, w, aw


def test_the_basis_is_orthonormal_in_the_energy_product_and_its_guess_exact_on_its_span(rng):
    A = _tridiagonal(40)
    rights = [rng.standard_normal(40) for _ in range(3)]
    basis, _, _ = _filled(A, 4, rights)
    assert basis.count == 3
    numpy.testing.assert_allclose(basis.X[:3] @ A @ basis.X[:3].T, numpy.eye(3), atol=1e-13)
    assert not basis.X[3].any()  # not in use
    b, x = 0.3 * rights[0] - 2.0 * rights[2], numpy.zeros(40)
    basis.guess(b, x)  # b in the span of the solved right-hand sides: the guess is the solution
    numpy.testing.assert_allclose(x, numpy.linalg.solve(A.toarray(), b), rtol=0, atol=1e-12)
    other = rng.standard_normal(40)
    basis.guess(other, x)  # elsewhere: the energy norm's best approximation in the span, X X^T b
    numpy.testing.assert_allclose(x, basis.X[:3].T @ (basis.X[:3] @ other), rtol=1e-13)


def test_an_empty_basis_guesses_zero_and_a_full_one_starts_anew_from_the_solution(rng):
    A = _tridiagonal(30)
    empty, x = PreviousSolutions(numpy, 30, 2), numpy.ones(30)
    empty.guess(rng.standard_normal(30), x)
    assert not x.any()
    rights = [rng.standard_normal(30) for _ in range(3)]
    basis, _, _ = _filled(A, 2, rights)
    last = numpy.linalg.solve(A.toarray(), rights[-1])
    assert basis.count == 1  # the third update found the basis full: PETSc's model 2 starts anew
    numpy.testing.assert_allclose(basis.X[0], last / numpy.sqrt(last @ A @ last), rtol=1e-13)
    with pytest.raises(ValueError, match="at least one vector"):
        PreviousSolutions(numpy, 30, 0)


def test_on_a_singular_operator_the_increments_are_made_mean_free(rng):
    """The Neumann Laplacian (null space: the constants) and solutions that
    carry a large constant each: with ``mean_free`` the basis holds none of
    it (its vectors sum to zero) and guesses the mean-free solution on its
    span; without, a constant joins, blown up by the energy norm's
    normalization, which does not see it."""
    n = 40
    A = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n)).tolil()
    A[0, 0] = A[-1, -1] = 1.0
    A = A.tocsr()
    rights = [rng.standard_normal(n) for _ in range(3)]
    rights = [b - b.mean() for b in rights]
    solutions = [numpy.linalg.lstsq(A.toarray(), b, rcond=None)[0] + 1e3 * (k + 1) for k, b in enumerate(rights)]
    multiply = lambda v, out: numpy.copyto(out, A @ v)  # noqa: E731
    kept = {}
    for mean_free in (True, False):
        basis, w, aw = PreviousSolutions(numpy, n, 4, mean_free=mean_free), numpy.zeros(n), numpy.zeros(n)
        for b, x in zip(rights, solutions):
            basis.guess(b, numpy.zeros(n))
            basis.update(x, multiply, w, aw)
        kept[mean_free] = basis
    X = kept[True].X[:kept[True].count]
    assert kept[True].count == 3 and abs(X.sum(axis=1)).max() < 1e-9 * abs(X).max()
    numpy.testing.assert_allclose(X @ A @ X.T, numpy.eye(3), atol=1e-10)
    b, x = rights[1] - 0.5 * rights[2], numpy.zeros(n)
    kept[True].guess(b, x)
    exact = numpy.linalg.lstsq(A.toarray(), b, rcond=None)[0]
    numpy.testing.assert_allclose(x - x.mean(), exact - exact.mean(), rtol=0, atol=1e-9 * abs(exact).max())
    assert abs(kept[False].X[0].sum()) > 1e3 * abs(kept[True].X[0]).max()  # the constant joined, blown up


def test_keep_and_restore_undo_an_update_also_where_the_basis_starts_anew(rng):
    """keep() before an update and restore() after it give back the basis and
    its state bit for bit: an update that appends, and one that finds the
    basis full and starts anew (row 0 rewritten, the count reset)."""
    A = _tridiagonal(30)
    multiply = lambda v, out: numpy.copyto(out, A @ v)  # noqa: E731
    basis, w, aw = _filled(A, 3, [rng.standard_normal(30) for _ in range(2)])
    saved = basis.saved()
    for expected_count in (3, 1):  # appends the third vector; then full: starts anew
        before = (basis.X.copy(), basis.state.copy())
        b = rng.standard_normal(30)
        basis.guess(b, numpy.zeros(30))
        basis.keep(saved)
        basis.update(numpy.linalg.solve(A.toarray(), b), multiply, w, aw)
        assert basis.count == expected_count
        after = (basis.X.copy(), basis.state.copy())
        basis.restore(saved)
        assert numpy.array_equal(basis.X, before[0]) and numpy.array_equal(basis.state, before[1])
        basis.X[...], basis.state[...] = after  # go on from the update


def test_a_basis_loaded_from_its_vectors_guesses_the_same(rng):
    A = _tridiagonal(30)
    basis, _, _ = _filled(A, 4, [rng.standard_normal(30) for _ in range(3)])
    again = PreviousSolutions(numpy, 30, 4)
    again.load(basis.vectors().copy())
    b, x, y = rng.standard_normal(30), numpy.zeros(30), numpy.zeros(30)
    basis.guess(b, x)
    again.guess(b, y)
    assert again.count == 3 and numpy.array_equal(x, y)
    with pytest.raises(ValueError, match="5 vectors for a basis of at most 4"):
        again.load(numpy.zeros((5, 30)))


@pytest.mark.mpi
def test_a_basis_over_the_ranks_is_the_one_rank_basis():
    """Each rank holds a block of the rows (the last rank none where there are
    three), the sums go over the ranks (MpiSum) and the mean is the global
    one: the Neumann Laplacian's guesses and basis are those of one rank."""
    comm = MPI.COMM_WORLD
    n = 37
    A = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n)).tolil()
    A[0, 0] = A[-1, -1] = 1.0
    A = A.tocsr()
    bounds = numpy.linspace(0, n, comm.Get_size() + 1).astype(int) if comm.Get_size() < 3 else [0, 20, n, n]
    mine = slice(bounds[comm.Get_rank()], bounds[comm.Get_rank() + 1])
    local = mine.stop - mine.start

    def multiply_local(v, out):
        out[...] = (A @ numpy.concatenate(comm.allgather(v)))[mine]

    rng = numpy.random.default_rng(5)  # the same right-hand sides on every rank
    rights = [b - b.mean() for b in (rng.standard_normal(n) for _ in range(5))]
    whole = PreviousSolutions(numpy, n, 3, mean_free=True)
    parts = PreviousSolutions(numpy, local, 3, mean_free=True, reduce=MpiSum(comm, numpy), total=n)
    for b in rights:
        x, y = numpy.zeros(n), numpy.zeros(local)
        whole.guess(b, x)
        parts.guess(b[mine], y)
        numpy.testing.assert_allclose(y, x[mine], rtol=0, atol=1e-12 * max(abs(x).max(), 1.0))
        solution = numpy.linalg.lstsq(A.toarray(), b, rcond=None)[0] + 7.0  # a constant the basis must not take
        whole.update(solution, lambda v, out: numpy.copyto(out, A @ v), numpy.zeros(n), numpy.zeros(n))
        parts.update(solution[mine], multiply_local, numpy.zeros(local), numpy.zeros(local))
    assert parts.count == whole.count == 2  # five updates of three: a restart
    numpy.testing.assert_allclose(parts.X, whole.X[:, mine], rtol=0, atol=1e-12 * abs(whole.X).max())


def _run(kind, csr, n, rights, guess):
    """Iterations and solutions of a run of solves of the one matrix, cg (KSPSolve) or graphcg's queued solves."""
    A = aij_from_csr(*csr, (n, n), comm=PETSc.COMM_SELF)
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setOptionsPrefix("fg_")
    ksp.setOperators(A)
    ksp.setTolerances(rtol=1e-10)
    options = {"ksp_type": kind, "pc_type": "jacobi", "ksp_norm_type": "unpreconditioned"}
    if guess:
        options.update(ksp_guess_type="fischer", ksp_guess_fischer_model="2,3")
    with option_defaults("fg_", options):
        ksp.setFromOptions()
    ksp.setUp()
    b, x = A.createVecs()
    iterations, solutions = [], []
    for right in rights:
        if kind == "cg":
            b.setArray(right)
            ksp.solve(b, x)
            iterations.append(ksp.getIterationNumber())
            solutions.append(x.getArray(readonly=True).copy())
        else:
            context, out = ksp.getPythonContext(), numpy.zeros(n)
            context.queue(ksp, right, out, 0)
            (its, reason), = context.settle(ksp, 1)
            assert reason > 0
            iterations.append(its)
            solutions.append(out)
    ksp.destroy()
    A.destroy()
    return iterations, solutions


def test_graphcgs_queued_solves_take_petscs_fischer_guess():
    """A run of right-hand sides that drift, as a time step's pressure's do:
    queued graphcg solves with Fischer's guess take the iterations of PETSc's
    cg with the same KSPGuess (past its basis's restart), to the same
    solutions, and fewer than without it."""
    csr, n = laplacian(8), 8**3
    points = numpy.arange(n) / n
    rights = [numpy.sin(3.0 * points + 0.05 * k) + 0.1 * numpy.cos(7.0 * points * (1 + 0.02 * k)) for k in range(8)]
    petsc, petsc_solutions = _run("cg", csr, n, rights, guess=True)
    queued, queued_solutions = _run("graphcg", csr, n, rights, guess=True)
    plain, _ = _run("graphcg", csr, n, rights, guess=False)
    assert queued == petsc, (queued, petsc)
    assert all(a <= b for a, b in zip(queued, plain)) and sum(queued) < sum(plain), (queued, plain)
    for ours, theirs in zip(queued_solutions, petsc_solutions):
        numpy.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9 * abs(theirs).max())


def test_a_step_graph_refuses_a_guess_it_does_not_hold():
    csr, n = laplacian(4), 4**3
    A = aij_from_csr(*csr, (n, n), comm=PETSc.COMM_SELF)
    for options, why in (({"ksp_guess_type": "fischer"}, "KSPGuess fischer of model 1"),
                         ({"ksp_guess_type": "pod"}, "KSPGuess pod"),
                         ({"ksp_fischer_guess": "3,4"}, "KSPGuess fischer of model 3")):
        ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
        ksp.setOptionsPrefix("fr_")
        ksp.setOperators(A)
        with option_defaults("fr_", {"ksp_type": "graphcg", "pc_type": "jacobi", **options}):
            ksp.setFromOptions()
        assert why in ksp.getPythonContext().queue_refusal(ksp)
        ksp.destroy()
