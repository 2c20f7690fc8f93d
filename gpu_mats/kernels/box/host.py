"""The box family's NumPy twin: the same operators on whole-grid arrays, a
face's low and high cells lined up by a shift along its axis (a roll where
the axis wraps)."""

import numpy


def _cells(grid, x):
    """A cell vector as (nz, ny, nx): grid axis d is array axis 2 - d."""
    return x.reshape(grid.shape[::-1])


def _faces(grid, w, d):
    """Axis d's faces of a face vector, as (nz, ny, nx) of its low cells."""
    return w[grid.offsets[d]:grid.offsets[d + 1]].reshape(grid.extents(d)[::-1])


def _along(X, d, start, stop):
    index = [slice(None)] * 3
    index[2 - d] = slice(start, stop)
    return X[tuple(index)]


def _ends(grid, X, d):
    """(X at the low cell of each face along d, X at its high cell)."""
    if grid.periodic[d]:
        return X, numpy.roll(X, -1, axis=2 - d)
    return _along(X, d, None, -1), _along(X, d, 1, None)


def _scatter(grid, F, d, out, high_sign):
    """out += F at each face's low cell and high_sign F at its high cell."""
    if grid.periodic[d]:
        out += F
        out += high_sign * numpy.roll(F, 1, axis=2 - d)
    else:
        _along(out, d, None, -1)[...] += F
        _along(out, d, 1, None)[...] += high_sign * F


def interpolate(grid, u, w):
    for d in range(grid.dim):
        low, high = _ends(grid, _cells(grid, u[d]), d)
        _faces(grid, w, d)[...] = 0.5 * low + 0.5 * high


def face_gradient(grid, p, w, inverse, z=None):
    for d in range(grid.dim):
        low, high = _ends(grid, _cells(grid, p), d)
        added = 0.0 if z is None else _faces(grid, z, d)
        _faces(grid, w, d)[...] = inverse[d] * high - inverse[d] * low + added


def face_sum(grid, w, out, scale, z=None, speeds=False):
    total = numpy.zeros(grid.shape[::-1])
    for d in range(grid.dim):
        F = _faces(grid, w, d)
        _scatter(grid, scale[d] * (abs(F) if speeds else F), d, total, 1.0 if speeds else -1.0)
    out[...] = total.ravel() + (0.0 if z is None else z)


def largest_rate(grid, w, out, scale):
    rates = numpy.empty(grid.cells)
    face_sum(grid, w, rates, scale, speeds=True)
    out[0] = rates.max() if rates.size else 0.0  # NaN where any rate is


def cell_gradient(grid, p, out, scale):
    for d in range(grid.dim):
        low, high = _ends(grid, _cells(grid, p), d)
        total = numpy.zeros(grid.shape[::-1])
        _scatter(grid, scale[d] * (high - low), d, total, 1.0)
        out[d] = total.ravel()


def convection(grid, w, u, out, half):
    for e in range(grid.dim):
        total = numpy.zeros(grid.shape[::-1])
        for d in range(grid.dim):
            low, high = _ends(grid, _cells(grid, u[e]), d)
            _scatter(grid, half[d] * _faces(grid, w, d) * (low + high), d, total, -1.0)
        out[e] = total.ravel()


def diffusion(grid, u, out, conductance, z=None):
    for e in range(grid.dim):
        U = _cells(grid, u[e])
        total = numpy.zeros(grid.shape[::-1])
        for d in range(grid.dim):
            low, high = _ends(grid, U, d)
            _scatter(grid, conductance[d] * (low - high), d, total, -1.0)
            if not grid.periodic[d]:  # the walls' held faces, half a cell away
                for end in (slice(None, 1), slice(-1, None)):
                    _along(total, d, end.start, end.stop)[...] += 2.0 * conductance[d] * _along(U, d, end.start,
                                                                                               end.stop)
        out[e] = total.ravel() + (0.0 if z is None else z[e])


def transport(grid, w, u, v, out, half, conductance):
    convection(grid, w, u, out, half)
    diffusion(grid, v, out, conductance, out)
