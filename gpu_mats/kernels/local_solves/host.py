"""The local dense solves on the host: the NumPy twin of ``local_solves.cu``."""

import numpy


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
