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
one pass of the shifted kernel family over the block (L's and C's values
on one pattern), on blocks kept from one cycle to the next. Chebyshev-Jacobi smoothing
with each member's diagonal on one interval for all: by the mediant
inequality x^T (L + mu C) x / x^T (D_L + mu D_C) x lies below the larger
of the largest eigenvalues of D_L^-1 L and D_C^-1 C (Lanczos), whatever mu.
The coarsest level: each member's dense pseudo-inverse. The set-up is
array code, the same for NumPy and CuPy; the cycle launches the shifted
and multigrid families' kernels (CUDA, or their NumPy twins).
"""

import numpy

from ..approximate_inverse import lanczos_extremes
from ..backend import sparse_module
from ..kernels import family
from ..sell import SellMatrix
from .aggregation import THRESHOLD, mis2_aggregates
from .cycle import (CHEBYSHEV_FRACTION, CHEBYSHEV_SAFETY, DEGREE, LANCZOS_STEPS, chebyshev_steps, coarsest_inverse,
                    values_on_pattern)
from .galerkin import galerkin_product, reached_null_space
from .prolongation import smoothed_prolongation

COARSE_SIZE = 400  # rows at or below which a level is the coarsest: K dense inverses of it are kept


class BlockMatrix:
    """A CSR pattern with L's values and, where ``C`` is given, C's on it
    (the union of both patterns): the shifted family's block products."""

    def __init__(self, L, C, xp):
        pattern = (abs(L) + abs(C)).tocsr() if C is not None else L.tocsr().copy()
        pattern.sum_duplicates()
        pattern.sort_indices()
        self.rows = pattern.shape[0]
        self.indptr = xp.asarray(pattern.indptr, dtype=xp.int64)
        self.indices = xp.asarray(pattern.indices, dtype=xp.int32)
        self.l_data = values_on_pattern(pattern, L, xp.float64, xp)
        self.c_data = None if C is None else values_on_pattern(pattern, C, xp.float64, xp)

    def arrays(self):
        return self.indptr, self.indices, self.l_data, self.c_data


class ShiftedLevel:
    """A level: ``A`` (BlockMatrix of L and C), the Chebyshev ``steps`` and
    per member ``scaling`` (1 / (diag L + mu diag C), a block); where not the
    coarsest, the transfers ``P`` and ``R`` = P^T (BlockMatrix of one matrix);
    on the coarsest, ``inverse`` (K, n, n); its blocks b, x, r, d, d_next."""

    def __init__(self, L, C, shape, xp):
        self.L, self.C = L, C  # float64 CSR, for the set-up
        self.A = BlockMatrix(L, C, xp)
        self.P = self.R = self.inverse = None
        self.steps = self.scaling = None
        self.b, self.x, self.r, self.d, self.d_next = (xp.zeros((L.shape[0],) + shape) for _ in range(5))


class ShiftedAMG:
    """The hierarchy of L + mu_k C for the ``shifts`` mu_k (host sequence,
    each >= 0), from ``L`` (scipy or cupyx CSR, symmetric positive
    semidefinite; copied to ``xp``'s memory) and ``c`` (C's positive diagonal), for blocks of
    (rows, K, ``parts``); ``apply(B, X)`` one V-cycle from zero, launching
    the shifted family's kernels on kept blocks."""

    def __init__(self, L, c, shifts, xp, parts=2, threshold=THRESHOLD, coarse_size=COARSE_SIZE, degree=DEGREE,
                 max_levels=25):
        sparse = sparse_module(xp)
        self.xp, self.degree, self.parts = xp, degree, parts
        self._kernels, self._vectors = family("shifted", xp), family("multigrid", xp)
        shifts = numpy.asarray(shifts, dtype=numpy.float64)
        if shifts.ndim != 1 or (shifts < 0).any():
            raise ValueError("the shifts must be a sequence of values >= 0")
        self.shifts = xp.asarray(shifts)
        shape = (shifts.size, parts)
        C = sparse.diags(xp.asarray(c, dtype=xp.float64)).tocsr()
        L = sparse.csr_matrix(L)
        self.levels = []
        while True:
            level = ShiftedLevel(L, C, shape, xp)
            self.levels.append(level)
            if L.shape[0] <= coarse_size or len(self.levels) == max_levels:
                break
            d = diagonal_of(L)
            rho = self._smoother(level, d)
            aggregates, count = mis2_aggregates(L, threshold)
            if count > 0.9 * L.shape[0]:
                break
            P = smoothed_prolongation(xp, L, d, aggregates, count, rho)
            R = P.T.tocsr()
            coarse = galerkin_product(R, L, P)
            if reached_null_space(coarse, P, d):
                break
            level.P, level.R = BlockMatrix(P, None, xp), BlockMatrix(R, None, xp)
            L, C = coarse, galerkin_product(R, C, P)
        last = self.levels[-1]
        last.steps = last.scaling = None
        L_dense, C_dense = last.L.toarray(), last.C.toarray()
        last.inverse = xp.ascontiguousarray(xp.stack([coarsest_inverse(xp, L_dense + mu * C_dense)
                                                      for mu in shifts.tolist()]))

    def _smoother(self, level, d_L):
        """The level's Chebyshev steps and scaling from ``d_L``, L's diagonal; returns the largest eigenvalue
        of D_L^-1 L (for P's smoothing)."""
        xp = self.xp
        d_C = diagonal_of(level.C)
        top_L = largest_eigenvalue(level.L, d_L, xp)
        top = max(top_L, largest_eigenvalue(level.C, d_C, xp))
        level.steps = chebyshev_steps(CHEBYSHEV_FRACTION * top, CHEBYSHEV_SAFETY * top, self.degree)
        scaling = 1.0 / (d_L[:, None] + d_C[:, None] * self.shifts[None, :])
        level.scaling = xp.ascontiguousarray(xp.broadcast_to(scaling[:, :, None], level.x.shape))
        return top_L

    def product(self, X, Y, level=0, alpha=1.0, beta=0.0, Z=None):
        """Y = alpha (L_l + mu_k C_l) X_k + beta Z_k for each member k on level ``level``: blocks (n, K, parts)."""
        self._kernels.block_product(*self.levels[level].A.arrays(), self.shifts, self.parts, X, Y, Z, alpha, beta)

    def _transfer(self, M, X, Y, beta=0.0):
        """Y = M X + beta Y for a transfer M (BlockMatrix of one matrix)."""
        self._kernels.block_product(*M.arrays(), self.shifts, self.parts, X, Y, None, 1.0, beta)

    def apply(self, B, X):
        """X = one V-cycle from zero on the block B (n, K, parts), X not B: a symmetric operator of each member,
        fit for CG."""
        self._cycle(0, B, X)

    def _cycle(self, k, B, X):
        level = self.levels[k]
        if level.inverse is not None:
            self._kernels.coarse_solve(level.inverse, B, X)
            return
        self._smooth(k, B, X, zero=True)
        self.product(X, level.r, k, alpha=-1.0, beta=1.0, Z=B)  # r = b - A x
        coarse = self.levels[k + 1]
        self._transfer(level.R, level.r, coarse.b)
        self._cycle(k + 1, coarse.b, coarse.x)
        self._transfer(level.P, coarse.x, X, beta=1.0)  # x += P x_c
        self._smooth(k, B, X)

    def _smooth(self, k, B, X, zero=False):
        """Level k's Chebyshev-Jacobi steps on each member's system from X (from zero with ``zero``): the first
        an update of X (the multigrid family's), each later one fused into its product (the shifted family's)."""
        level = self.levels[k]
        r = B if zero else level.r
        if not zero:
            self.product(X, r, k, alpha=-1.0, beta=1.0, Z=B)
        d, d_next = level.d, level.d_next
        for step, (a, c) in enumerate(level.steps):
            if step == 0:  # a = 0: d written, not read; from zero, x too
                if zero:
                    self._vectors.chebyshev_start(X, d, r, level.scaling, c)
                else:
                    self._vectors.chebyshev_step(X, d, r, level.scaling, a, c)
                continue
            z = B if zero and step == 1 else level.r
            self._kernels.chebyshev_step(*level.A.arrays(), self.shifts, self.parts, d, d_next, level.r, z,
                                         level.scaling, X, a, c)
            d, d_next = d_next, d

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
