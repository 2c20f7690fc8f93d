"""gpu_mats.amg.shifted: one aggregation hierarchy for the family L + mu_k C
cycled on all members at once (the 2D systems of layerfft's multigrid
sections), on the host. Each member's cycle is its own (a member cycled
alone gives the same), symmetric and a convergent preconditioner of its
matrix; with one level it is the member's exact (pseudo-)inverse. The CuPy
twin is in tests/test_gpu.py."""

import numpy
import pytest
import scipy.sparse

from gpu_mats.amg.shifted import ShiftedAMG

SHIFTS = [0.0, 0.05, 0.4, 2.0, 4.0]


def neumann_grid(n=24, seed=4):
    """L: the 5-point Laplacian of an n x n grid with Neumann sides and random positive couplings (singular:
    the constants); c: positive weights, as the cell areas' couplings to the layers."""
    rng = numpy.random.default_rng(seed)
    index = numpy.arange(n * n).reshape(n, n)
    pairs = numpy.concatenate([numpy.stack([index[:-1].ravel(), index[1:].ravel()], 1),
                               numpy.stack([index[:, :-1].ravel(), index[:, 1:].ravel()], 1)])
    w = rng.uniform(0.5, 2.0, len(pairs))
    i, j = pairs.T
    W = scipy.sparse.csr_matrix((numpy.concatenate([w, w]), (numpy.concatenate([i, j]), numpy.concatenate([j, i]))),
                                shape=(n * n, n * n))
    L = (scipy.sparse.diags(numpy.asarray(W.sum(axis=1)).ravel()) - W).tocsr()
    L.sort_indices()
    return L, rng.uniform(0.5, 1.5, n * n)


def cycled(mg, B):
    """One cycle of the block B."""
    X = numpy.full_like(B, numpy.nan)
    mg.apply(B, X)
    return X


def member_operators(L, c, coarse_size):
    """Each member's cycle as a dense matrix (K, n, n), from one cycle of the block of unit vectors."""
    n = L.shape[0]
    unit = numpy.broadcast_to(numpy.eye(n)[:, None, :], (n, len(SHIFTS), n)).copy()
    return cycled(ShiftedAMG(L, c, SHIFTS, numpy, parts=n, coarse_size=coarse_size), unit).transpose(1, 0, 2)


def test_each_member_is_cycled_as_if_alone():
    L, c = neumann_grid()
    B = numpy.random.default_rng(2).standard_normal((L.shape[0], len(SHIFTS), 2))
    family = ShiftedAMG(L, c, SHIFTS, numpy, coarse_size=40)
    assert len(family.levels) >= 3
    together = cycled(family, B)
    for k, mu in enumerate(SHIFTS):
        alone = cycled(ShiftedAMG(L, c, [mu], numpy, coarse_size=40), B[:, k:k + 1].copy())
        numpy.testing.assert_allclose(together[:, k:k + 1], alone, rtol=0, atol=1e-13 * abs(alone).max())


def test_each_members_cycle_is_a_symmetric_convergent_preconditioner():
    """M_k symmetric; the eigenvalues of M_k S_k in (0, 1] on S_k's range (a V-cycle with as many smoothing
    steps after as before, from zero: I - M_k S_k is an S_k-norm contraction)."""
    L, c = neumann_grid()
    n = L.shape[0]
    M = member_operators(L, c, 40)
    for k, mu in enumerate(SHIFTS):
        numpy.testing.assert_allclose(M[k], M[k].T, rtol=0, atol=1e-12 * abs(M[k]).max())
        S = (L + mu * scipy.sparse.diags(c)).toarray()
        if mu == 0.0:  # on the range of the singular member: the mean-free vectors
            Q = numpy.linalg.qr(numpy.eye(n)[:, 1:] - 1.0 / n)[0]
            S, Mk = Q.T @ S @ Q, Q.T @ M[k] @ Q
        else:
            Mk = M[k]
        lowest = numpy.linalg.eigvalsh(Mk).min()
        assert lowest > 0, (mu, lowest)
        root = numpy.linalg.cholesky(S)  # the eigenvalues of root^T M root are those of M S
        eigenvalues = numpy.linalg.eigvalsh(root.T @ Mk @ root)
        assert eigenvalues.min() > 0.05 and eigenvalues.max() <= 1.0 + 1e-10, (mu, eigenvalues.min(),
                                                                               eigenvalues.max())


def test_one_level_is_each_members_exact_pseudo_inverse():
    L, c = neumann_grid(n=8)
    assert len(ShiftedAMG(L, c, SHIFTS, numpy, coarse_size=64).levels) == 1
    M = member_operators(L, c, 64)
    for k, mu in enumerate(SHIFTS):
        expected = numpy.linalg.pinv((L + mu * scipy.sparse.diags(c)).toarray())
        numpy.testing.assert_allclose(M[k], expected, rtol=0, atol=1e-10 * abs(expected).max())


def test_negative_shifts_are_refused():
    L, c = neumann_grid(n=4)
    with pytest.raises(ValueError, match="shifts must be a sequence of values >= 0"):
        ShiftedAMG(L, c, [1.0, -0.5], numpy)
