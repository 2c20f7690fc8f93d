"""Vector and block products on the host: NumPy twins of ``blas.cu`` and of
the cuBLAS products."""

import numpy

from .layout import check_fill, copy_words

TS_CHUNK = 1024  # columns per partial product of ts_gram


def three_term(w, a, x, b, y, c, z, d=None, scaled=None):
    """Twin of blas.cu: w = a x + b y + c z, skipping terms with a zero
    coefficient, and scaled = d w when d is given."""
    v = a * x
    if b != 0.0:
        v += b * y
    if c != 0.0:
        v += c * z
    w[...] = v
    if d is not None:
        numpy.multiply(d, v, out=scaled)


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


def gemm_accumulate(C, alpha, A, B):
    """Twin of the cuBLAS call: C += alpha A B."""
    C += alpha * (A @ B)


def reduction_slots(n):
    """NumPy needs no scratch: one slot."""
    return 1


def max_abs(out, x, y=None, partials=None):
    """Twin of blas.cu's max |x - y|: 0 for no entries, NaN where one is NaN."""
    v = numpy.abs(x if y is None else x - y)
    out[0] = v.max() if v.size else 0.0


def copy(w, x):
    """Twin of blas.cu's copy_words: w = x."""
    copy_words(w, x)
    w.reshape(-1)[...] = x.reshape(-1)


def fill(w, value):
    """Twin of blas.cu's fill."""
    check_fill(w)
    w.fill(value)
