"""Building blocks of s-step (communication-avoiding) preconditioned CG:
P-CBCG of Ali et al. 2019 (Algorithm 2, with line 14 corrected to a minus sign).

Each outer iteration works on blocks of s vectors stored as (s, n) arrays,
one basis vector per row: S = (z~_0 .. z~_{s-1}) with z~_j = M^-1 z_j and
z_{j+1} = a_j A z~_j + b_j z_j + c_j z_{j-1} (a monomial, Newton or Chebyshev
recurrence for the operator A M^-1), AS = A S, and their A-conjugated
versions Q and AQ. The s x s Gram products are GEMMs (cuBLAS on the GPU) whose
local parts are packed into one buffer per global reduction; the small systems
are solved on the host, redundantly on every rank.
"""

import numpy
import scipy.linalg

from .backend import to_host
from .kernels import family

BASES = ("monomial", "newton", "chebyshev")


def chebyshev_points(low, high, count):
    k = numpy.arange(count)
    return (high + low) / 2 + (high - low) / 2 * numpy.cos((2 * k + 1) * numpy.pi / (2 * count))


def leja_order(points):
    """Points reordered so that each maximises the product of distances to those before it."""
    points = list(points)
    order = [max(points, key=abs)]
    points.remove(order[0])
    while points:
        best = max(points, key=lambda p: numpy.prod([abs(p - q) for q in order]))
        order.append(best)
        points.remove(best)
    return order


def basis_recurrence(kind, s, low, high):
    """Coefficients (a_j, b_j, c_j), j = 0 .. s-2, of z_{j+1} = a_j w_j + b_j z_j + c_j z_{j-1},
    w_j = A M^-1 z_j, for a spectrum of A M^-1 in [low, high]."""
    if kind not in BASES:
        raise ValueError(f"unknown basis '{kind}': valid values are {', '.join(BASES)}")
    if kind == "monomial" or s == 1:
        return [(1.0, 0.0, 0.0)] * (s - 1)
    width = high - low
    if not width > 0:
        raise ValueError(f"the {kind} basis needs an interval with low < high, got [{low:g}, {high:g}]")
    if kind == "newton":
        scale = width / 4  # the logarithmic capacity of the interval keeps the products of order one
        return [(1.0 / scale, -shift / scale, 0.0) for shift in leja_order(chebyshev_points(low, high, s - 1))]
    eta, zeta = 2.0 / width, (high + low) / width  # maps [low, high] onto [-1, 1]
    return [(eta, -zeta, 0.0)] + [(2 * eta, -2 * zeta, -1.0)] * (s - 2)


class GramBreakdown(ArithmeticError):
    """The s x s Gram matrix cannot be solved: ``kind`` says why."""

    def __init__(self, kind, message):
        self.kind = kind  # "nonfinite" or "indefinite"
        super().__init__(message)


def _check_gram(G):
    """A Gram matrix Q^T A Q that cannot be factored: Inf or NaN, or a basis vector with q^T A q <= 0."""
    if not numpy.isfinite(G).all():
        raise GramBreakdown("nonfinite", "the Gram matrix Q^T A Q has Inf or NaN entries")
    diagonal = numpy.diag(G)
    if (diagonal <= 0).any():
        raise GramBreakdown("indefinite", f"q^T A q = {diagonal.min():g} <= 0 for a basis vector q: "
                                          "the operator is not positive definite")


# A Cholesky pivot of the Gram matrix below this fraction of its diagonal
# entry: the basis vector adds nothing to the ones before it that survives
# the solve's rounding (at 1e-13 the kept directions' errors cost a heat
# equation's solves up to half again CG's iterations).
DEPENDENT_PIVOT = 1e-10


def _leading_factor(G):
    """The lower Cholesky factor of the largest leading block of the Gram
    matrix Q^T A Q whose basis vectors are independent (k x k, k >= 1): where
    the Krylov space is exhausted inside a block the next pivots vanish, and
    the solution on the leading k vectors is the exact one (a lucky
    breakdown, not a failure)."""
    _check_gram(G)
    L = numpy.zeros_like(G)
    for j in range(len(G)):
        pivot = G[j, j] - L[j, :j] @ L[j, :j]
        if not pivot > DEPENDENT_PIVOT * G[j, j]:
            return L[:j, :j]
        L[j, j] = numpy.sqrt(pivot)
        L[j + 1:, j] = (G[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L


def leading_solve(G, rhs, k):
    """G[:k, :k]^-1 rhs[:k] by the factor leading_solutions used (the k leading
    independent vectors): a fresh Cholesky of the same block may fail on the
    rounding of a pivot that passed there."""
    if not numpy.isfinite(rhs).all():
        raise GramBreakdown("nonfinite", "the right-hand side of a Gram system has Inf or NaN entries")
    L = _leading_factor(G)[:k, :k]
    return scipy.linalg.cho_solve((L, True), rhs[:k])


def distinct_rows(xp, rows, n):
    """A zero (rows, n) block whose rows have distinct addresses even where n = 0
    (a rank that owns no rows): callers tell vectors apart by address."""
    return xp.zeros((rows, max(n, 1)))[:, :n]


class SStepBlocks:
    """The blocks of P-CBCG and the work between its two global reductions.

    Two buffers of shape (2s + 2, n) hold [AQ; Q; r; x] (the current block,
    the residual and the iterate) and [AS; S; -; -] (the next basis), so that
    every product is one GEMM on contiguous rows: reduction 1 is the Gram
    matrix of [AQ; Q; r], reduction 2 the product of [Q; r] with [AS; S_0],
    the iterate update one GEMM into [r; x], the conjugation one into [AS; S].
    The buffers swap after each conjugation. ``ring`` holds the last two
    unpreconditioned basis vectors z_j of the recurrence.
    """

    def __init__(self, xp, s, n):
        self.xp, self.s = xp, s
        self._buffers = [distinct_rows(xp, 2 * s + 2, n) for _ in range(2)]
        self.ring = distinct_rows(xp, 2, n)

    @property
    def rows(self):
        """Every vector the blocks hold (to be wrapped as PETSc vectors)."""
        return [*self._buffers[0], *self._buffers[1], *self.ring]

    @property
    def arrangement(self):
        """Which buffer holds the current block (the two alternate)."""
        return id(self._buffers[0])

    AQ = property(lambda self: self._buffers[0][: self.s])
    Q = property(lambda self: self._buffers[0][self.s:2 * self.s])
    r = property(lambda self: self._buffers[0][2 * self.s])
    x = property(lambda self: self._buffers[0][2 * self.s + 1])
    AS = property(lambda self: self._buffers[1][: self.s])
    S = property(lambda self: self._buffers[1][self.s:2 * self.s])

    def build_basis(self, multiply, precondition, coefficients):
        """S = (M^-1 z_0 .. M^-1 z_{s-1}) and AS = A S from z_0 = r by the basis
        recurrence. ``multiply(x, y)`` sets y = A x; ``precondition`` applies
        M^-1 (``apply(x, y)``), or is diagonal (``diagonal`` not None), which
        the recurrence kernel then applies in the same pass."""
        kernels, S, AS, d = family("blas", self.xp), self.S, self.AS, precondition.diagonal
        z, z_prev = self.r, None
        precondition.apply(z, S[0])
        for j in range(self.s):
            multiply(S[j], AS[j])
            if j == self.s - 1:
                break
            a, b, c = coefficients[j]
            out = self.ring[j % 2]
            kernels.three_term(out, a, AS[j], b, z, c, z if z_prev is None else z_prev, d, S[j + 1])
            if d is None:
                precondition.apply(out, S[j + 1])
            z, z_prev = out, z

    def adopt_basis(self):
        """Q = S, AQ = AS (the first block needs no conjugation): r and x move along."""
        self._buffers[1][2 * self.s:] = self._buffers[0][2 * self.s:]
        self._buffers.reverse()

    def gram(self):
        """Local part of reduction 1: the Gram matrix of [AQ; Q; r], (2s + 1)^2 values."""
        W = self._buffers[0][: 2 * self.s + 1]
        return to_host(self.xp, family("blas", self.xp).ts_gram(W, W)).ravel()

    def unpack_gram(self, buffer):
        """G = Q^T A Q, g = Q^T r, H = (AQ)^T AQ, h = (AQ)^T r, r^T r."""
        s = self.s
        P = buffer.reshape(2 * s + 1, 2 * s + 1)
        G = numpy.triu(P[s:2 * s, :s])  # q_i^T (A q_j) for i <= j, as P-CBCG forms it
        return G + numpy.triu(G, 1).T, P[s:2 * s, 2 * s], P[:s, :s], P[:s, 2 * s], P[2 * s, 2 * s]

    def cross(self):
        """Local part of reduction 2: [Q; r] [AS; S_0]^T, holding Q^T A S and r^T M^-1 r."""
        s, xp = self.s, self.xp
        return to_host(xp, family("blas", xp).ts_gram(self._buffers[0][s:2 * s + 1], self._buffers[1][:s + 1])).ravel()

    def unpack_cross(self, buffer):
        s = self.s
        C = buffer.reshape(s + 1, s + 1)
        return C[:s, :s], C[s, s]

    def residual(self):
        """Local part of r^T r alone (to confirm a converged residual)."""
        return to_host(self.xp, (self.r @ self.r)[None])

    def step(self, a):
        """x += Q[:j] a, r -= AQ[:j] a for the j = len(a) leading block vectors: one GEMM into [r; x]."""
        s, j = self.s, len(a)
        coefficients = numpy.zeros((2, 2 * s))
        coefficients[0, :j], coefficients[1, s:s + j] = -a, a
        W = self._buffers[0]
        family("blas", self.xp).gemm_accumulate(W[2 * s:], 1.0, self.xp.asarray(coefficients), W[:2 * s])

    def conjugate(self, B):
        """AQ' = AS - AQ B, Q' = S - Q B (row-major: minus B^T times the rows), one GEMM; then swap."""
        s = self.s
        coefficients = numpy.zeros((2 * s, 2 * s))
        coefficients[:s, :s] = coefficients[s:, s:] = B.T
        family("blas", self.xp).gemm_accumulate(self._buffers[1][:2 * s], -1.0, self.xp.asarray(coefficients),
                                             self._buffers[0][:2 * s])
        self.adopt_basis()


def leading_solutions(G, g, H, h, rr):
    """The CG-equivalent iterates inside a block: for j = 1 .. k, the coefficients
    a_j of x + Q[:j] a_j (the Galerkin solution on the j leading block vectors)
    and its residual norm ||r - AQ[:j]^T a_j||, from r^T r - 2 a_j^T h + a_j^T H a_j.
    In exact arithmetic these are the CG iterates and residual norms sk+1 .. sk+k.
    k is s, or fewer where the basis vectors after the k-th add nothing new
    (the Krylov space is exhausted: the k-th solution is exact).

    With G = L L^T, a_j solves L[:j,:j]^T a = y[:j] for y = L^-1 g; padded with
    zeros it solves L^T a = (y[:j], 0), as L^T is upper triangular: one
    triangular solve gives every a_j as a column.
    """
    if not numpy.isfinite(g).all():
        raise GramBreakdown("nonfinite", "Q^T r has Inf or NaN entries")
    L = _leading_factor(G)
    k = len(L)
    y = scipy.linalg.solve_triangular(L, g[:k], lower=True)
    A = scipy.linalg.solve_triangular(L.T, numpy.triu(numpy.tile(y[:, None], k)), lower=False)
    norms = numpy.sqrt(numpy.maximum(rr - 2 * h[:k] @ A + numpy.einsum("ij,ik,kj->j", A, H[:k, :k], A), 0.0))
    return [(A[:j, j - 1], float(norms[j - 1])) for j in range(1, k + 1)]
