"""-pc_type ainv: the approximate inverses against dense references, and as
PETSc preconditioners. On a GPU machine they run on CUDA vectors through
gpusell; elsewhere with NumPy."""

import numpy
import pytest
import scipy.sparse
from petsc4py import PETSc

import plugin  # noqa: F401  (registers ainv)
from gpu_mats import SellMatrix
from gpu_mats.approximate_inverse import ChebyshevPolynomial, FactoredInverse, SparseApproximateInverse
from stencils import laplacian, stencil_csr

from conftest import krylov_solve
from test_gpusell import COMM, options  # noqa: F401  (fixture)


def sell(matrix):
    matrix = scipy.sparse.csr_matrix(matrix)
    matrix.sort_indices()
    return SellMatrix.from_csr(matrix.indptr, matrix.indices, matrix.data, matrix.shape, xp=numpy)


def spd_test_matrix(n=60, seed=0):
    """A random sparse SPD matrix with an irregular pattern (not a stencil)."""
    rng = numpy.random.default_rng(seed)
    B = scipy.sparse.random(n, n, density=0.06, random_state=rng, data_rvs=rng.standard_normal)
    A = (B @ B.T + scipy.sparse.diags(rng.random(n) + 0.5)).tocsr()
    A.data[abs(A.data) < 1e-3] = 0.0
    A.eliminate_zeros()
    return A


def operator(inverse, n, transpose=False):
    """The preconditioner as a dense matrix, column by column."""
    apply = inverse.apply_transpose if transpose else inverse.apply
    columns = []
    for j in range(n):
        columns.append(numpy.empty(n))
        apply(numpy.eye(n)[j], columns[-1])
    return numpy.stack(columns, axis=1)


@pytest.mark.parametrize("levels, drop", [(1, 0.0), (2, 0.0), (2, 0.2), (3, 0.0)])
def test_fsai_matches_a_dense_computation_and_is_spd(levels, drop):
    A = spd_test_matrix()
    n = A.shape[0]
    F = FactoredInverse(sell(A), levels=levels, drop=drop)
    # the reference: pattern of tril(A~^k), rows from dense solves, scaled
    dense = A.toarray()
    d = numpy.sqrt(numpy.abs(numpy.diag(dense)))
    kept = ((dense != 0) & (numpy.abs(dense) >= drop * numpy.outer(d, d))) | numpy.eye(n, dtype=bool)
    pattern = numpy.tril(numpy.linalg.matrix_power(kept.astype(int), levels) > 0)
    G = numpy.zeros((n, n))
    for i in range(n):
        P = numpy.flatnonzero(pattern[i])
        g = numpy.linalg.solve(dense[numpy.ix_(P, P)], (P == i).astype(float))
        G[i, P] = g / numpy.sqrt(g[P == i])
    indptr, indices, data = F.G.to_csr()
    got = scipy.sparse.csr_matrix((data, indices, indptr), shape=(n, n)).toarray()
    numpy.testing.assert_allclose(got, G, rtol=1e-10, atol=1e-12)
    numpy.testing.assert_allclose(numpy.diag(G @ dense @ G.T), 1.0, rtol=1e-10)
    M = operator(F, n)
    rng = numpy.random.default_rng(1)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    assert x @ M @ y == pytest.approx(y @ M @ x, rel=1e-12)
    assert numpy.linalg.eigvalsh((M + M.T) / 2).min() > 0


def test_spai_columns_are_the_least_squares_solutions():
    rng = numpy.random.default_rng(2)
    A = (scipy.sparse.random(50, 50, density=0.08, random_state=rng) + 4 * scipy.sparse.eye(50)).tocsr()
    S = SparseApproximateInverse(sell(A))
    M = operator(S, 50)
    dense = A.toarray()
    for j in range(50):
        J = numpy.flatnonzero(dense[:, j])
        m, *_ = numpy.linalg.lstsq(dense[:, J], numpy.eye(50)[:, j], rcond=None)
        numpy.testing.assert_allclose(M[J, j], m, rtol=1e-9, atol=1e-12)
        assert not numpy.delete(M[:, j], J).any()
    numpy.testing.assert_allclose(operator(S, 50, transpose=True), M.T, rtol=1e-14)
    assert numpy.linalg.norm(numpy.eye(50) - dense @ M) < numpy.linalg.norm(numpy.eye(50) - dense / numpy.diag(dense))


def test_chebyshev_is_a_symmetric_positive_polynomial_in_the_jacobi_operator():
    A = spd_test_matrix(seed=3)
    n = A.shape[0]
    C = ChebyshevPolynomial(sell(A), degree=5, lanczos_steps=n)  # full Lanczos: the exact interval
    dense = A.toarray()
    DinvA = dense / numpy.diag(dense)[:, None]
    lam = numpy.sort(numpy.linalg.eigvals(DinvA).real)
    assert C.interval[0] == pytest.approx(lam[0], rel=1e-8)
    assert C.interval[1] == pytest.approx(1.05 * lam[-1], rel=1e-8)
    M = operator(C, n)
    numpy.testing.assert_allclose(M, M.T, rtol=1e-10, atol=1e-12)
    mu = numpy.linalg.eigvals(M @ dense).real  # close to 1 on the interval
    assert mu.min() > 0 and abs(mu - 1).max() < 2 / numpy.cosh(5 * numpy.arccosh((C.interval[1] + C.interval[0])
                                                                                  / (C.interval[1] - C.interval[0])))


def solve(csr, n, opts, ksp_type="cg", nullspace=False, comm=COMM, rhs=None):
    """Iterations, reason and solution of a PETSc solve with gpusell and the given options."""
    ksp, x = krylov_solve(csr, n, {"ksp_type": ksp_type, **opts}, comm=comm, rhs=rhs, nullspace=nullspace,
                          max_it=2000)
    return ksp.getIterationNumber(), ksp.getConvergedReason(), x, ksp


@pytest.mark.mpi
def test_fsai_cuts_cg_iterations_at_32_cubed_by_the_targets():
    csr, n = laplacian(32), 32**3
    jacobi, *_ = solve(csr, n, {"pc_type": "jacobi"})
    counts = {k: solve(csr, n, {"pc_type": "ainv", "pc_ainv_levels": k}) for k in (1, 2, 3)}
    assert all(reason > 0 for _, reason, *_ in counts.values())
    if COMM.getSize() == 1:
        assert jacobi == 79
        for k, target in ((1, 1.35), (2, 1.7), (3, 2.2)):
            assert jacobi / counts[k][0] >= target, (k, jacobi, counts[k][0])
    else:  # block-local on each rank: weaker, but still better than Jacobi
        assert counts[1][0] < jacobi and counts[3][0] < counts[1][0]


@pytest.mark.parametrize("ksp_type", ["cg", "pipecg", "gmres"])
@pytest.mark.parametrize("kind", ["fsai", "spai", "chebyshev"])
def test_every_variant_works_with_petsc_krylov_methods(ksp_type, kind):
    its, reason, *_ = solve(laplacian(10), 1000, {"pc_type": "ainv", "pc_ainv_type": kind}, ksp_type)
    jacobi, *_ = solve(laplacian(10), 1000, {"pc_type": "jacobi"}, ksp_type)
    assert reason > 0 and its < jacobi


def test_spai_with_gmres_on_a_nonsymmetric_convection_diffusion_matrix():
    offsets = [(0, 0, 0), (-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1)]
    csr = stencil_csr((12, 12, 12), offsets, [6.0, -1.6, -0.4, -1.3, -0.7, -1.0, -1.0])  # upwinded convection
    its, reason, *_ = solve(csr, 12**3, {"pc_type": "ainv", "pc_ainv_type": "spai"}, "gmres")
    jacobi, *_ = solve(csr, 12**3, {"pc_type": "jacobi"}, "gmres")
    assert reason > 0 and its < jacobi


def neumann_laplacian(n):
    """The 7-point Laplacian with Neumann walls: singular, constant null space."""
    indptr, indices, data = laplacian(n)
    A = scipy.sparse.csr_matrix((data, indices, indptr))
    A = (A - scipy.sparse.diags(numpy.asarray(A.sum(axis=1)).ravel())).tocsr()
    A.sort_indices()
    return A.indptr, A.indices, A.data


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["fsai", "chebyshev"])
def test_singular_neumann_poisson_with_its_null_space(kind):
    n = 12
    rhs = numpy.random.default_rng(4).standard_normal(n**3)
    rhs -= rhs.mean()
    its, reason, x, ksp = solve(neumann_laplacian(n), n**3, {"pc_type": "ainv", "pc_ainv_type": kind},
                                nullspace=True, rhs=rhs)
    assert reason > 0
    r = x.duplicate()
    ksp.getOperators()[0].mult(x, r)
    lo, hi = r.getOwnershipRange()
    residual = numpy.sqrt(COMM.tompi4py().allreduce(float(((r.getArray(readonly=True) - rhs[lo:hi]) ** 2).sum())))
    assert residual < 1e-6 * numpy.linalg.norm(rhs)


@pytest.mark.mpi
def test_parallel_solution_matches_the_serial_one():
    csr, n = laplacian(12), 12**3
    opts = {"pc_type": "ainv", "pc_ainv_levels": 2}
    _, reason, x, _ = solve(csr, n, opts)
    _, serial_reason, xs, _ = solve(csr, n, opts, comm=PETSc.COMM_SELF)
    lo, hi = x.getOwnershipRange()
    assert reason > 0 and serial_reason > 0
    numpy.testing.assert_allclose(x.getArray(readonly=True), xs.getArray(readonly=True)[lo:hi], rtol=1e-6,
                                  atol=1e-6 * abs(xs.getArray(readonly=True)).max())


def test_pc_view_and_log_events(capsys):
    PETSc.Log.begin()
    apply_event = PETSc.Log.Event("AINVApply")
    before = apply_event.getPerfInfo()["count"]
    its, _, _, ksp = solve(laplacian(8), 512, {"pc_type": "ainv", "pc_ainv_levels": 2})
    assert apply_event.getPerfInfo()["count"] >= before + its
    assert PETSc.Log.Event("AINVSetup").getPerfInfo()["count"] >= 1
    ksp.view()
    out = capsys.readouterr().out
    assert "type: ainv" in out and "ainv: fsai, levels 2, drop 0, values float64" in out
    assert "nnz of G: " in out and "setup time: " in out


# --- bad input ---------------------------------------------------------------


def _errors(csr, n, opts, match):
    with pytest.raises(PETSc.Error, match=match):
        solve(csr, n, opts, comm=PETSc.COMM_SELF)


def test_fsai_refuses_a_non_positive_diagonal_naming_the_row():
    indptr, indices, data = laplacian(4)
    data = data.copy()
    data[indptr[5]:indptr[6]][indices[indptr[5]:indptr[6]] == 5] = -2.0
    _errors((indptr, indices, data), 64, {"pc_type": "ainv"}, r"positive diagonal: row 5 has A\[5, 5\] = -2")
    data[indptr[5]:indptr[6]][indices[indptr[5]:indptr[6]] == 5] = 0.0
    _errors((indptr, indices, data), 64, {"pc_type": "ainv"}, r"row 5 has A\[5, 5\] = 0")


def test_fsai_refuses_an_indefinite_local_system_naming_the_row():
    A = scipy.sparse.csr_matrix(numpy.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    _errors((A.indptr, A.indices, A.data), 3, {"pc_type": "ainv"}, "local system of row 1 is not positive definite")


def test_fsai_refuses_a_nonsymmetric_matrix():
    A = scipy.sparse.csr_matrix(numpy.array([[4.0, -1.0, 0.0], [-2.0, 4.0, -1.0], [0.0, -1.0, 4.0]]))
    _errors((A.indptr, A.indices, A.data), 3, {"pc_type": "ainv"},
            r"fsai needs a symmetric matrix: A\[0, 1\] = -1 but A\[1, 0\] = -2; use -pc_ainv_type spai")


@pytest.mark.parametrize("levels", [0, 9])
def test_levels_out_of_range_are_refused_with_the_range(levels):
    _errors(laplacian(3), 27, {"pc_type": "ainv", "pc_ainv_levels": levels},
            f"-t_pc_ainv_levels {levels} is out of range: valid values are 1 to 3")
