"""The rank's faces as the operators of plugin.flow.operators and
plugin.flow.least_squares assemble them: each interior face seen from each
of its cells the rank owns (half-faces), boundary faces, and the sparsity
of the cell-to-cell operators. Arrays of NumPy or CuPy alike."""

from dataclasses import dataclass

import numpy

from gpu_mats.backend import array_module, sparse_module


def csr(values, rows, cols, shape):
    """CSR from triplets (duplicates summed, columns sorted) in the module of ``values``."""
    matrix = sparse_module(array_module(values)).coo_matrix((values, (rows, cols)), shape=shape).tocsr()
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix


def conductance_spread(g):
    """The largest, over the rank's cells, ratio of the largest to the
    smallest conductance A_f / delta_f of a cell's interior faces: the spread
    of the compact pressure Laplacian's off-diagonal entries in a row, which
    stretched cells (wall layers, graded boxes) make large and cells alike
    in every direction keep near 1. 1 where no cell has interior faces."""
    conductance = numpy.repeat(g.face_areas / g.face_distances, 2)
    rows = numpy.asarray(g.face_cells).ravel() - g.cell_start
    mine = (rows >= 0) & (rows < g.num_cells)
    rows, conductance = rows[mine], conductance[mine]
    largest, smallest = numpy.zeros(g.num_cells), numpy.full(g.num_cells, numpy.inf)
    numpy.maximum.at(largest, rows, conductance)
    numpy.minimum.at(smallest, rows, conductance)
    inner = largest > 0
    return float((largest[inner] / smallest[inner]).max(initial=1.0))


def own_faces(g, f, xp):
    """The interior flux faces the rank owns (``f``: its operators.FluxFaces):
    (their rows among the rank's flux faces, first cells, second cells, the
    mask of them among the geometry's faces)."""
    own = xp.asarray((g.face_ids >= g.face_start) & (g.face_ids < g.face_start + g.num_faces))
    face_cells = xp.asarray(g.face_cells)
    return xp.asarray(f.ids)[own] - f.start, face_cells[own, 0], face_cells[own, 1], own


@dataclass(eq=False)
class HalfFaces:
    """Each interior face seen from each of its cells that this rank owns."""

    row: numpy.ndarray      # local row of the owned cell
    cell: numpy.ndarray     # its global number
    other: numpy.ndarray    # global number of the cell across the face
    face: numpy.ndarray     # global face number
    sign: numpy.ndarray     # +1 where the cell is the face's first (u_s points out of it), else -1
    area: numpy.ndarray
    outward: numpy.ndarray  # (k, d) unit normal pointing out of the owned cell
    distance: numpy.ndarray
    across: numpy.ndarray   # (k, d) from the owned cell's centroid to the other's
    weight: numpy.ndarray   # the owned cell's weight in Gamma (geometry.face_weights, or 1 minus it)

    @classmethod
    def of(cls, g, face_ids=None, xp=numpy):
        """``face_ids``: the faces' numbers (default the geometry's); arrays of ``xp``."""
        face_ids = xp.asarray(g.face_ids if face_ids is None else face_ids)
        face_cells = xp.asarray(g.face_cells)
        areas, normals, distances, offsets, weights = (
            xp.asarray(a) for a in (g.face_areas, g.face_normals, g.face_distances, g.face_offsets, g.face_weights))
        first, second = face_cells[:, 0], face_cells[:, 1]
        parts = []
        for cell, other, sign in ((first, second, 1.0), (second, first, -1.0)):
            mine = (cell >= g.cell_start) & (cell < g.cell_start + g.num_cells)
            mine = slice(None) if bool(mine.all()) else mine  # all of them (one rank, interior faces): views
            owned = cell[mine]
            parts.append((owned - g.cell_start, owned, other[mine], face_ids[mine], xp.full(owned.shape[0], sign),
                          areas[mine], sign * normals[mine], distances[mine], sign * offsets[mine],
                          weights[mine] if sign > 0 else 1 - weights[mine]))
        return cls(*(xp.concatenate(columns) for columns in zip(*parts, strict=True)))


@dataclass(eq=False)
class BoundaryFaces:
    """Some of the rank's boundary faces: local rows, global cells, areas,
    outward normals, distances along the normal, and the vectors from the
    cells' centroids to the faces'."""

    index: numpy.ndarray  # into the geometry's boundary faces
    row: numpy.ndarray
    cell: numpy.ndarray
    area: numpy.ndarray
    normal: numpy.ndarray
    distance: numpy.ndarray
    reach: numpy.ndarray

    @classmethod
    def of(cls, g, index):
        cell = g.boundary_cells[index]
        row = cell - g.cell_start
        return cls(index, row, cell, g.boundary_areas[index], g.boundary_normals[index], g.boundary_distances[index],
                   g.boundary_centroids[index] - g.centroids[row])

    def on(self, xp):
        """The same faces with arrays of ``xp``."""
        return BoundaryFaces(*(xp.asarray(a) for a in (self.index, self.row, self.cell, self.area, self.normal,
                                                       self.distance, self.reach)))


class CellPattern:
    """The sparsity shared by the cell-to-cell operators (L, D, each block of G,
    C): each owned cell's row holds its diagonal and its neighbours across
    interior faces, CSR with sorted columns. ``off`` is the entry of each
    half-face (i, j), ``diagonal`` that of each row's (i, i): values are
    summed into them, so no operator sorts its own triplets."""

    def __init__(self, g, h):
        xp = self.xp = array_module(h.row)
        n, cells = g.num_cells, g.num_global_cells
        own = xp.arange(n, dtype=xp.int64)
        pattern = csr(xp.ones(len(h.row) + n), xp.concatenate((h.row, own)),
                       xp.concatenate((h.other, own + g.cell_start)), (n, cells))
        self.indptr, self.indices, self.shape = pattern.indptr, pattern.indices, pattern.shape
        keys = xp.repeat(own, xp.diff(self.indptr).astype(xp.int64)) * cells + self.indices  # ascending
        self.off = xp.searchsorted(keys, h.row * cells + h.other)
        self.diagonal = xp.searchsorted(keys, own * (cells + 1) + g.cell_start)

    @property
    def nnz(self):
        return len(self.indices)

    def values(self, off, diagonal):
        """The values with ``off`` summed into the half-faces' entries and
        ``diagonal`` (one per row) into the diagonal."""
        data = self.xp.bincount(self.off, off, self.nnz).astype(float, copy=False)  # no faces: NumPy gives ints
        data[self.diagonal] += diagonal
        return data

    def matrix(self, off, diagonal):
        """The matrix of ``values(off, diagonal)``."""
        return sparse_module(self.xp).csr_matrix((self.values(off, diagonal), self.indices, self.indptr),
                                                 shape=self.shape)

    def stacked(self, blocks):
        """The matrices on this pattern with values ``blocks`` (a list), one under
        the other, their zero entries left out (a box's faces along other axes)."""
        xp, k = self.xp, len(blocks)
        data = xp.concatenate(blocks)
        keep = data != 0
        rows = xp.repeat(xp.arange(k * self.shape[0], dtype=xp.int64), xp.tile(xp.diff(self.indptr), k).astype(xp.int64))
        indptr = xp.zeros(k * self.shape[0] + 1, dtype=self.indices.dtype)
        xp.cumsum(xp.bincount(rows[keep], minlength=k * self.shape[0]), out=indptr[1:])
        return sparse_module(xp).csr_matrix((data[keep], xp.tile(self.indices, k)[keep], indptr),
                                            shape=(k * self.shape[0], self.shape[1]))


def stacked_index(cell_ranges, component, dim, cells):
    """Global index of (component, cell) in a stacked vector field: each rank
    holds its cells' x components, then y, then z."""
    cell_ranges = array_module(cells).asarray(cell_ranges)
    rank = cell_ranges.searchsorted(cells, side="right") - 1
    start = cell_ranges[rank]
    return dim * start + component * (cell_ranges[rank + 1] - start) + (cells - start)
