"""Building blocks of s-step (communication-avoiding) preconditioned CG:
P-CBCG of seed 004 (Algorithm 2, with line 14 corrected to a minus sign).

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

from .ops import kernels_for

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
        self.kind = kind  # "nonfinite", "indefinite" or "dependent"
        super().__init__(message)


def _cholesky(G):
    """The lower Cholesky factor of the s x s Gram matrix Q^T A Q; a failure says why."""
    if not numpy.isfinite(G).all():
        raise GramBreakdown("nonfinite", "the Gram matrix Q^T A Q has Inf or NaN entries")
    diagonal = numpy.diag(G)
    if (diagonal <= 0).any():
        raise GramBreakdown("indefinite", f"q^T A q = {diagonal.min():g} <= 0 for a basis vector q: "
                                          "the operator is not positive definite")
    try:
        return numpy.linalg.cholesky(G)
    except numpy.linalg.LinAlgError:
        raise GramBreakdown("dependent", "Q^T A Q is not positive definite although its diagonal is: the basis "
                                         "vectors lost their independence (use a smaller s or the chebyshev "
                                         "basis)") from None


def spd_solve(G, rhs):
    """G^-1 rhs by Cholesky, for the s x s Gram matrix Q^T A Q."""
    if not numpy.isfinite(rhs).all():
        raise GramBreakdown("nonfinite", "the right-hand side of a Gram system has Inf or NaN entries")
    return scipy.linalg.cho_solve((_cholesky(G), True), rhs)


class SStepBlocks:
    """The blocks of P-CBCG and the work between its two global reductions.

    Two buffers of shape (2s + 1, n) hold [Q; AQ; r] (the current block) and
    [S; AS; -] (the next basis), so that reduction 1 is one tall-skinny product
    of the current buffer with its last s + 1 rows. They swap after each
    conjugation.
    """

    def __init__(self, xp, s, n):
        self.xp, self.s = xp, s
        self._buffers = [xp.zeros((2 * s + 1, n)) for _ in range(2)]
        self._upper = numpy.triu_indices(s)

    @property
    def rows(self):
        """Every row of both buffers (to be wrapped as vectors)."""
        return [row for buffer in self._buffers for row in buffer]

    Q = property(lambda self: self._buffers[0][: self.s])
    AQ = property(lambda self: self._buffers[0][self.s:2 * self.s])
    r = property(lambda self: self._buffers[0][2 * self.s])
    S = property(lambda self: self._buffers[1][: self.s])
    AS = property(lambda self: self._buffers[1][self.s:2 * self.s])

    def adopt_basis(self):
        """Q_0 = S_0, AQ_0 = AS_0 (the first block needs no conjugation)."""
        self._buffers[1][2 * self.s] = self.r
        self._buffers.reverse()

    def gram(self):
        """Local part of reduction 1: Q^T AQ, Q^T r, AQ^T AQ, AQ^T r (upper triangles) and r^T r."""
        s, W = self.s, self._buffers[0]
        P = _to_host(self.xp, kernels_for(self.xp).ts_gram(W, W[s:]))  # (2s+1) x (s+1)
        return numpy.concatenate((P[:s, :s][self._upper], P[:s, s], P[s:2 * s, :s][self._upper], P[s:2 * s, s],
                                  P[2 * s, s:]))

    def unpack_gram(self, buffer):
        s, m = self.s, len(self._upper[0])
        G, H = _symmetric(buffer[:m], self._upper), _symmetric(buffer[m + s:2 * m + s], self._upper)
        return G, buffer[m:m + s], H, buffer[2 * m + s:2 * m + 2 * s], buffer[2 * m + 2 * s]

    def cross(self):
        """Local part of reduction 2: Q^T A S (general s x s) and r^T M^-1 r = r^T S[0]."""
        xp = self.xp
        C = kernels_for(xp).ts_gram(self.Q, self.AS)
        return _to_host(xp, xp.concatenate((C.ravel(), (self.r @ self.S[0])[None])))

    def residual(self):
        """Local part of r^T r alone (to confirm a converged residual)."""
        return _to_host(self.xp, (self.r @ self.r)[None])

    def unpack_cross(self, buffer):
        s = self.s
        return buffer[: s * s].reshape(s, s), buffer[s * s]

    def step(self, a, x):
        """x += Q[:j] a, r -= AQ[:j] a for the j = len(a) leading block vectors (in place)."""
        gemm = kernels_for(self.xp).gemm_accumulate
        a, j = self.xp.asarray(a)[None, :], len(a)
        gemm(x[None, :], 1.0, a, self.Q[:j])
        gemm(self.r[None, :], -1.0, a, self.AQ[:j])

    def conjugate(self, B):
        """Q_{k+1} = S_{k+1} - Q_k B, AQ_{k+1} = AS_{k+1} - AQ_k B (row-major: minus B^T Q), in place."""
        gemm = kernels_for(self.xp).gemm_accumulate
        BT = self.xp.asarray(numpy.ascontiguousarray(B.T))
        gemm(self.S, -1.0, BT, self.Q)
        gemm(self.AS, -1.0, BT, self.AQ)
        self.adopt_basis()

    def recurrence(self, w, a, z, b, z_prev, c, out):
        """out = a w + b z + c z_prev, one pass (the basis recurrence)."""
        kernels_for(self.xp).three_term(out, a, w, b, z, c, z if z_prev is None else z_prev)


def leading_solutions(G, g, H, h, rr):
    """The CG-equivalent iterates inside a block: for j = 1 .. s, the coefficients
    a_j of x + Q[:j] a_j (the Galerkin solution on the j leading block vectors)
    and its residual norm ||r - AQ[:j]^T a_j||, from r^T r - 2 a_j^T h + a_j^T H a_j.
    In exact arithmetic these are the CG iterates and residual norms sk+1 .. sk+s.

    With G = L L^T, a_j solves L[:j,:j]^T a = y[:j] for y = L^-1 g; padded with
    zeros it solves L^T a = (y[:j], 0), as L^T is upper triangular: one
    triangular solve gives every a_j as a column.
    """
    if not numpy.isfinite(g).all():
        raise GramBreakdown("nonfinite", "Q^T r has Inf or NaN entries")
    L = _cholesky(G)
    y = scipy.linalg.solve_triangular(L, g, lower=True)
    A = scipy.linalg.solve_triangular(L.T, numpy.triu(numpy.tile(y[:, None], len(g))), lower=False)
    norms = numpy.sqrt(numpy.maximum(rr - 2 * h @ A + numpy.einsum("ij,ik,kj->j", A, H, A), 0.0))
    return [(A[:j, j - 1], float(norms[j - 1])) for j in range(1, len(g) + 1)]


def _symmetric(upper_values, upper):
    s = upper[0].max() + 1
    M = numpy.zeros((s, s))
    M[upper] = upper_values
    return M + numpy.triu(M, 1).T


def _to_host(xp, array):
    return array if xp is numpy else xp.asnumpy(array)
