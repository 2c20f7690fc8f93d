"""The multigrid cycle's vector kernels on the host: NumPy twins of ``multigrid.cu``."""

import numpy

from .. import wide


def chebyshev_start(x, d, r, inv_diag, b):
    """Twin of multigrid.cu: d = b inv_diag r, then x = d (computed in float64, stored in the vectors' type)."""
    d[...] = b * wide(inv_diag) * wide(r)
    x[...] = d


def chebyshev_step(x, d, r, inv_diag, a, b):
    """Twin of multigrid.cu: d = a d + b inv_diag r (d not read when a is 0), then x += d."""
    v = b * wide(inv_diag) * wide(r)
    if a != 0.0:
        v += a * wide(d)
    d[...] = v
    x[...] = wide(x) + v


def dot_pairs(out, xs, ys):
    """Twin of multigrid.cu: out[k] = xs[k] . ys[k]."""
    for k, (x, y) in enumerate(zip(xs, ys)):
        out[k] = x @ y


def kcycle_residual(rt, s, b, v1):
    """Twin of multigrid.cu: rt = b - (s[1] / s[0]) v1, no step where s[0] <= 0."""
    a1 = s[1] / s[0] if s[0] > 0.0 else 0.0
    numpy.subtract(b, a1 * v1, out=rt)


def kcycle_combine(x, s, c1, c2):
    """Twin of multigrid.cu: the K-cycle's correction from s = (rho1, alpha1, gamma, beta, alpha2)."""
    rho1, alpha1, gamma, beta, alpha2 = s
    a1 = alpha1 / rho1 if rho1 > 0.0 else 0.0
    g = gamma / rho1 if rho1 > 0.0 else 0.0
    rho2 = beta - g * gamma
    a2 = alpha2 / rho2 if rho2 > 0.0 else 0.0
    numpy.add((a1 - a2 * g) * c1, a2 * c2, out=x)


def matvec(y, A, x):
    """Twin of multigrid.cu's dense_matvec: y = A x."""
    y[...] = A @ wide(x)
