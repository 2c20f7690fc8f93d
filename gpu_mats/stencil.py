"""A box's constant-coefficient operator and its grid transfers, applied
from the grids instead of read from matrices: on a uniform box the pressure
Laplacian of every geometric level has one coupling per axis, so a product
needs only x and the diagonal (the 7-point SELL product reads 68 bytes a
row with float32 values, the stencil 28), and the linear interpolation
between two grids is a tensor product of one small operator per axis.

``StencilMatrix.from_csr`` and ``TensorTransfer.between`` recognize them in
CSR, cells numbered x fastest, or say they are not such; the array code runs
on NumPy or CuPy.
"""

from dataclasses import dataclass

import numpy

from .backend import array_module, hashed_bits, sparse_module
from .kernels import family
from .sell import INT32_MAX, entry_rows

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
        neighbour missing, couplings that vary along an axis, a periodic
        axis of fewer than 3 cells (its two neighbours would be one), or
        more cells than the kernels' 32-bit numbering takes."""
        xp = array_module(data)
        shape, periodic = tuple(int(n) for n in shape), tuple(bool(p) for p in periodic)
        n = int(numpy.prod(shape))
        if n > INT32_MAX:
            return None
        entries = neighbour_entries(xp, indptr, indices, shape, periodic)
        if entries is None:
            return None
        rows, _, direction = entries
        diagonal = direction < 0
        off = ~diagonal
        off_values, off_axes = -xp.asarray(data)[off], direction[off] // 2
        couplings = []
        for d in range(len(shape)):
            values = off_values[off_axes == d]
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

    def chebyshev_first(self, b, scaling, d_next, r, x, c0, a, c):
        """The first two smoothing steps from x = 0 in one pass (d0 = c0 scaling b; r = b - A d0;
        d_next = a d0 + c scaling r; x = d0 + d_next)."""
        family("stencil", array_module(self.diag)).chebyshev_first(self, b, scaling, d_next, r, x, c0, a, c)


# A transfer recognized as a tensor product must give the matrix's products on random vectors to this (relative).
TRANSFER_TOLERANCE = 1e-12
MAX_WIDTH = 4  # entries per axis of a transfer's rows (the kernels are compiled up to it)


@dataclass(eq=False)
class TensorTransfer:
    """y = T x for T = T_z (x) T_y (x) T_x, x on the grid ``in_shape`` and y on
    ``out_shape`` (3 axes; a 2D grid is one cell deep): along axis d, output
    coordinate i takes ``weights[d][i, a]`` of input coordinate
    ``cols[d][i, a]`` for a < ``width`` (zero weights pad the tables)."""

    out_shape: tuple
    in_shape: tuple
    cols: tuple
    weights: tuple
    width: int

    @property
    def shape(self):
        return int(numpy.prod(self.out_shape)), int(numpy.prod(self.in_shape))

    @property
    def nbytes(self):
        return int(sum(a.nbytes for a in self.cols + self.weights))

    @classmethod
    def between(cls, P, fine_shape, coarse_shape, xp):
        """(prolongation, restriction) as tensor products in ``xp``'s memory for
        the scipy CSR prolongation ``P`` from the grid ``coarse_shape`` to
        ``fine_shape``, or None where P is not one. Each axis's factor is read
        from P's rows along that axis through cell 0, whose factors on the
        other axes sum to 1 (an interpolation's rows do); the products are
        then checked against P's on random vectors."""
        fine, coarse = _three(fine_shape), _three(coarse_shape)
        if P.shape != (int(numpy.prod(fine)), int(numpy.prod(coarse))):
            return None
        factors = [_axis_factor(P, fine, coarse, d) for d in range(3)]
        transposed = [F.T.tocsr() for F in factors]
        if max(int(numpy.diff(F.indptr).max()) for F in factors + transposed) > MAX_WIDTH or P.shape[0] > INT32_MAX:
            return None
        transfers = (cls._of(factors, fine, coarse, xp), cls._of(transposed, coarse, fine, xp))
        P_xp = sparse_module(xp).csr_matrix(P)
        for T, M in zip(transfers, (P_xp, P_xp.T.tocsr())):
            v = (hashed_bits(xp, M.shape[1], 7) >> xp.uint64(11)).astype(xp.float64) / 2.0**53 - 0.5
            expected, got = M @ v, xp.empty(M.shape[0])
            T.multiply(v, got)
            if float(xp.linalg.norm(got - expected)) > TRANSFER_TOLERANCE * float(xp.linalg.norm(expected)):
                return None
        return transfers

    @classmethod
    def _of(cls, factors, out_shape, in_shape, xp):
        width = max(int(numpy.diff(F.indptr).max()) for F in factors)
        cols, weights = [], []
        for F in factors:
            count = numpy.diff(F.indptr)
            slot = numpy.arange(F.nnz) - numpy.repeat(F.indptr[:-1], count)
            table_cols, table_weights = numpy.zeros((F.shape[0], width), numpy.int32), numpy.zeros((F.shape[0], width))
            rows = numpy.repeat(numpy.arange(F.shape[0]), count)
            table_cols[rows, slot], table_weights[rows, slot] = F.indices, F.data
            cols.append(xp.asarray(table_cols))
            weights.append(xp.asarray(table_weights))
        return cls(out_shape, in_shape, tuple(cols), tuple(weights), width)

    def multiply(self, x, y, alpha=1.0, beta=0.0, z=None):
        """y = alpha T x + beta z (z defaults to y)."""
        family("stencil", array_module(self.weights[0])).transfer(self, x, y, y if z is None else z, alpha, beta)


def _three(shape):
    return tuple(int(n) for n in shape) + (1,) * (3 - len(shape))


def _axis_factor(P, fine, coarse, d):
    """The factor of P along axis d (scipy CSR, fine by coarse cells of that axis), summed over the other axes."""
    P = P.tocsr()
    rows = numpy.arange(fine[d]) * int(numpy.prod(fine[:d]))
    part = P[rows]
    entry_rows = numpy.repeat(numpy.arange(fine[d]), numpy.diff(part.indptr))
    along = (part.indices // int(numpy.prod(coarse[:d]))) % coarse[d]
    factor = sparse_module(numpy).csr_matrix((part.data, (entry_rows, along)), shape=(fine[d], coarse[d]))
    factor.sum_duplicates()
    factor.eliminate_zeros()
    return factor


def neighbour_entries(xp, indptr, indices, shape, periodic):
    """(rows, cols, direction) of a CSR matrix's entries (arrays in ``xp``'s
    memory) whose rows are the cells of a box of ``shape``, numbered x
    fastest: direction 2 d + 1 towards the higher cell along axis d, 2 d
    towards the lower, -1 on the diagonal; None where the matrix is not a
    7-point operator on the box (an entry off the neighbours, a neighbour
    missing or entered twice, a periodic axis of fewer than 3 cells: its two
    neighbours would be one)."""
    n = int(numpy.prod(shape))
    if indptr.size != n + 1 or any(p and s < 3 for s, p in zip(shape, periodic)):
        return None
    rows = entry_rows(xp, xp.asarray(indptr, dtype=xp.int64))
    cols = xp.asarray(indices, dtype=xp.int64)
    strides = numpy.cumprod((1,) + tuple(shape[:-1]))
    off = rows != cols
    direction = xp.full(rows.size, -1, dtype=xp.int64)
    moves = xp.zeros(rows.size, dtype=xp.int64)  # axes along which an entry's cells differ
    for d, (size, stride) in enumerate(zip(shape, strides)):
        step = (cols // stride) % size - (rows // stride) % size
        if periodic[d]:
            step = xp.where(step == size - 1, -1, xp.where(step == 1 - size, 1, step))
        moves += step != 0
        direction = xp.where(step == 1, 2 * d + 1, xp.where(step == -1, 2 * d, direction))
    if bool((off & ((moves != 1) | (direction < 0))).any()):
        return None  # an entry that is not a neighbour
    found = xp.bincount(rows[off] * 2 * len(shape) + direction[off], minlength=n * 2 * len(shape))
    if not bool((found.reshape(n, -1) == _neighbours(xp, shape, periodic)).all()):
        return None  # a neighbour missing, or one entered twice
    return rows, cols, direction


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
