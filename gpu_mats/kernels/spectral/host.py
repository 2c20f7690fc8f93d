"""The spectral family on the host: numpy.fft and the Thomas algorithm's
sweeps vectorized over the columns (the twin of ``spectral.cu``)."""

import math

import numpy


def real_transform(x, axes, out):
    """Twin of cuda.real_transform."""
    out[...] = numpy.fft.rfftn(x, axes=axes)


def inverse_real_transform(spectrum, axes, out):
    """Twin of cuda.inverse_real_transform (unnormalized)."""
    sizes = [out.shape[a] for a in axes]
    out[...] = numpy.fft.irfftn(spectrum, s=sizes, axes=axes)
    out *= math.prod(sizes)


def tridiagonal_sweeps(couplings, inverse_pivots, scale, rows):
    """Twin of spectral.cu's tridiagonal_sweeps."""
    m = rows.shape[1]
    rows *= scale
    for j in range(1, m):
        rows[:, j] += couplings[j - 1] * rows[:, j - 1] * inverse_pivots[:, j - 1]
    rows[:, m - 1] *= inverse_pivots[:, m - 1]
    for j in range(m - 2, -1, -1):
        rows[:, j] = (rows[:, j] + couplings[j] * rows[:, j + 1]) * inverse_pivots[:, j]
    rows[0, :, 0] -= rows[0, :, 0].mean()
