"""NumPy twins of ``sell.cu``: the same arithmetic on the same SELL arrays.

Each stored entry is multiplied with the x it points at and summed per stored
row in slot order (entry 0, 1, ... of the row), as the CUDA threads do.
"""

import numpy


def _row_sums(A, products):
    nrows = A.shape[0]
    padded_rows = A.nslices * A.slice_height
    return numpy.bincount(A.slot_rows(), weights=products, minlength=padded_rows)[:nrows]


def spmv(A, x, y, z, alpha, beta):
    """Y = alpha A X + beta Z; 1-D vectors, or 2-D (k, n) blocks of k vectors."""
    if x.ndim == 2:
        for j in range(x.shape[0]):
            spmv(A, x[j], y[j], z[j], alpha, beta)
        return
    out = alpha * _row_sums(A, A.vals * x[A.cols])
    rows = slice(None) if A.row_of is None else A.row_of
    if beta != 0.0:
        out += beta * z[rows]
    y[rows] = out


def diagonal(A, d):
    nrows = A.shape[0]
    stored_row = A.slot_rows()
    real = stored_row < nrows
    row = stored_row[real] if A.row_of is None else A.row_of[stored_row[real]]
    hit = (A.cols[real] == row) & (row < min(A.shape))
    d[:] = numpy.bincount(row[hit], weights=A.vals[real][hit], minlength=nrows)


def local_cholesky_solve(pattern_ptr, pattern_cols, b_ptr, b_cols, b_vals, rhs):
    """Twin of local_solves.cu: per task, Cholesky-solve B[P, P] x = rhs on P.

    Vectorised across tasks; a chunk of tasks is padded to its longest pattern
    with identity rows. Returns (x aligned with pattern_cols, info per task).
    """
    ntasks = pattern_ptr.size - 1
    lengths = numpy.diff(pattern_ptr)
    x = numpy.zeros(pattern_cols.size)
    info = numpy.zeros(ntasks, dtype=numpy.int32)
    b_rows = numpy.repeat(numpy.arange(b_ptr.size - 1, dtype=numpy.int64), numpy.diff(b_ptr))
    width = max(int(b_cols.max()) + 1 if b_cols.size else 1, b_ptr.size - 1)
    b_keys = b_rows * width + b_cols  # ascending: CSR with sorted columns
    m_all = int(lengths.max()) if ntasks else 0
    chunk = max(1, 2**21 // max(m_all * m_all, 1))
    for first in range(0, ntasks, chunk):
        tasks = slice(first, min(first + chunk, ntasks))
        n, m = lengths[tasks], int(lengths[tasks].max())
        if m == 0:
            continue
        valid = numpy.arange(m) < n[:, None]
        where = numpy.where(valid, pattern_ptr[tasks][:, None] + numpy.arange(m), 0)
        idx = numpy.where(valid, pattern_cols[where], 0).astype(numpy.int64)
        keys = idx[:, :, None] * width + idx[:, None, :]
        at = numpy.minimum(numpy.searchsorted(b_keys, keys), b_keys.size - 1)
        found = (b_keys[at] == keys) & valid[:, :, None] & valid[:, None, :]
        S = numpy.where(found, b_vals[at], 0.0)
        S[:, numpy.arange(m), numpy.arange(m)] += ~valid  # identity padding
        L = numpy.zeros_like(S)
        bad = numpy.zeros(len(n), dtype=numpy.int32)
        for j in range(m):
            d = S[:, j, j] - numpy.einsum("tk,tk->t", L[:, j, :j], L[:, j, :j])
            failed = ~(d > 0) & (bad == 0)
            bad[failed] = j + 1
            d = numpy.sqrt(numpy.where(bad == 0, d, 1.0))
            L[:, j, j] = d
            L[:, j + 1:, j] = (S[:, j + 1:, j] - numpy.einsum("tik,tk->ti", L[:, j + 1:, :j], L[:, j, :j])) / d[:, None]
        y = numpy.where(valid, rhs[where], 0.0)
        for i in range(m):
            y[:, i] = (y[:, i] - numpy.einsum("tk,tk->t", L[:, i, :i], y[:, :i])) / L[:, i, i]
        for i in range(m - 1, -1, -1):
            y[:, i] = (y[:, i] - numpy.einsum("tk,tk->t", L[:, i + 1:, i], y[:, i + 1:])) / L[:, i, i]
        ok = valid & (bad == 0)[:, None]
        x[where[ok]] = y[ok]
        info[tasks] = bad
    return x, info


def three_term(w, a, x, b, y, c, z, d=None, scaled=None):
    """Twin of blas1.cu: w = a x + b y + c z, skipping terms with a zero
    coefficient, and scaled = d w when d is given."""
    v = a * x
    if b != 0.0:
        v += b * y
    if c != 0.0:
        v += c * z
    w[...] = v
    if d is not None:
        numpy.multiply(d, v, out=scaled)


def explicit_update(out, u, s, r, w):
    """Twin of blas1.cu: out = u + w (s - r), w one weight per column of the (dim, n) blocks."""
    numpy.add(u, w * (s - r), out=out)


TS_CHUNK = 1024  # columns per partial product of ts_gram


def ts_gram(X, Y, chunk=TS_CHUNK):
    """X Y^T for tall-skinny blocks (rows of length n): partial products over
    chunks of columns, then a pairwise sum (far more accurate than one long
    dot product; the batched GEMM of seed 004, section 1.7)."""
    n = X.shape[1]
    m = n // chunk * chunk
    P = numpy.matmul(X[:, :m].reshape(len(X), -1, chunk).transpose(1, 0, 2),
                     Y[:, :m].reshape(len(Y), -1, chunk).transpose(1, 2, 0))
    total = numpy.ascontiguousarray(P.transpose(1, 2, 0)).sum(axis=-1) if m else numpy.zeros((len(X), len(Y)))
    return total + X[:, m:] @ Y[:, m:].T


def gemm_accumulate(C, alpha, A, B):
    """Twin of the cuBLAS call: C += alpha A B."""
    C += alpha * (A @ B)
