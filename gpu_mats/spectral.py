"""The exact solve of a box's constant-coefficient Laplacian by fast
transforms. On a uniform box whose sides are walls (the pressure's
homogeneous Neumann condition) or periodic, the 7-point operator
S = sum_d c_d L_d, L_d the second difference along axis d, is diagonalized
by the discrete cosine transform of type II along each walled axis (its
eigenvalues 4 sin^2(pi k / 2n)) and the discrete Fourier transform along
each periodic one (4 sin^2(pi k / n)): S^-1 b is a forward transform, a
division by the eigenvalues and an inverse transform (Schumann and Sweet,
"A direct method for the solution of Poisson's equation with Neumann
boundary conditions on a staggered grid of arbitrary size", J. Comput.
Phys. 20, 1976; CaNS solves its pressure so: Costa, "A FFT-based
finite-difference solver for massively-parallel direct numerical
simulations of turbulent flows", Comput. Math. Appl. 76, 2018). The zero
eigenvalue of constants (no Dirichlet side) is left out: the pseudo-inverse.

The cosine transforms are computed from real FFTs of the reordered data
(Makhoul, "A fast cosine transform in one and two dimensions", IEEE Trans.
Acoust. Speech Signal Process. 28, 1980), numpy.fft on the host and
cupy.fft (cuFFT) on the GPU, on the same array code: cupyx.scipy.fft's
dctn and idctn took several times as long as a real FFT and its inverse.
"""

import numpy

from .backend import array_module

# The diagonal must be the sum of the couplings to the cell's neighbours to this (relative): the operator of
# walls and periodic sides only; an outflow's held pressure adds to the diagonals of its cells.
DIAGONAL_TOLERANCE = 1e-12


class SpectralError(ValueError):
    """An operator the transforms do not diagonalize, with the reason."""


def _along(values, axis, ndim):
    """The 1D array ``values`` shaped to broadcast along ``axis`` of an ``ndim``-dimensional array."""
    shape = [1] * ndim
    shape[axis] = values.size
    return values.reshape(shape)


def _makhoul_order(xp, n):
    """x's entries in Makhoul's order: the even ones rising, then the odd ones falling."""
    return xp.concatenate((xp.arange(0, n, 2), xp.arange(1, n, 2)[::-1]))


def _part(axis, ndim, part):
    """The index of ``part`` (a slice) along ``axis`` of an ``ndim``-dimensional array."""
    return (slice(None),) * axis + (part,) + (slice(None),) * (ndim - 1 - axis)


def dct2(x, axis):
    """The DCT of type II along ``axis``, X[k] = 2 sum_n x[n] cos(pi k (2n + 1) / 2N)
    (scipy.fft.dct's unnormalized one): X[k] = 2 Re(e^{-i pi k / 2N} V[k]), V
    the FFT of x in Makhoul's order, its upper half V[k] = conj(V[N - k]) read
    from the lower one reversed (a view: no gather)."""
    xp = array_module(x)
    n, ndim = x.shape[axis], x.ndim
    m = n // 2 + 1
    half = xp.fft.rfft(xp.take(x, _makhoul_order(xp, n), axis=axis), axis=axis)
    theta = numpy.pi * numpy.arange(n) / (2 * n)
    cos, sin = (xp.asarray(2.0 * f(theta)) for f in (numpy.cos, numpy.sin))
    X = xp.empty(x.shape)
    upper = half[_part(axis, ndim, slice(n - m, 0, -1))]  # V[N - k] for k = m .. N - 1
    for ks, spectrum, sign in ((slice(0, m), half, 1.0), (slice(m, n), upper, -1.0)):
        out = X[_part(axis, ndim, ks)]
        xp.multiply(_along(cos[ks], axis, ndim), spectrum.real, out=out)
        out += _along(sign * sin[ks], axis, ndim) * spectrum.imag
    return X


def idct2(X, axis):
    """The inverse of ``dct2`` along ``axis``: the half spectrum
    V[k] = e^{i pi k / 2N} (X[k] - i X[N - k]) / 2 (X[N] = 0), its inverse real
    FFT, and the entries put back from Makhoul's order."""
    xp = array_module(X)
    n, ndim = X.shape[axis], X.ndim
    m = n // 2 + 1
    V = X[_part(axis, ndim, slice(0, m))].astype(complex)
    V[_part(axis, ndim, slice(1, m))] -= 1j * X[_part(axis, ndim, slice(n - 1, n - m, -1))]
    V *= _along(xp.asarray(0.5 * numpy.exp(1j * numpy.pi * numpy.arange(m) / (2 * n))), axis, ndim)
    v = xp.fft.irfft(V, n=n, axis=axis)
    return xp.take(v, xp.argsort(_makhoul_order(xp, n)), axis=axis)


class SpectralBoxSolver:
    """x = S^+ b for the StencilMatrix S: ``solve(b, x)`` on flat arrays in S's memory (float64)."""

    def __init__(self, S):
        xp = array_module(S.diag)
        self.shape, self.periodic, self.couplings = tuple(S.shape), tuple(S.periodic), tuple(S.couplings)
        self._check_diagonal(S, xp)
        self.xp = xp
        # array axes: the grid is numbered x fastest, so x is the last axis of the (..., ny, nx) array
        dims = len(self.shape)
        self.walled = tuple(dims - 1 - d for d in range(dims) if not self.periodic[d])
        self.wrapped = tuple(sorted(dims - 1 - d for d in range(dims) if self.periodic[d]))
        eigenvalues = self._eigenvalues(xp)
        null = eigenvalues == 0.0  # k = 0 along every axis, the constants: exactly 0 (sin 0), the others above
        self.inverse = xp.where(null, 0.0, 1.0 / xp.where(null, 1.0, eigenvalues))

    def _check_diagonal(self, S, xp):
        """A SpectralError where the diagonal is not the sum of the cell's couplings: a held value (couplings
        that vary along an axis StencilMatrix.from_csr has refused already)."""
        expected = xp.zeros(self.shape[::-1])
        for d, (n, c, wraps) in enumerate(zip(self.shape, self.couplings, self.periodic)):
            count = numpy.full(n, 2.0)
            if not wraps:
                count[[0, -1]] = 1.0 if n > 1 else 0.0
            along = [1] * len(self.shape)
            along[len(self.shape) - 1 - d] = n
            expected = expected + c * xp.asarray(count).reshape(along)
        scale = float(xp.abs(expected).max()) or 1.0
        excess = float(xp.abs(S.diag.astype(xp.float64).reshape(expected.shape) - expected).max())
        if excess > DIAGONAL_TOLERANCE * scale:
            raise SpectralError(f"the diagonal differs from the sum of each cell's couplings by up to "
                                f"{excess:.3g} (of {scale:.3g}): a side that holds a value (an outflow's "
                                "pressure), which the cosine and Fourier transforms do not diagonalize")

    def _eigenvalues(self, xp):
        """sum_d c_d mu_d(k_d) on the transformed grid (along the last periodic axis, rfft's n // 2 + 1)."""
        dims = len(self.shape)
        total = 0.0
        last_wrapped = self.wrapped[-1] if self.wrapped else None
        for d, (n, c, wraps) in enumerate(zip(self.shape, self.couplings, self.periodic)):
            axis = dims - 1 - d
            k = numpy.arange(n // 2 + 1 if axis == last_wrapped else n)
            mu = 4.0 * numpy.sin(numpy.pi * k / n) ** 2 if wraps else 4.0 * numpy.sin(numpy.pi * k / (2 * n)) ** 2
            along = [1] * dims
            along[axis] = k.size
            total = total + c * xp.asarray(mu).reshape(along)
        return total  # each axis's term spans its axis: the sum has the whole shape

    def solve(self, b, x):
        """x = S^+ b (b, x flat, cells numbered x fastest)."""
        fft = self.xp.fft
        field = b.reshape(self.shape[::-1])
        for axis in self.walled:
            field = dct2(field, axis)
        if self.wrapped:
            field = fft.rfftn(field, axes=self.wrapped)
        field *= self.inverse
        if self.wrapped:
            field = fft.irfftn(field, s=[self.shape[::-1][a] for a in self.wrapped], axes=self.wrapped)
        for axis in self.walled:
            field = idct2(field, axis)
        x[...] = field.ravel()


class GradedBoxSolver:
    """x = S^+ b for a box's 7-point operator whose couplings vary along one
    walled axis only: a graded box, its cells' widths changing along that
    axis and equal along the others (the channel's wall-normal axis). Along
    the others the transforms diagonalize S as in SpectralBoxSolver, each
    coupling a_d a function of the graded index j; what is left is one
    tridiagonal system in j per wavenumber, sum_d a_d(j) mu_d(k) added to its
    diagonal, solved for all wavenumbers at once by the Thomas algorithm
    (the periodic direction's solver of Borrell, Lehmkuhl, Trias and Oliva,
    "Parallel direct Poisson solver for discretisations with one Fourier
    diagonalisable direction", J. Comput. Phys. 230, 2011, with a direct solve
    of its 1D systems). The constants' mode is singular: its solution is the
    one of zero mean (the pseudo-inverse)."""

    def __init__(self, shape, periodic, graded, couplings, graded_couplings, xp):
        """``couplings[d]``: axis d's coupling at each graded index (length
        shape[graded]; ignored for d = graded); ``graded_couplings``: between
        graded indices j and j + 1 (length shape[graded] - 1)."""
        self.shape, self.periodic, self.graded, self.xp = tuple(shape), tuple(periodic), graded, xp
        dims = len(self.shape)
        others = [d for d in range(dims) if d != graded]
        self.walled = tuple(dims - 1 - d for d in others if not self.periodic[d])
        self.wrapped = tuple(sorted(dims - 1 - d for d in others if self.periodic[d]))
        m = self.shape[graded]
        axis = dims - 1 - graded
        # the transformed grid's shape, and each other axis's eigenvalues spread over it
        last_wrapped = self.wrapped[-1] if self.wrapped else None
        spectral = [self.shape[::-1][a] // 2 + 1 if a == last_wrapped else self.shape[::-1][a] for a in range(dims)]
        shift = numpy.zeros(spectral)
        for d in others:
            n, a = self.shape[d], dims - 1 - d
            k = numpy.arange(spectral[a])
            mu = 4.0 * numpy.sin(numpy.pi * k / (n if self.periodic[d] else 2 * n)) ** 2
            along_k, along_j = [1] * dims, [1] * dims
            along_k[a], along_j[axis] = k.size, m
            shift = shift + numpy.asarray(couplings[d]).reshape(along_j) * mu.reshape(along_k)
        shift = numpy.moveaxis(shift, axis, 0)  # (m, the other axes' wavenumbers)
        b = numpy.asarray(graded_couplings, dtype=float)
        below, above = numpy.concatenate(([0.0], b)), numpy.concatenate((b, [0.0]))
        diagonal = (below + above).reshape([m] + [1] * (dims - 1)) + shift
        pivots = numpy.empty_like(diagonal)
        pivots[0] = diagonal[0]
        for j in range(1, m):
            pivots[j] = diagonal[j] - b[j - 1] ** 2 / pivots[j - 1]
        self.null = tuple([slice(None)] + [0] * (dims - 1))  # the constants' mode, k = 0 along every other axis
        pivots[m - 1][self.null[1:]] = numpy.inf  # its last equation singular: p = 0 there, the mean removed after
        self.b = [float(v) for v in b]
        self.inverse_pivots = xp.asarray(1.0 / pivots)
        self.axis = axis

    @classmethod
    def from_csr(cls, indptr, indices, data, shape, periodic):
        """The solver of the matrix (CSR, one row per cell, numbered x fastest)
        on the box ``shape``, ``periodic``; a SpectralError saying why not."""
        from .stencil import neighbour_entries

        xp = array_module(data)
        indptr, indices, values = (numpy.asarray(a.get() if hasattr(a, "get") else a) for a in (indptr, indices, data))
        shape, periodic = tuple(int(n) for n in shape), tuple(bool(p) for p in periodic)
        n, dims = int(numpy.prod(shape)), len(shape)
        entries = neighbour_entries(numpy, indptr, indices, shape, periodic)
        if entries is None:
            raise SpectralError("not a 7-point operator on this box (another pattern)")
        rows, cols, direction = entries
        values = values.astype(float)
        couplings = []  # axis d's coupling of each cell to its higher neighbour (0 at a wall)
        for d in range(dims):
            c, up = numpy.zeros(n), direction == 2 * d + 1
            c[rows[up]] = -values[up]
            couplings.append(c)
            down = direction == 2 * d  # the same coupling seen from the higher cell: the solver takes it symmetric
            if bool((abs(c[cols[down]] + values[down]) > DIAGONAL_TOLERANCE * abs(values[down])).any()):
                raise SpectralError(f"not symmetric along {'xyz'[d]}")
        scale = max(float(abs(values).max(initial=0.0)), 1.0)
        if float(abs(numpy.bincount(rows, values, n)).max()) > DIAGONAL_TOLERANCE * scale:
            raise SpectralError("not an operator whose diagonal is the sum of its couplings on this box (a side that "
                                "holds a value)")
        couplings = [c.reshape(shape[::-1]) for c in couplings]
        profiles, graded = [], set()
        for d in range(dims):
            c = couplings[d]
            interior = c if periodic[d] else numpy.take(c, range(shape[d] - 1), axis=dims - 1 - d)
            scale = DIAGONAL_TOLERANCE * float(abs(interior).max())
            graded |= {e for e in range(dims) if float(numpy.ptp(interior, axis=dims - 1 - e).max()) > scale}
            profiles.append(interior)
        graded = sorted(graded)
        if len(graded) != 1 or periodic[graded[0]]:
            raise SpectralError(f"the couplings vary along {', '.join('xyz'[g] for g in graded) or 'no axis'}: the "
                                "graded solver takes boxes graded along one walled axis (others: boxfft's uniform "
                                "transforms, or gpuamg)")
        g = graded[0]
        others = tuple(dims - 1 - e for e in range(dims) if e != g)  # the array axes but g's
        for d, profile in enumerate(profiles):  # constant across them, jointly
            mean = profile.mean(axis=others, keepdims=True)
            if float(abs(profile - mean).max()) > DIAGONAL_TOLERANCE * float(abs(mean).max()):
                raise SpectralError(f"the couplings along {'xyz'[d]} vary along more than the graded axis {'xyz'[g]}")
        along_g = [profile.mean(axis=others).ravel() for profile in profiles]
        return cls(shape, periodic, g, along_g, along_g[g], xp)

    def solve(self, b, x):
        """x = S^+ b (b, x flat, cells numbered x fastest)."""
        xp, fft = self.xp, self.xp.fft
        field = b.reshape(self.shape[::-1])
        for axis in self.walled:
            field = dct2(field, axis)
        if self.wrapped:
            field = fft.rfftn(field, axes=self.wrapped)
        rows = xp.moveaxis(field, self.axis, 0).astype(complex if self.wrapped else float)
        m = rows.shape[0]
        for j in range(1, m):  # forward: y_j = r_j + b_{j-1} y_{j-1} / w_{j-1}
            rows[j] += self.b[j - 1] * rows[j - 1] * self.inverse_pivots[j - 1]
        rows[m - 1] *= self.inverse_pivots[m - 1]
        for j in range(m - 2, -1, -1):  # backward: p_j = (y_j + b_j p_{j+1}) / w_j
            rows[j] = (rows[j] + self.b[j] * rows[j + 1]) * self.inverse_pivots[j]
        rows[self.null] -= rows[self.null].mean()
        field = xp.moveaxis(rows, 0, self.axis)
        if self.wrapped:
            field = fft.irfftn(field, s=[self.shape[::-1][a] for a in self.wrapped], axes=self.wrapped)
        for axis in self.walled:
            field = idct2(field, axis)
        x[...] = field.ravel()
