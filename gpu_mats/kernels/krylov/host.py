"""The Krylov building blocks on the host: NumPy twins of ``krylov.cu`` and
of the cuBLAS products."""

import numpy

from .. import wide


def three_term(w, a, x, b, y, c, z, d=None, scaled=None):
    """Twin of krylov.cu: w = a x + b y + c z, skipping terms with a zero
    coefficient, and scaled = d w when d is given."""
    v = a * x
    if b != 0.0:
        v += b * y
    if c != 0.0:
        v += c * z
    w[...] = v
    if d is not None:
        numpy.multiply(d, v, out=scaled)


def chebyshev_start(x, d, r, inv_diag, b):
    """Twin of krylov.cu: d = b inv_diag r, then x = d (computed in float64, stored in the vectors' type)."""
    d[...] = b * wide(inv_diag) * wide(r)
    x[...] = d


def chebyshev_step(x, d, r, inv_diag, a, b):
    """Twin of krylov.cu: d = a d + b inv_diag r (d not read when a is 0), then x += d."""
    v = b * wide(inv_diag) * wide(r)
    if a != 0.0:
        v += a * wide(d)
    d[...] = v
    x[...] = wide(x) + v


def dot_pairs(out, xs, ys):
    """Twin of krylov.cu: out[k] = xs[k] . ys[k]."""
    for k, (x, y) in enumerate(zip(xs, ys)):
        out[k] = x @ y


def kcycle_residual(rt, s, b, v1):
    """Twin of krylov.cu: rt = b - (s[1] / s[0]) v1, no step where s[0] <= 0."""
    a1 = s[1] / s[0] if s[0] > 0.0 else 0.0
    numpy.subtract(b, a1 * v1, out=rt)


def kcycle_combine(x, s, c1, c2):
    """Twin of krylov.cu: the K-cycle's correction from s = (rho1, alpha1, gamma, beta, alpha2)."""
    rho1, alpha1, gamma, beta, alpha2 = s
    a1 = alpha1 / rho1 if rho1 > 0.0 else 0.0
    g = gamma / rho1 if rho1 > 0.0 else 0.0
    rho2 = beta - g * gamma
    a2 = alpha2 / rho2 if rho2 > 0.0 else 0.0
    numpy.add((a1 - a2 * g) * c1, a2 * c2, out=x)


TS_CHUNK = 1024  # columns per partial product of ts_gram


def ts_gram(X, Y, chunk=TS_CHUNK):
    """X Y^T for tall-skinny blocks (rows of length n): partial products over
    chunks of columns, then a pairwise sum (far more accurate than one long
    dot product; the batched GEMM of Ali et al. 2019, section IV.C)."""
    n = X.shape[1]
    m = n // chunk * chunk
    P = numpy.matmul(X[:, :m].reshape(len(X), -1, chunk).transpose(1, 0, 2),
                     Y[:, :m].reshape(len(Y), -1, chunk).transpose(1, 2, 0))
    total = numpy.ascontiguousarray(P.transpose(1, 2, 0)).sum(axis=-1) if m else numpy.zeros((len(X), len(Y)))
    return total + X[:, m:] @ Y[:, m:].T


def matvec(y, A, x):
    """Twin of krylov.cu's dense_matvec: y = A x."""
    y[...] = A @ wide(x)


def gemm_accumulate(C, alpha, A, B):
    """Twin of the cuBLAS call: C += alpha A B."""
    C += alpha * (A @ B)
