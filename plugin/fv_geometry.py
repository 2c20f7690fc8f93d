"""Cell-centred finite-volume geometry of unstructured tetrahedral meshes,
on one rank: ``TetGeometry(points, tets).finite_volume()`` is the
FiniteVolumeGeometry the flow operators take (plugin.flow.geometry).

Everything is vectorised NumPy so that meshes of millions of cells are
processed in seconds; nothing here imports PETSc.
"""

import basix
import numpy as np

from .flow.geometry import FiniteVolumeGeometry

# Vertex triples of the four facets of the reference tetrahedron, from basix
# so that the numbering matches FEniCS.
_TET_FACETS = np.asarray(basix.topology(basix.CellType.tetrahedron)[2])
_OPPOSITE = 6 - _TET_FACETS.sum(axis=1)  # the vertex not on each facet


class TetGeometry:
    """Volumes, centroids and faces of a conforming tetrahedral mesh.

    Attributes (M cells, F interior faces, B boundary faces):
      volumes (M,), centroids (M, 3);
      face_cells (F, 2) with k < j in each row, face_areas (F,),
      face_normals (F, 3) unit, pointing from cell k to cell j;
      boundary_cells (B,), boundary_vertices (B, 3), boundary_areas (B,),
      boundary_normals (B, 3) unit, pointing out of the domain.
    Coordinates are held component-major (3, n) internally, so that vector
    arithmetic runs on contiguous rows; the (n, 3) attributes are transposed
    views of those arrays.
    """

    def __init__(self, points, tets):
        self.points = np.ascontiguousarray(points, dtype=np.float64)
        self.tets = np.ascontiguousarray(tets, dtype=np.int64)
        self._xyz = np.ascontiguousarray(self.points.T)
        t = np.ascontiguousarray(self.tets.T)
        m = len(self.tets)

        # Outward area vectors of all 4 facets of every cell, facet-major
        # (entry f * M + c is facet f of cell c), so that each face's geometry
        # is later one gather. The facet opposite vertex v has area vector
        # -3V grad(lambda_v), and the barycentric gradients are the rows of
        # the inverse Jacobian, i.e. the cofactors cof_v over det.
        x0 = self._xyz[:, t[0]]
        e1, e2, e3 = (self._xyz[:, t[v]] - x0 for v in (1, 2, 3))
        cof = [None, _cross(e2, e3), _cross(e3, e1), _cross(e1, e2)]
        cof[0] = -(cof[1] + cof[2] + cof[3])
        det = _dot(e1, cof[1])
        self.volumes = np.abs(det) / 6
        self.centroids = (x0 + (e1 + e2 + e3) / 4).T
        s = np.stack([cof[v] for v in _OPPOSITE], axis=1) * (-np.sign(det) / 2)
        s = s.reshape(3, -1)

        # A face shared by two cells appears as the same sorted vertex triple
        # in both, so sorting all 4M triples makes such pairs adjacent.
        a, b, c = (t[_TET_FACETS[:, i]].ravel() for i in range(3))
        a, b = np.minimum(a, b), np.maximum(a, b)
        b, c = np.minimum(b, c), np.maximum(b, c)
        a, b = np.minimum(a, b), np.maximum(a, b)
        n = len(self.points)
        ab = a * n + b
        # One int64 key sorts fastest; it fits while n^3 < 2^63 (about 12M cells).
        order = np.argsort(ab * n + c) if n**3 < 2**63 else np.lexsort((c, ab))
        cell = order % m
        same = (ab[order[1:]] == ab[order[:-1]]) & (c[order[1:]] == c[order[:-1]])
        if np.any(same[1:] & same[:-1]):
            raise ValueError("a face is shared by more than two cells")
        first = np.flatnonzero(same)
        single = np.ones(len(order), dtype=bool)
        single[first] = single[first + 1] = False

        lo = first + (cell[first] > cell[first + 1])
        self.face_cells = np.stack([cell[lo], cell[2 * first + 1 - lo]], axis=1)
        self.face_areas, self.face_normals = _area_normal(s[:, order[lo]])
        facet = order[single]
        self.boundary_cells = cell[single]
        self.boundary_vertices = np.stack([a[facet], b[facet], c[facet]], axis=1)
        self.boundary_areas, self.boundary_normals = _area_normal(s[:, facet])

    @classmethod
    def from_meshio(cls, mesh):
        """Build from a meshio.Mesh, concatenating its "tetra" cell blocks."""
        blocks = [c.data for c in mesh.cells if c.type == "tetra"]
        if not blocks:
            raise ValueError("mesh has no tetra cells")
        return cls(mesh.points, np.concatenate(blocks))

    @property
    def num_cells(self):
        return len(self.tets)

    def finite_volume(self):
        """The FiniteVolumeGeometry of the mesh on one rank: faces in the order
        of ``face_cells``, every boundary face in one group "boundary" (tag 0)."""
        m, f, b = self.num_cells, len(self.face_cells), len(self.boundary_cells)
        between = self.centroids[self.face_cells[:, 1]] - self.centroids[self.face_cells[:, 0]]
        to_face = self.points[self.boundary_vertices].mean(axis=1) - self.centroids[self.boundary_cells]
        return FiniteVolumeGeometry(
            cell_ranges=np.array([0, m]), face_ranges=np.array([0, f]), rank=0, volumes=self.volumes,
            centroids=self.centroids, cell_numbers=np.arange(m), face_ids=np.arange(f), face_cells=self.face_cells, face_areas=self.face_areas,
            face_normals=self.face_normals, face_distances=np.abs(np.einsum("ij,ij->i", self.face_normals, between)),
            boundary_cells=self.boundary_cells, boundary_areas=self.boundary_areas,
            boundary_normals=self.boundary_normals,
            boundary_distances=np.abs(np.einsum("ij,ij->i", self.boundary_normals, to_face)),
            boundary_tags=np.zeros(b, dtype=np.int64), boundary_names={"boundary": 0})


def _area_normal(s):
    """Areas and (n, 3) unit normals from area vectors s (3, n)."""
    area = np.sqrt(_dot(s, s))
    return area, (s / area).T


def _dot(u, v):
    return u[0] * v[0] + u[1] * v[1] + u[2] * v[2]


def _cross(u, v):
    return np.stack([u[1] * v[2] - u[2] * v[1],
                     u[2] * v[0] - u[0] * v[2],
                     u[0] * v[1] - u[1] * v[0]])
