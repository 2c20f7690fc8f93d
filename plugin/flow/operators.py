"""The operators of the collocated, symmetry-preserving finite-volume scheme
(Oyarzún 2015, sections 1.1 and 1.2; docs/references.md), as the rows one rank owns of sparse
matrices with global column numbers, built from a geometry.

Unknowns: cell velocities u_c (one vector per component, stacked component by
component on each rank: [u_x, u_y, u_z] of the rank's cells) and pressures,
and the face-normal velocities u_s (positive from face_cells[:, 0] to
face_cells[:, 1]). Walls carry no normal velocity.

  Ms      faces -> cells     [Ms u_s]_i = sum of A_f u_s,f out of cell i
  Gamma   cells^d -> faces   n_f . (u_i + u_j) / 2, the velocity projected on the face normal
  Gs      cells -> faces     (p_j - p_i) / delta_f, the face gradient
  G       cells -> cells^d   -Omega^-1 M^T with M = Ms Gamma (the divergence of
                             collocated velocities): the cell gradient
  L       Ms Gs, the compact pressure Laplacian: symmetric, negative
          semidefinite, constant null space (walls are Neumann for p)
  D       -nu (L - walls): diffusion, symmetric positive definite where walls
          hold the velocity (Dirichlet); their velocity (plugin.flow.boundary,
          a condition per boundary tag) enters as wall_source
  E_C     faces -> values of C(u_s) in the CSR order of L's pattern (eq. 2.10):
          [C u]_i = sum_f F_f (u_i + u_j) / 2 with F_f = A_f u_s,f out of i,
          skew-symmetric when Ms u_s = 0
  flux_rate  faces -> cells  sum_f A_f |u_s,f| / (2 Omega_i) for |u_s|: the
          convective CFL number per unit time step

Every matrix is assembled from the rank's half-faces (a face seen from one of
its cells that the rank owns), so no rank needs another's geometry.
"""

from dataclasses import dataclass

import numpy
import scipy.sparse


def _csr(values, rows, cols, shape):
    matrix = scipy.sparse.csr_matrix((values, (rows, cols)), shape=shape)
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix


@dataclass(eq=False)
class _HalfFaces:
    """Each face seen from each of its cells that this rank owns."""

    row: numpy.ndarray      # local row of the owned cell
    cell: numpy.ndarray     # its global number
    other: numpy.ndarray    # global number of the cell across the face
    face: numpy.ndarray     # global face number
    sign: numpy.ndarray     # +1 where the cell is the face's first (u_s points out of it), else -1
    area: numpy.ndarray
    outward: numpy.ndarray  # (k, d) unit normal pointing out of the owned cell
    distance: numpy.ndarray

    @classmethod
    def of(cls, g):
        first, second = g.face_cells[:, 0], g.face_cells[:, 1]
        parts = []
        for cell, other, sign in ((first, second, 1.0), (second, first, -1.0)):
            mine = (cell >= g.cell_start) & (cell < g.cell_start + g.num_cells)
            parts.append((cell[mine] - g.cell_start, cell[mine], other[mine], g.face_ids[mine],
                          numpy.full(int(mine.sum()), sign), g.face_areas[mine], sign * g.face_normals[mine],
                          g.face_distances[mine]))
        return cls(*(numpy.concatenate(columns) for columns in zip(*parts, strict=True)))


class FlowOperators:
    """The rank's rows of the operators of one geometry, viscosity and set of wall velocities."""

    def __init__(self, geometry, nu, boundary_conditions):
        """``boundary_conditions``: {tag: condition} for every boundary tag (plugin.flow.boundary)."""
        g = geometry
        n, dim = g.num_cells, g.dim
        cells, faces = g.num_global_cells, g.num_global_faces
        self.geometry, self.nu, self.dim, self.volumes = g, nu, dim, g.volumes
        h = _HalfFaces.of(g)
        both = numpy.concatenate
        self.Ms = _csr(h.sign * h.area, h.row, h.face, (n, faces))
        self.L = compact_laplacian(g, h)
        self.G = self._gradient(h, n, cells)
        self.Gamma = self._face_projection(g, dim * cells)
        own = (g.face_ids >= g.face_start) & (g.face_ids < g.face_start + g.num_faces)
        rows, inverse_distance = g.face_ids[own] - g.face_start, 1.0 / g.face_distances[own]
        self.Gs = _csr(both((inverse_distance, -inverse_distance)), both((rows, rows)),
                       both((g.face_cells[own, 1], g.face_cells[own, 0])), (g.num_faces, cells))
        wall = g.boundary_areas / g.boundary_distances
        wall_rows = g.boundary_cells - g.cell_start
        wall_conductance = numpy.bincount(wall_rows, wall, n)
        diagonal = scipy.sparse.csr_matrix((nu * wall_conductance, (numpy.arange(n), numpy.arange(n) + g.cell_start)),
                                           shape=(n, cells))
        self.D = (-nu * self.L + diagonal).tocsr()
        self.D.sort_indices()
        wall_velocities = {tag: condition.velocity_in(dim) for tag, condition in boundary_conditions.items()}
        velocity = numpy.array([wall_velocities[tag] for tag in g.boundary_tags]).reshape(-1, dim)
        self.wall_source = numpy.array([nu * numpy.bincount(wall_rows, wall * velocity[:, d], n) for d in range(dim)])
        self.E_C = self._convection_map(h, n, cells, faces)
        self.flux_rate = _csr(h.area / (2 * g.volumes[h.row]), h.row, h.face, (n, faces))

    def _gradient(self, h, n, cells):
        """G = -Omega^-1 M^T, row (d, i) from the half-faces of cell i:
        [G_d p]_i = sum_f A_f n_f,d (p_j - p_i) / (2 Omega_i), n_f out of i."""
        rows, cols, values = [], [], []
        for d in range(self.dim):
            on = h.outward[:, d] != 0
            weight = h.area[on] * h.outward[on, d] / (2 * self.volumes[h.row[on]])
            rows += [d * n + h.row[on]] * 2
            cols += [h.other[on], h.cell[on]]
            values += [weight, -weight]
        return _csr(numpy.concatenate(values), numpy.concatenate(rows), numpy.concatenate(cols), (self.dim * n, cells))

    def _face_projection(self, g, stacked_columns):
        """Gamma on the faces this rank owns; column (d, cell) in the stacked numbering."""
        own = (g.face_ids >= g.face_start) & (g.face_ids < g.face_start + g.num_faces)
        rows, cols, values = [], [], []
        for d in range(self.dim):
            on = own & (g.face_normals[:, d] != 0)
            for side in (0, 1):
                rows.append(g.face_ids[on] - g.face_start)
                cols.append(stacked_index(g.cell_ranges, d, self.dim, g.face_cells[on, side]))
                values.append(g.face_normals[on, d] / 2)
        return _csr(numpy.concatenate(values), numpy.concatenate(rows), numpy.concatenate(cols),
                    (g.num_faces, stacked_columns))

    def _convection_map(self, h, n, cells, faces):
        """E_C: face velocities -> values of C in the CSR order of L's pattern (eq. 2.13:
        each half-face puts A_f / 2 on the entries (i, j) and (i, i) of its cell's row)."""
        pattern = self.L
        rows = numpy.repeat(numpy.arange(n, dtype=numpy.int64), numpy.diff(pattern.indptr))
        keys = rows * cells + pattern.indices  # ascending: CSR with sorted columns

        def entry(row, col):
            return numpy.searchsorted(keys, row * cells + col)

        half = h.sign * h.area / 2
        entries = numpy.concatenate((entry(h.row, h.other), entry(h.row, h.cell)))
        return _csr(numpy.concatenate((half, half)), entries, numpy.concatenate((h.face, h.face)), (pattern.nnz, faces))

    def convection(self, u_s):
        """C(u_s) on L's pattern (scipy CSR of the rank's rows), from the face velocities
        this rank's rows need, indexed by global face number (serial: all of them)."""
        return scipy.sparse.csr_matrix((self.E_C @ u_s, self.L.indices, self.L.indptr), shape=self.L.shape)

    def diffusion_rate(self):
        """max_i D_ii / Omega_i over the rank's cells: the explicit diffusion step limit is about 1 / this."""
        return float((self.D.diagonal(self.geometry.cell_start) / self.volumes).max(initial=0.0))


def compact_laplacian(geometry, half_faces=None):
    """L = Ms Gs, the rank's rows: [L p]_i = sum_f (A_f / delta_f) (p_j - p_i)
    (Oyarzún 2015, eq. 1.7), with global column numbers."""
    g, h = geometry, half_faces or _HalfFaces.of(geometry)
    conductance = h.area / h.distance
    return _csr(numpy.concatenate((conductance, -conductance)), numpy.concatenate((h.row, h.row)),
                numpy.concatenate((h.other, h.cell)), (g.num_cells, g.num_global_cells))


def stacked_index(cell_ranges, component, dim, cells):
    """Global index of (component, cell) in a stacked vector field: each rank
    holds its cells' x components, then y, then z."""
    rank = numpy.searchsorted(cell_ranges, cells, side="right") - 1
    start = cell_ranges[rank]
    return dim * start + component * (cell_ranges[rank + 1] - start) + (cells - start)
