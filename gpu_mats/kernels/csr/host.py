"""CSR products on the host: the NumPy twins of ``csr.cu``."""

import numpy


def _row_sums(indptr, indices, data, x, rows):
    """Each row's products with x, summed in float64."""
    entry_rows = numpy.repeat(numpy.arange(rows), numpy.diff(indptr))
    return numpy.bincount(entry_rows, weights=data.astype(numpy.float64) * x[indices], minlength=rows)


def spmv(indptr, indices, data, x, y, z=None, alpha=1.0, beta=0.0):
    """Twin of csr.cu's csr_spmv."""
    z = y if z is None else z
    sums = alpha * _row_sums(indptr, indices, data, x, y.size)
    y[...] = sums + beta * z if beta != 0.0 else sums


def chebyshev_step(indptr, indices, data, d, d_next, r, z, scaling, x, a, c):
    """Twin of csr.cu's csr_chebyshev."""
    r[...] = z - _row_sums(indptr, indices, data, d, r.size)
    d_next[...] = a * d + c * scaling * r
    x += d_next


def coarse_correction(indptr, indices, p_data, ap_data, xc, x, r, d, scaling, c):
    """Twin of csr.cu's csr_coarse_correction."""
    x += _row_sums(indptr, indices, p_data, xc, x.size)
    r -= _row_sums(indptr, indices, ap_data, xc, x.size)
    d[...] = c * scaling * r
    x += d
