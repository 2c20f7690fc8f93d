"""A box's constant-coefficient operator, applied from its grid instead of
read from a matrix: on a uniform box the pressure Laplacian of every
geometric level has one coupling per axis, so a product needs only x and
the diagonal. At 256^3 the 7-point SELL product reads 68 bytes a row with
float32 values, the stencil 28 (BENCHMARKS.md, gpuamg's fourth part).

``StencilMatrix.from_csr`` recognizes such a matrix in CSR, numbered x
fastest, or says it is not one; the array code runs on NumPy or CuPy.
"""

from dataclasses import dataclass

import numpy

from .backend import array_module
from .kernels import family
from .sell import entry_rows

# Couplings along an axis that differ by at most this (relative) are one: the
# operators are computed per face, and their rounding differs from face to face.
COUPLING_TOLERANCE = 1e-12


@dataclass(eq=False)
class StencilMatrix:
    """A[c, c] = ``diag``[c]; A[c, c'] = -``couplings``[d] for c' the neighbour of
    cell c along axis d (across a ``periodic`` side, the wrapped cell); cells
    numbered x fastest on a grid of ``shape`` = (nx, ny[, nz]) cells."""

    shape: tuple
    periodic: tuple
    couplings: tuple
    diag: object

    @property
    def nbytes(self):
        return int(self.diag.nbytes)

    @classmethod
    def from_csr(cls, indptr, indices, data, shape, periodic, value_dtype=numpy.float64):
        """The stencil of the CSR matrix (arrays in NumPy or CuPy), or None where
        the matrix is not one on this grid: an entry off the neighbours, a
        neighbour missing, couplings that vary along an axis, or a periodic
        axis of fewer than 3 cells (its two neighbours would be one)."""
        xp = array_module(data)
        shape, periodic = tuple(int(n) for n in shape), tuple(bool(p) for p in periodic)
        n = int(numpy.prod(shape))
        if indptr.size != n + 1 or any(p and s < 3 for s, p in zip(shape, periodic)):
            return None
        rows = entry_rows(xp, xp.asarray(indptr, dtype=xp.int64))
        cols = xp.asarray(indices, dtype=xp.int64)
        strides = numpy.cumprod((1,) + shape[:-1])
        diagonal = rows == cols
        # direction of each off-diagonal entry: 2 d + (1 towards higher cells), -1 for none
        direction = xp.full(rows.size, -1, dtype=xp.int64)
        moves = xp.zeros(rows.size, dtype=xp.int64)  # axes along which an entry's cells differ
        for d, (size, stride) in enumerate(zip(shape, strides)):
            step = (cols // stride) % size - (rows // stride) % size
            if periodic[d]:
                step = xp.where(step == size - 1, -1, xp.where(step == 1 - size, 1, step))
            moves += step != 0
            direction = xp.where(step == 1, 2 * d + 1, xp.where(step == -1, 2 * d, direction))
        off = ~diagonal
        if bool((off & ((moves != 1) | (direction < 0))).any()):
            return None  # an entry that is not a neighbour
        found = xp.bincount(rows[off] * 2 * len(shape) + direction[off], minlength=n * 2 * len(shape))
        if not bool((found.reshape(n, -1) == _neighbours(xp, shape, periodic)).all()):
            return None  # a neighbour missing, or one entered twice
        couplings = []
        for d in range(len(shape)):
            values = -xp.asarray(data)[off][(direction[off] // 2) == d]
            if values.size == 0:
                couplings.append(0.0)
                continue
            c = float(values[0])
            if float(xp.abs(values - c).max()) > COUPLING_TOLERANCE * abs(c):
                return None
            couplings.append(float(numpy.dtype(value_dtype).type(c)))  # as a matrix of that type would hold it
        diag = xp.zeros(n, dtype=value_dtype)
        diag[rows[diagonal]] = xp.asarray(data)[diagonal]
        return cls(shape, periodic, tuple(couplings), diag)

    def multiply(self, x, y, alpha=1.0, beta=0.0, z=None):
        """y = alpha A x + beta z (z defaults to y)."""
        family("stencil", array_module(self.diag)).spmv(self, x, y, y if z is None else z, alpha, beta)

    def chebyshev_step(self, d, d_next, r, z, scaling, x, a, c):
        """r = z - A d; d_next = a d + c scaling r; x += d_next, in one pass."""
        family("stencil", array_module(self.diag)).chebyshev_step(self, d, d_next, r, z, scaling, x, a, c)


def _neighbours(xp, shape, periodic):
    """Per cell and direction (2 d: lower, 2 d + 1: higher along axis d), 1 where the cell has that neighbour."""
    cells = xp.arange(int(numpy.prod(shape)), dtype=xp.int64)
    has = []
    stride = 1
    for size, wraps in zip(shape, periodic):
        position = (cells // stride) % size
        has += [(position > 0) | wraps, (position < size - 1) | wraps]
        stride *= size
    return xp.stack(has, axis=1).astype(xp.int64)
