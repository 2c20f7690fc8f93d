"""CSR SpMV on the host: the NumPy twin of ``csr.cu``."""

import numpy


def spmv(indptr, indices, data, x, y):
    """Twin of csr.cu: y = A x, each row's products summed in float64."""
    rows = numpy.repeat(numpy.arange(y.size), numpy.diff(indptr))
    y[...] = numpy.bincount(rows, weights=data.astype(numpy.float64) * x[indices], minlength=y.size)
