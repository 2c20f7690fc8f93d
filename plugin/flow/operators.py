"""The operators of the collocated, symmetry-preserving finite-volume scheme
(seed 000, sections 1.1 and 1.2), as sparse matrices built from a geometry.

Unknowns: cell velocities u_c (one vector per component) and pressures, and
the face-normal velocities u_s of the interior faces (positive from
face_cells[:, 0] to face_cells[:, 1]). Walls carry no normal velocity.

  Ms         faces -> cells   [Ms u_s]_i = sum of A_f u_s,f out of cell i
  Gamma[d]   cells -> faces   n_f,d (u_i + u_j) / 2, component d projected on the face normal
  Gs         cells -> faces   (p_j - p_i) / delta_f, the face gradient
  M[d]       Ms Gamma[d], the divergence of collocated velocities
  G[d]       -Omega^-1 M[d]^T, the cell gradient (Omega G = -M^T by construction)
  L          Ms Gs, the compact pressure Laplacian: symmetric, negative
             semidefinite, constant null space (walls are Neumann for p)
  D          -nu (Ms Gs - walls): diffusion, symmetric positive definite where
             walls hold the velocity (Dirichlet); their velocity enters as
             the source wall_source[d]
  C(u_s)     convection, [C u]_i = sum_f F_f (u_i + u_j) / 2 with F_f = A_f u_s,f
             outward of i: skew-symmetric when Ms u_s = 0. Its pattern is L's;
             its values are E_C u_s (eq. 2.10), E_C constant.
"""

import numpy
import scipy.sparse


def _csr(values, rows, cols, shape):
    matrix = scipy.sparse.csr_matrix((values, (rows, cols)), shape=shape)
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix


class FlowOperators:
    """The operators of one geometry, viscosity and set of wall velocities."""

    def __init__(self, geometry, nu, wall_velocity=None):
        """``wall_velocity(side)`` is the velocity vector of box side ``side`` (default: at rest)."""
        g = geometry
        n, nf, dim = g.num_cells, g.num_faces, g.dim
        own, nb = g.face_cells[:, 0], g.face_cells[:, 1]
        faces = numpy.arange(nf)
        self.geometry, self.nu, self.dim = g, nu, dim
        self.volumes = g.volumes
        both = numpy.concatenate
        self.Ms = _csr(both((g.face_areas, -g.face_areas)), both((own, nb)), both((faces, faces)), (n, nf))
        self.Gamma = [_csr(both((g.face_normals[:, d], g.face_normals[:, d])) / 2, both((faces, faces)),
                           both((own, nb)), (nf, n)) for d in range(dim)]
        inverse_distance = 1.0 / g.face_distances
        self.Gs = _csr(both((inverse_distance, -inverse_distance)), both((faces, faces)), both((nb, own)), (nf, n))
        self.M = [(self.Ms @ gamma).tocsr() for gamma in self.Gamma]
        inverse_volume = scipy.sparse.diags(1.0 / g.volumes)
        self.G = [(-inverse_volume @ m.T).tocsr() for m in self.M]
        self.L = (self.Ms @ self.Gs).tocsr()
        self.L.sort_indices()
        wall = g.boundary_areas / g.boundary_distances
        self.D = (-nu * self.L + scipy.sparse.diags(nu * numpy.bincount(g.boundary_cells, wall, n))).tocsr()
        self.D.sort_indices()
        velocity = numpy.array([wall_velocity(side) if wall_velocity else numpy.zeros(dim)
                                for side in g.boundary_sides]).reshape(-1, dim)
        self.wall_source = [nu * numpy.bincount(g.boundary_cells, wall * velocity[:, d], n) for d in range(dim)]
        self.E_C = self._convection_map(own, nb, faces, g.face_areas)

    def _convection_map(self, own, nb, faces, areas):
        """E_C: face velocities -> values of C in the CSR order of L's pattern."""
        pattern = self.L
        n = pattern.shape[0]
        rows = numpy.repeat(numpy.arange(n), numpy.diff(pattern.indptr))
        keys = rows * n + pattern.indices  # ascending: CSR with sorted columns

        def entry(i, j):
            return numpy.searchsorted(keys, i * n + j)

        half = areas / 2
        entries = numpy.concatenate((entry(own, nb), entry(own, own), entry(nb, own), entry(nb, nb)))
        values = numpy.concatenate((half, half, -half, -half))
        return _csr(values, entries, numpy.tile(faces, 4), (pattern.nnz, faces.size))

    def convection(self, u_s):
        """C(u_s) as a CSR matrix on L's pattern."""
        return scipy.sparse.csr_matrix((self.E_C @ u_s, self.L.indices, self.L.indptr), shape=self.L.shape)
