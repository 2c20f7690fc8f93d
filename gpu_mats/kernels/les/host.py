"""Subgrid-scale eddy viscosities on the host: the NumPy twin of ``les.cu``
(the same formulas on (n, 3, 3) stacks; Sigma's two largest singular
values by numpy.linalg.svd instead of the kernel's closed form)."""

import math

import numpy


def _tensors(gradient):
    """(n, 3, 3) with [c, i, j] = du_i/dx_j of cell c, zero where a 2D flow has no entry."""
    dim = math.isqrt(gradient.shape[0])
    g = numpy.zeros((gradient.shape[1], 3, 3))
    g[:, :dim, :dim] = numpy.moveaxis(numpy.asarray(gradient, dtype=numpy.float64).reshape(dim, dim, -1), -1, 0)
    return g


def _symmetric(a):
    return 0.5 * (a + numpy.swapaxes(a, 1, 2))


def _wale(g):
    g2 = g @ g
    sd = _symmetric(g2) - numpy.eye(3) * numpy.trace(g2, axis1=1, axis2=2)[:, None, None] / 3.0
    sd2 = (sd * sd).sum(axis=(1, 2))
    ss = (_symmetric(g) ** 2).sum(axis=(1, 2))
    denominator = ss**2.5 + sd2**1.25
    return numpy.divide(sd2**1.5, denominator, out=numpy.zeros_like(sd2), where=denominator > 0.0)


def _sigma(g):
    s1, s2, _ = numpy.linalg.svd(g, compute_uv=False).T  # descending
    s3 = numpy.divide(abs(numpy.linalg.det(g)), s1 * s2, out=numpy.zeros_like(s1), where=s2 > 0.0)  # as les.cu
    d = numpy.divide(s3 * (s1 - s2) * (s2 - s3), s1 * s1, out=numpy.zeros_like(s1), where=s2 > 0.0)
    return numpy.maximum(d, 0.0)


def eddy_viscosity(model, gradient, width, constant, out):
    """Twin of les.cu's eddy_viscosity."""
    g = _tensors(gradient)
    if model == "smagorinsky":
        d = numpy.sqrt(2.0 * (_symmetric(g) ** 2).sum(axis=(1, 2)))
    elif model == "wale":
        d = _wale(g)
    else:
        d = _sigma(g)
    out[...] = (constant * numpy.asarray(width, dtype=numpy.float64)) ** 2 * d
