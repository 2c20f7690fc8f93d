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

The Fourier transforms along periodic axes and the graded solver's
tridiagonal sweeps are the kernel family ``spectral``: on the GPU they write
into arrays the solver holds, so that a solve on a box whose only walled axis
(if any) is the graded one allocates nothing and a CUDA graph can hold it.

The cosine transforms are computed from real FFTs of the reordered data
(Makhoul, "A fast cosine transform in one and two dimensions", IEEE Trans.
Acoust. Speech Signal Process. 28, 1980), numpy.fft on the host and
cupy.fft (cuFFT) on the GPU, on the same array code: cupyx.scipy.fft's
dctn and idctn took several times as long as a real FFT and its inverse.
"""

import numpy

from .backend import array_module
from .kernels import family

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


class _BoxTransforms:
    """What both solvers share: cosine transforms along the ``transformed``
    axes that are walls (new arrays: Makhoul's reordering), real Fourier
    transforms along the periodic ones into the solver's own buffer, and
    between them ``_solve_spectrum``, the solve of the transformed system in
    place."""

    def __init__(self, shape, periodic, transformed, xp):
        self.shape, self.periodic, self.xp = tuple(shape), tuple(periodic), xp
        dims = len(self.shape)
        self.grid = self.shape[::-1]  # the array's shape: cells numbered x fastest, x the last axis
        self.walled = tuple(dims - 1 - d for d in transformed if not self.periodic[d])
        self.wrapped = tuple(sorted(dims - 1 - d for d in transformed if self.periodic[d]))
        spectral = list(self.grid)
        if self.wrapped:
            spectral[self.wrapped[-1]] = self.grid[self.wrapped[-1]] // 2 + 1  # the real FFT's half spectrum
        self.spectral_shape = tuple(spectral)
        self.points = int(numpy.prod([self.grid[a] for a in self.wrapped]))  # the unnormalized inverse's factor
        self.spectrum = xp.empty(self.spectral_shape, dtype=complex) if self.wrapped else None
        self.kernels = family("spectral", xp)

    @property
    def capturable(self):
        """Whether a solve allocates nothing (no walled axis transformed), so that a CUDA graph can replay it."""
        return not self.walled

    def solve(self, b, x):
        """x = S^+ b (b, x flat and contiguous, cells numbered x fastest)."""
        field = b.reshape(self.grid)
        for axis in self.walled:
            field = dct2(field, axis)
        if not self.wrapped:
            field = field if self.walled else field.copy()
            self._solve_spectrum(field)
        else:
            self.kernels.real_transform(field, self.wrapped, self.spectrum)
            self._solve_spectrum(self.spectrum)
            field = self.xp.empty(self.grid) if self.walled else x.reshape(self.grid)
            self.kernels.inverse_real_transform(self.spectrum, self.wrapped, field)
        for axis in self.walled:
            field = idct2(field, axis)
        if self.walled or not self.wrapped:
            x[...] = field.ravel()

    def _solve_spectrum(self, spectrum):
        raise NotImplementedError


class SpectralBoxSolver(_BoxTransforms):
    """x = S^+ b for the StencilMatrix S: ``solve(b, x)`` on flat arrays in S's memory (float64)."""

    def __init__(self, S):
        xp = array_module(S.diag)
        super().__init__(S.shape, S.periodic, range(len(S.shape)), xp)
        self.couplings = tuple(S.couplings)
        self._check_diagonal(S, xp)
        eigenvalues = self._eigenvalues(xp)
        null = eigenvalues == 0.0  # k = 0 along every axis, the constants: exactly 0 (sin 0), the others above
        self.inverse = xp.where(null, 0.0, 1.0 / (self.points * xp.where(null, 1.0, eigenvalues)))

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
        for d, (n, c, wraps) in enumerate(zip(self.shape, self.couplings, self.periodic)):
            axis = dims - 1 - d
            k = numpy.arange(self.spectral_shape[axis])
            mu = 4.0 * numpy.sin(numpy.pi * k / n) ** 2 if wraps else 4.0 * numpy.sin(numpy.pi * k / (2 * n)) ** 2
            along = [1] * dims
            along[axis] = k.size
            total = total + c * xp.asarray(mu).reshape(along)
        return total  # each axis's term spans its axis: the sum has the whole shape

    def _solve_spectrum(self, spectrum):
        spectrum *= self.inverse


class GradedBoxSolver(_BoxTransforms):
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
        dims = len(shape)
        others = [d for d in range(dims) if d != graded]
        super().__init__(shape, periodic, others, xp)
        self.graded = graded
        m, axis = self.shape[graded], dims - 1 - graded
        shift = numpy.zeros(self.spectral_shape)  # each other axis's eigenvalues spread over the transformed grid
        for d in others:
            n, a = self.shape[d], dims - 1 - d
            k = numpy.arange(self.spectral_shape[a])
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
        pivots[m - 1][(0,) * (dims - 1)] = numpy.inf  # the constants' last equation singular: p = 0 there, then
        # the mean removed (tridiagonal_sweeps)
        # the sweeps' arrays: (outer, m, inner) around the graded axis
        self.columns = (int(numpy.prod(self.spectral_shape[:axis])), m, int(numpy.prod(self.spectral_shape[axis + 1:])))
        self.inverse_pivots = xp.asarray(numpy.ascontiguousarray(numpy.moveaxis(1.0 / pivots, 0, axis))
                                         .reshape(self.columns))
        self.couplings = xp.asarray(b)

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

    def _solve_spectrum(self, spectrum):
        self.kernels.tridiagonal_sweeps(self.couplings, self.inverse_pivots, 1.0 / self.points,
                                        spectrum.reshape(self.columns))
