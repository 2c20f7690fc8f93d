"""CSR products on the host: the NumPy twins of ``csr.cu``, computing in
float64 and storing in the vectors' type, as the kernels do."""

import numpy

from .. import wide


def _row_sums(indptr, indices, data, x, rows):
    """Each row's products with x, summed in float64."""
    entry_rows = numpy.repeat(numpy.arange(rows), numpy.diff(indptr))
    return numpy.bincount(entry_rows, weights=wide(data) * x[indices], minlength=rows)


def spmv(indptr, indices, data, x, y, z=None, alpha=1.0, beta=0.0):
    """Twin of csr.cu's csr_spmv."""
    z = y if z is None else z
    sums = alpha * _row_sums(indptr, indices, data, x, y.size)
    y[...] = sums + beta * wide(z) if beta != 0.0 else sums


def chebyshev_step(indptr, indices, data, d, d_next, r, z, scaling, x, a, c):
    """Twin of csr.cu's csr_chebyshev."""
    residual = wide(z) - _row_sums(indptr, indices, data, d, r.size)
    step = a * wide(d) + c * wide(scaling) * residual
    r[...] = residual
    d_next[...] = step
    x[...] = wide(x) + step


def chebyshev_first(indptr, indices, data, b, scaling, d_next, r, x, c0, a, c):
    """Twin of csr.cu's csr_chebyshev_first: d0 = c0 scaling b stored in x, then the step from it."""
    x[...] = c0 * wide(scaling) * wide(b)
    chebyshev_step(indptr, indices, data, x.copy(), d_next, r, b, scaling, x, a, c)


def restrict_residual(indptr, indices, r_data, ra_data, b, y, bc):
    """Twin of csr.cu's csr_restrict_residual."""
    bc[...] = _row_sums(indptr, indices, r_data, b, bc.size) - _row_sums(indptr, indices, ra_data, y, bc.size)


def residual_correction(indptr, indices, p_data, ap_data, a_indptr, a_indices, a_data, xc, b, y, x, r, d, scaling, c):
    """Twin of csr.cu's csr_residual_correction."""
    rows = x.size
    residual = wide(b) - _row_sums(a_indptr, a_indices, a_data, y, rows) - _row_sums(indptr, indices, ap_data, xc,
                                                                                     rows)
    step = c * wide(scaling) * residual
    r[...] = residual
    d[...] = step
    x[...] = wide(y) + _row_sums(indptr, indices, p_data, xc, rows) + step
