"""One aggregation hierarchy for a family of matrices L + mu_k C, one per
shift mu_k >= 0 (the 2D systems of an extruded Poisson problem after a
Fourier transform along its layers, one per wavenumber; Borrell, Lehmkuhl,
Trias and Oliva, "Parallel direct Poisson solver for discretisations with
one Fourier diagonalisable direction", J. Comput. Phys. 230, 2011), cycled
on all of them at once.

The aggregates and prolongations are L's; each level keeps the Galerkin
products of L and of C apart, so that member k's coarse operator is
L_l + mu_k C_l, the Galerkin product of its own matrix. A block of vectors
(n, K, parts) holds member k's vectors in its column k; every product is
one sparse-times-dense product of the block. Chebyshev-Jacobi smoothing
with each member's diagonal on one interval for all: by the mediant
inequality x^T (L + mu C) x / x^T (D_L + mu D_C) x lies below the larger
of the largest eigenvalues of D_L^-1 L and D_C^-1 C (Lanczos), whatever mu.
The coarsest level: each member's dense pseudo-inverse. Array code, the
same for NumPy and CuPy.
"""

import numpy

from ..approximate_inverse import lanczos_extremes
from ..backend import sparse_module
from ..sell import SellMatrix
from .aggregation import THRESHOLD, mis2_aggregates
from .cycle import CHEBYSHEV_FRACTION, CHEBYSHEV_SAFETY, DEGREE, LANCZOS_STEPS, chebyshev_steps, coarsest_inverse
from .galerkin import galerkin_product, reached_null_space
from .prolongation import smoothed_prolongation

COARSE_SIZE = 400  # rows at or below which a level is the coarsest: K dense inverses of it are kept


class ShiftedLevel:
    """A level: ``L`` and ``C`` (CSR, float64), the Chebyshev ``steps`` and
    per member ``scaling`` (1 / (diag L + mu diag C), shape (n, K, 1)); where
    not the coarsest, ``P`` and ``R`` = P^T; on the coarsest, ``inverse``
    (K, n, n)."""

    def __init__(self, L, C):
        self.L, self.C = L, C
        self.P = self.R = self.inverse = None
        self.steps = self.scaling = None


class ShiftedAMG:
    """The hierarchy of L + mu_k C for the ``shifts`` mu_k (host sequence,
    each >= 0), from ``L`` (CSR in ``xp``'s memory, symmetric positive
    semidefinite) and ``c`` (C's positive diagonal); ``apply(B)`` one
    V-cycle on a block B (n, K, parts) from zero."""

    def __init__(self, L, c, shifts, xp, threshold=THRESHOLD, coarse_size=COARSE_SIZE, degree=DEGREE,
                 max_levels=25):
        sparse = sparse_module(xp)
        self.xp, self.degree = xp, degree
        shifts = numpy.asarray(shifts, dtype=numpy.float64)
        if shifts.ndim != 1 or (shifts < 0).any():
            raise ValueError("the shifts must be a sequence of values >= 0")
        self.shifts = xp.asarray(shifts)
        C = sparse.diags(xp.asarray(c, dtype=xp.float64)).tocsr()
        L = sparse.csr_matrix(L)
        self.levels = []
        while True:
            level = ShiftedLevel(L, C)
            self.levels.append(level)
            if L.shape[0] <= coarse_size or len(self.levels) == max_levels:
                break
            d = diagonal_of(L)
            rho = self._smoother(level)
            aggregates, count = mis2_aggregates(L, threshold)
            if count > 0.9 * L.shape[0]:
                break
            P = smoothed_prolongation(xp, L, d, aggregates, count, rho)
            R = P.T.tocsr()
            coarse = galerkin_product(R, L, P)
            if reached_null_space(coarse, P, d):
                break
            level.P, level.R = P, R
            L, C = coarse, galerkin_product(R, C, P)
        last = self.levels[-1]
        last.steps = last.scaling = None
        L_dense, C_dense = last.L.toarray(), last.C.toarray()
        last.inverse = xp.stack([coarsest_inverse(xp, L_dense + mu * C_dense) for mu in shifts.tolist()])

    def _smoother(self, level):
        """The level's Chebyshev steps and scaling; returns the largest eigenvalue of D_L^-1 L (for P's
        smoothing)."""
        xp = self.xp
        d_L, d_C = diagonal_of(level.L), diagonal_of(level.C)
        top_L = largest_eigenvalue(level.L, d_L, xp)
        top = max(top_L, largest_eigenvalue(level.C, d_C, xp))
        level.steps = chebyshev_steps(CHEBYSHEV_FRACTION * top, CHEBYSHEV_SAFETY * top, self.degree)
        level.scaling = 1.0 / (d_L[:, None] + d_C[:, None] * self.shifts[None, :])[:, :, None]
        return top_L

    def product(self, level, X):
        """(L_l + mu_k C_l) X_k for each member k: X (n, K, parts)."""
        n, K, parts = X.shape
        flat = X.reshape(n, K * parts)
        return (level.L @ flat).reshape(X.shape) + self.shifts[None, :, None] * (level.C @ flat).reshape(X.shape)

    def apply(self, B):
        """One V-cycle from zero on the block B (n, K, parts): a symmetric operator of each member, fit for CG."""
        return self._cycle(0, B)

    def _cycle(self, k, B):
        level = self.levels[k]
        if level.inverse is not None:
            return (level.inverse @ B.transpose(1, 0, 2)).transpose(1, 0, 2)
        X = self._smooth(level, B, None)
        residual = B - self.product(level, X)
        coarse_shape = (level.R.shape[0],) + B.shape[1:]
        correction = self._cycle(k + 1, (level.R @ residual.reshape(B.shape[0], -1)).reshape(coarse_shape))
        X += (level.P @ correction.reshape(coarse_shape[0], -1)).reshape(B.shape)
        return self._smooth(level, B, X)

    def _smooth(self, level, B, X):
        """The level's Chebyshev-Jacobi steps on each member's system from X (None: from zero)."""
        R = B if X is None else B - self.product(level, X)
        D = None
        for a, c in level.steps:
            if D is not None:
                R = R - self.product(level, D)
                D = a * D + c * level.scaling * R
            else:
                D = c * level.scaling * R
            X = D.copy() if X is None else X + D
        return X

    def sizes(self):
        """Per level (rows, nonzeros of L)."""
        return [(level.L.shape[0], int(level.L.nnz)) for level in self.levels]


def diagonal_of(M):
    """The diagonal of the CSR matrix M, checked positive."""
    d = M.diagonal()
    if not bool((d > 0).all()):
        raise ValueError("a shifted hierarchy needs matrices of positive diagonal")
    return d


def largest_eigenvalue(M, d, xp):
    """The largest eigenvalue of D^-1 M (Lanczos; 1 for a diagonal M)."""
    if M.nnz == M.shape[0] and bool((M.indices == xp.arange(M.shape[0])).all()):
        return 1.0
    A = SellMatrix.from_csr(M.indptr, M.indices, M.data, M.shape, xp=xp)
    return lanczos_extremes(A, 1.0 / d, LANCZOS_STEPS)[1]
