import itertools

import meshio
import numpy as np
import pytest

from plugin.flow.operators import compact_laplacian
from plugin.fv_geometry import TetGeometry


def cube_mesh(n, jitter=0.0, seed=0):
    """Unit cube, n^3 hexes each split into the 6 Kuhn tetrahedra (conforming)."""
    g = np.linspace(0.0, 1.0, n + 1)
    points = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    interior = np.all((points > 0) & (points < 1), axis=1)
    rng = np.random.default_rng(seed)
    points[interior] += rng.uniform(-jitter, jitter, (interior.sum(), 3)) / n
    stride = np.array([(n + 1) ** 2, n + 1, 1])
    cells = np.stack(np.meshgrid(*[np.arange(n)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    corners = cells @ stride
    tets = []
    for perm in itertools.permutations(range(3)):
        steps = np.cumsum([0] + [stride[a] for a in perm])
        tets.append(corners[:, None] + steps)
    return points, np.concatenate(tets)


def laplacian(geom):
    """The SPD Neumann Laplacian -L of the mesh's FiniteVolumeGeometry (scipy CSR)."""
    return -compact_laplacian(geom.finite_volume())


@pytest.fixture(params=[0.0, 0.1], ids=["structured", "perturbed"])
def geom(request):
    return TetGeometry(*cube_mesh(4, jitter=request.param))


def test_volume_and_boundary_area(geom):
    assert geom.volumes.sum() == pytest.approx(1.0, rel=1e-12)
    assert np.all(geom.volumes > 0)
    assert geom.boundary_areas.sum() == pytest.approx(6.0, rel=1e-12)
    # Outward normals of the cube's faces are the coordinate axes.
    assert np.allclose(np.abs(geom.boundary_normals).max(axis=1), 1.0)
    mid = geom.points[geom.boundary_vertices].mean(axis=1)
    assert np.all(np.einsum("ij,ij->i", geom.boundary_normals, mid - 0.5) > 0)


def test_normals_point_from_k_to_j(geom):
    k, j = geom.face_cells.T
    v = geom.centroids[j] - geom.centroids[k]
    assert np.all(np.einsum("ij,ij->i", geom.face_normals, v) > 0)


def test_structured_counts():
    n = 3
    geom = TetGeometry(*cube_mesh(n))
    assert np.allclose(geom.volumes, 1 / (6 * n**3))
    assert len(geom.boundary_cells) == 12 * n**2
    assert len(geom.face_cells) == (4 * 6 * n**3 - 12 * n**2) // 2


def test_faces_shared_by_two_cells(geom):
    k, j = geom.face_cells.T
    assert np.all(k < j)
    assert len(np.unique(geom.face_cells, axis=0)) == len(k)
    per_cell = np.bincount(geom.face_cells.ravel(), minlength=geom.num_cells)
    per_cell += np.bincount(geom.boundary_cells, minlength=geom.num_cells)
    assert np.all(per_cell == 4)


def test_cells_are_closed(geom):
    """sum of A n over each cell's outward-oriented faces vanishes (divergence theorem)."""
    an = geom.face_areas[:, None] * geom.face_normals
    bn = geom.boundary_areas[:, None] * geom.boundary_normals
    m = geom.num_cells
    total = np.stack([
        np.bincount(geom.face_cells[:, 0], an[:, d], m)
        - np.bincount(geom.face_cells[:, 1], an[:, d], m)
        + np.bincount(geom.boundary_cells, bn[:, d], m)
        for d in range(3)
    ], axis=1)
    assert np.abs(total).max() < 1e-14
    assert np.allclose(np.linalg.norm(geom.face_normals, axis=1), 1.0)


def test_laplacian_spd_with_constant_null_space(geom):
    L = laplacian(geom)
    assert L.data.dtype == np.float64 and L.shape == (geom.num_cells,) * 2
    for row in np.split(L.indices, L.indptr[1:-1]):
        assert np.all(np.diff(row) > 0)
    assert L.nnz == geom.num_cells + 2 * len(geom.face_cells)
    assert abs(L - L.T).max() == 0.0
    assert np.abs(L @ np.ones(geom.num_cells)).max() < 1e-12 * L.diagonal().max()
    assert np.all(L.diagonal() > 0)
    x = np.random.default_rng(1).standard_normal((geom.num_cells, 5))
    x -= x.mean(axis=0)
    assert np.all(np.einsum("ij,ij->j", x, L @ x) > 0)


def test_independent_of_local_vertex_order(geom):
    """Reordering each tet's vertices flips orientations but changes no geometry."""
    rng = np.random.default_rng(2)
    perm = np.argsort(rng.random(geom.tets.shape), axis=1)
    other = TetGeometry(geom.points, np.take_along_axis(geom.tets, perm, axis=1))
    assert np.allclose(other.volumes, geom.volumes)
    assert np.allclose(other.centroids, geom.centroids)
    assert abs(laplacian(other) - laplacian(geom)).max() < 1e-13


def test_from_meshio_and_nonconforming():
    points, tets = cube_mesh(2)
    blocks = [("tetra", tets[:10]), ("triangle", tets[:3, :3]), ("tetra", tets[10:])]
    mesh = meshio.Mesh(points, blocks)
    geom = TetGeometry.from_meshio(mesh)
    assert geom.num_cells == len(tets)
    assert geom.volumes.sum() == pytest.approx(1.0)
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, -1], [1, 1, 1.0]])
    with pytest.raises(ValueError):
        TetGeometry(pts, [[0, 1, 2, 3], [0, 1, 2, 4], [0, 1, 2, 5]])
