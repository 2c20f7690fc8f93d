"""The SELL family on the host: NumPy twins of ``sell.cu``, the same arithmetic
on the same SELL arrays.

Each stored entry is multiplied with the x it points at and summed per stored
row in slot order (entry 0, 1, ... of the row), as the CUDA threads do, in
float64 whatever the values' and vectors' types, and stored in the vectors'.
"""

import numpy

from .. import wide


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
    out = alpha * _row_sums(A, wide(A.vals) * x[A.cols])
    rows = slice(None) if A.row_of is None else A.row_of
    if beta != 0.0:
        out += beta * wide(z[rows])
    y[rows] = out


def chebyshev_step(A, d, d_next, r, z, scaling, x, a, c):
    """Twin of sell.cu's sell_chebyshev."""
    rows = slice(None) if A.row_of is None else A.row_of
    residual = numpy.empty(r.size)
    residual[rows] = wide(z[rows]) - _row_sums(A, wide(A.vals) * d[A.cols])
    step = a * wide(d) + c * wide(scaling) * residual
    r[...] = residual
    d_next[...] = step
    x[...] = wide(x) + step


def chebyshev_first(A, b, scaling, d_next, r, x, c0, a, c):
    """Twin of sell.cu's sell_chebyshev_first: d0 = c0 scaling b stored in x,
    then the step from it."""
    x[...] = c0 * wide(scaling) * wide(b)
    chebyshev_step(A, x.copy(), d_next, r, b, scaling, x, a, c)


def diagonal(A, d):
    nrows = A.shape[0]
    stored_row = A.slot_rows()
    real = stored_row < nrows
    row = stored_row[real] if A.row_of is None else A.row_of[stored_row[real]]
    hit = (A.cols[real] == row) & (row < min(A.shape))
    d[:] = numpy.bincount(row[hit], weights=A.vals[real][hit], minlength=nrows)


def forget(A):
    """Nothing is cached about A on the host."""
