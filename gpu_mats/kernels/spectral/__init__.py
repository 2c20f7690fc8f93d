"""Fast Poisson solves on boxes (gpu_mats.spectral): real Fourier
transforms along a box's periodic axes written into arrays the caller holds
(cuFFT plans on the GPU, so that a CUDA graph can replay them), and the
tridiagonal solves along a graded axis, one per wavenumber."""


def real_transform(x, axes, out):
    """out = the real FFT of ``x`` along ``axes`` (numpy.fft.rfftn's; the
    last of ``axes`` halved in ``out``). x and out C-contiguous, float64 and
    complex128; the axes not in ``axes`` (at most one) are a batch."""


def inverse_real_transform(spectrum, axes, out):
    """out = the unnormalized inverse of real_transform along ``axes``:
    numpy.fft.irfftn's times the number of points transformed, ``out``'s
    shape giving the sizes. ``spectrum`` may be overwritten."""


def tridiagonal_sweeps(couplings, inverse_pivots, scale, rows):
    """rows = T^-1 (scale rows) in place along the middle axis of ``rows``
    (outer, m, inner), float64 or complex128, one system per (outer, inner)
    column: T's diagonal factored beforehand (``inverse_pivots`` (outer, m,
    inner), float64: 1 / w_j of Gaussian elimination from j = 0), its
    off-diagonal -couplings[j] between j and j + 1, the same in every column
    (the Thomas algorithm). Column (0, 0), the singular constants' mode
    whose last inverse pivot is 0, is then made of zero mean."""
