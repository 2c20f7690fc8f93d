"""Cell-centred finite-volume geometry of unstructured tetrahedral meshes.

Everything is vectorised NumPy so that meshes of millions of cells are
processed in seconds; nothing here imports PETSc, so the geometry and the
assembled CSR arrays can be built and tested on machines without it.
"""

import basix
import numpy as np

# Vertex triples of the four facets of the reference tetrahedron (facet i is
# opposite vertex i); taken from basix so the numbering matches FEniCS.
_TET_FACETS = np.asarray(basix.topology(basix.CellType.tetrahedron)[2])


class TetGeometry:
    """Volumes, centroids and faces of a conforming tetrahedral mesh.

    Attributes (M cells, F interior faces, B boundary faces):
      volumes (M,), centroids (M, 3);
      face_cells (F, 2) with k < j in each row, face_areas (F,),
      face_normals (F, 3) unit, pointing from cell k to cell j;
      boundary_cells (B,), boundary_vertices (B, 3), boundary_areas (B,),
      boundary_normals (B, 3) unit, pointing out of the domain.
    """

    def __init__(self, points, tets):
        self.points = np.ascontiguousarray(points, dtype=np.float64)
        self.tets = np.ascontiguousarray(tets, dtype=np.int64)
        x = self.points[self.tets]
        e = x[:, 1:] - x[:, :1]
        self.volumes = np.abs(np.einsum("ij,ij->i", e[:, 0], np.cross(e[:, 1], e[:, 2]))) / 6
        self.centroids = x.mean(axis=1)

        # A face shared by two cells appears as the same sorted vertex triple
        # in both; after sorting all triples, such pairs are adjacent.
        tri = np.sort(self.tets[:, _TET_FACETS], axis=2).reshape(-1, 3)
        order = np.lexsort(tri.T[::-1])
        tri = tri[order]
        cell = order // 4
        same = np.all(tri[1:] == tri[:-1], axis=1)
        if np.any(same[1:] & same[:-1]):
            raise ValueError("a face is shared by more than two cells")
        first = np.flatnonzero(same)
        single = np.ones(len(tri), dtype=bool)
        single[first] = single[first + 1] = False

        self.face_cells = np.sort(np.stack([cell[first], cell[first + 1]], axis=1), axis=1)
        self.face_areas, self.face_normals = self._oriented_faces(
            tri[first], self.centroids[self.face_cells[:, 1]] - self.centroids[self.face_cells[:, 0]])
        self.boundary_cells = cell[single]
        self.boundary_vertices = tri[single]
        outward = self.points[self.boundary_vertices].mean(axis=1) - self.centroids[self.boundary_cells]
        self.boundary_areas, self.boundary_normals = self._oriented_faces(self.boundary_vertices, outward)

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

    def _oriented_faces(self, tri, direction):
        """Areas and unit normals of triangles, normals flipped to agree with `direction`.

        Sorting the vertex triples destroyed their orientation, so the sign
        is recovered from a vector known to cross the face the right way.
        """
        p = self.points[tri]
        c = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
        norm = np.linalg.norm(c, axis=1)
        sign = np.sign(np.einsum("ij,ij->i", c, direction))
        return norm / 2, c * (sign / norm)[:, None]


def two_point_laplacian(geom):
    """CSR arrays (indptr int64, indices int32, data float64) of the SPD
    two-point-flux Neumann Laplacian (the negated Eq. 1.7 operator).

    Face weights are A_kj / |n_kj . v_kj|; boundary faces add nothing
    (homogeneous Neumann), so the constant vector spans the null space.
    Columns are ascending within each row.
    """
    k, j = geom.face_cells.T
    v = geom.centroids[j] - geom.centroids[k]
    w = geom.face_areas / np.abs(np.einsum("ij,ij->i", geom.face_normals, v))
    m = geom.num_cells
    diag = np.arange(m)
    rows = np.concatenate([k, j, diag])
    cols = np.concatenate([j, k, diag])
    vals = np.concatenate([-w, -w, np.bincount(k, w, m) + np.bincount(j, w, m)])
    order = np.argsort(rows * m + cols)
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    return indptr, cols[order].astype(np.int32), vals[order]
