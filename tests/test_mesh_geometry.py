"""plugin.flow.mesh: the FiniteVolumeGeometry of unstructured meshes of every
cell type, against what the unit square and cube must give, and bad meshes."""

import meshio
import numpy
import pytest

from meshes import MESHES, gmsh_mesh, unit_mesh
from plugin.flow.mesh import MeshError, mesh_geometry, rank_geometry
from plugin.flow.partition import coordinate_bisection, graph_partition, locality_order, partition_quality


@pytest.fixture(params=MESHES, scope="module")
def geometry(request):
    kinds, jitter = MESHES[request.param]
    return mesh_geometry(unit_mesh(kinds, n=3, jitter=jitter))


def test_cells_fill_the_unit_box(geometry):
    g = geometry
    assert g.volumes.min() > 0
    assert g.volumes.sum() == pytest.approx(1.0, rel=1e-13)
    numpy.testing.assert_allclose(g.volumes @ g.centroids, 0.5, rtol=1e-13)


def test_every_cell_is_closed(geometry):
    """The outward vector areas of each cell's faces sum to zero (the divergence of a constant)."""
    g = geometry
    total = numpy.zeros((g.num_cells, g.dim))
    vectors = g.face_areas[:, None] * g.face_normals
    numpy.add.at(total, g.face_cells[:, 0], vectors)
    numpy.add.at(total, g.face_cells[:, 1], -vectors)
    numpy.add.at(total, g.boundary_cells, g.boundary_areas[:, None] * g.boundary_normals)
    assert abs(total).max() < 1e-13


def test_boundary_groups_keep_their_names_and_areas(geometry):
    g = geometry
    assert g.boundary_names == {"lid": 1, "wall": 2}
    lid = g.boundary_tags == 1
    assert g.boundary_areas[lid].sum() == pytest.approx(1.0, rel=1e-13)
    assert g.boundary_areas[~lid].sum() == pytest.approx(2 * g.dim - 1, rel=1e-13)
    numpy.testing.assert_allclose(g.boundary_normals[lid], numpy.eye(g.dim)[-1][None].repeat(lid.sum(), 0),
                                  atol=1e-13)


def test_face_normals_point_from_the_first_cell_to_the_second(geometry):
    g = geometry
    numpy.testing.assert_allclose(numpy.linalg.norm(g.face_normals, axis=1), 1.0, rtol=1e-14)
    between = g.centroids[g.face_cells[:, 1]] - g.centroids[g.face_cells[:, 0]]
    assert (numpy.einsum("ij,ij->i", g.face_normals, between) > 0).all()
    assert (g.face_distances > 0).all() and (g.boundary_distances > 0).all()


def test_an_inverted_cell_is_named():
    mesh = unit_mesh("tetra", n=2)
    mesh.cells[0].data[3] = mesh.cells[0].data[3][[0, 2, 1, 3]]
    with pytest.raises(MeshError, match="cell 3 .* is inverted or degenerate"):
        mesh_geometry(mesh)


def test_a_boundary_face_in_no_group_is_named():
    mesh = unit_mesh("quad", n=2)
    mesh.cells[1].data = mesh.cells[1].data[1:]
    mesh.cell_data["gmsh:physical"][1] = mesh.cell_data["gmsh:physical"][1][1:]
    with pytest.raises(MeshError, match=r"the boundary face with vertices \[.*\] .* is in no boundary group"):
        mesh_geometry(mesh)


def test_a_hanging_face_is_named():
    """A quadrilateral beside two half its height: their faces do not match,
    the mesh is not conforming, and the error names the big face and its cell."""
    points = numpy.array([[0, 0], [0.5, 0], [1, 0], [0, 1], [0.5, 1], [1, 1], [0.5, 0.5], [1, 0.5]], dtype=float)
    quads = numpy.array([[0, 1, 4, 3], [1, 2, 7, 6], [6, 7, 5, 4]])
    lines = numpy.array([[0, 1], [1, 2], [2, 7], [7, 5], [5, 4], [4, 3], [3, 0]])
    mesh = meshio.Mesh(points, [("quad", quads), ("line", lines)],
                       cell_data={"gmsh:physical": [numpy.zeros(3, dtype=int), numpy.full(7, 2)]},
                       field_data={"wall": numpy.array([2, 1])})
    with pytest.raises(MeshError, match=r"not conforming: the face with vertices \[1, 4\] of cell 0 meets the smaller "
                                        r"face with vertices \[(1, 6|4, 6)\]"):
        mesh_geometry(mesh)


def test_an_unsupported_cell_type_is_named():
    mesh = unit_mesh("triangle", n=2)
    mesh.cells[0].type = "quad8"
    with pytest.raises(MeshError, match="cells of type quad8 are not supported"):
        mesh_geometry(mesh)


@pytest.mark.parametrize("parts", [2, 3, 5])
def test_rank_geometries_cut_the_mesh_into_parts_that_hold_every_cell_and_face_once(parts):
    whole = mesh_geometry(unit_mesh(("quad", "triangle"), n=5, jitter=0.3))
    owner = coordinate_bisection(whole.centroids, parts)
    assert abs(numpy.bincount(owner, minlength=parts) - whole.num_cells / parts).max() <= 1
    pieces = [rank_geometry(whole, owner, rank) for rank in range(parts)]
    numpy.testing.assert_array_equal(numpy.sort(numpy.concatenate([g.cell_numbers for g in pieces])),
                                     numpy.arange(whole.num_cells))
    assert sum(g.num_faces for g in pieces) == whole.num_faces
    assert sum(g.boundary_cells.size for g in pieces) == whole.boundary_cells.size
    for g in pieces:
        own = (g.face_ids >= g.face_start) & (g.face_ids < g.face_start + g.num_faces)
        assert ((g.face_cells[own, 0] >= g.cell_start) & (g.face_cells[own, 0] < g.cell_start + g.num_cells)).all()
        assert own.sum() == g.num_faces
        assert g.volumes.sum() == pytest.approx(whole.volumes[owner == g.rank].sum(), rel=1e-14)


@pytest.mark.parametrize("kind, cell_type", [("triangles", "triangle6"), ("quads", "quad9"),
                                             ("tetrahedra", "tetra10")])
def test_second_order_cells_with_straight_sides_measure_as_first_order_ones(tmp_path, kind, cell_type):
    """gmsh's order-2 mesh of the unit square or cube puts the edge nodes of its
    straight edges at their midpoints: the same volumes and centroids as the
    order-1 mesh, cell by cell (a node in the wrong place would move them)."""
    first, second = (gmsh_mesh(tmp_path, kind, 0.3, order) for order in (1, 2))
    assert cell_type in {block.type for block in second.cells}
    g1, g2 = mesh_geometry(first), mesh_geometry(second)
    numpy.testing.assert_allclose(g2.volumes, g1.volumes, rtol=1e-12)
    numpy.testing.assert_allclose(g2.centroids, g1.centroids, rtol=0, atol=1e-13)
    numpy.testing.assert_allclose(g2.face_areas, g1.face_areas, rtol=1e-12)


def test_second_order_cells_follow_a_curved_wall(tmp_path):
    """The unit disk's area: O(h^2) short with straight edges, to the fourth
    order with quadratic ones; every cell still closed."""
    errors = [abs(mesh_geometry(gmsh_mesh(tmp_path, "disk", 0.3, order)).volumes.sum() - numpy.pi)
              for order in (1, 2)]
    assert errors[0] > 0.01 and errors[1] < errors[0] / 100
    g = mesh_geometry(gmsh_mesh(tmp_path, "disk", 0.3, 2))
    total = numpy.zeros((g.num_cells, 2))
    vectors = g.face_areas[:, None] * g.face_normals
    numpy.add.at(total, g.face_cells[:, 0], vectors)
    numpy.add.at(total, g.face_cells[:, 1], -vectors)
    numpy.add.at(total, g.boundary_cells, g.boundary_areas[:, None] * g.boundary_normals)
    assert abs(total).max() < 1e-13


@pytest.mark.parametrize("parts", [2, 3, 4])
def test_metis_parts_are_balanced_and_their_cut_and_halos_counted(parts):
    whole = mesh_geometry(unit_mesh("tetra", n=4, jitter=0.2))
    owner = graph_partition(whole.face_cells, whole.num_cells, parts)
    sizes = numpy.bincount(owner, minlength=parts)
    assert sizes.min() > 0 and sizes.max() <= 1.05 * whole.num_cells / parts + 1
    cut, halo = partition_quality(whole.face_cells, owner)
    crossing = owner[whole.face_cells[:, 0]] != owner[whole.face_cells[:, 1]]
    assert cut == crossing.sum() > 0
    for part in range(parts):
        neighbours = {int(c) for i, j in whole.face_cells[crossing] for c, o in ((j, i), (i, j)) if owner[o] == part}
        assert halo[part] == len(neighbours)


def test_reverse_cuthill_mckee_brings_each_rows_columns_near_it():
    """Cells in a random order: the Laplacian's bandwidth on each part is far
    smaller in locality_order's numbering."""
    rng = numpy.random.default_rng(3)
    mesh = unit_mesh("tetra", n=5, jitter=0.2)
    mesh.cells[0].data = mesh.cells[0].data[rng.permutation(len(mesh.cells[0].data))]
    whole = mesh_geometry(mesh)
    owner = graph_partition(whole.face_cells, whole.num_cells, 2)
    position = locality_order(whole.face_cells, owner)

    def bandwidth(number):
        i, j = number[whole.face_cells[:, 0]], number[whole.face_cells[:, 1]]
        inside = owner[whole.face_cells[:, 0]] == owner[whole.face_cells[:, 1]]
        return abs(i - j)[inside].max()

    for part in range(2):
        cells = numpy.flatnonzero(owner == part)
        numpy.testing.assert_array_equal(numpy.sort(position[cells]), numpy.arange(len(cells)))
    assert bandwidth(position) < bandwidth(numpy.arange(whole.num_cells)) / 4


def test_a_face_of_three_cells_is_named():
    """Three tetrahedra on one triangle: not a conforming mesh."""
    points = numpy.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0.2, 0.2, 1], [0.3, 0.1, 1.0]])
    mesh = meshio.Mesh(points, [("tetra", numpy.array([[0, 1, 2, 3], [0, 1, 2, 4], [0, 1, 2, 5]]))])
    with pytest.raises(MeshError, match=r"the face with vertices \[0, 1, 2\] belongs to more than two cells"):
        mesh_geometry(mesh, ungrouped="boundary")


def test_ungrouped_boundary_faces_form_one_group_when_asked():
    cube = unit_mesh("hexahedron", n=2)
    bare = meshio.Mesh(cube.points, cube.cells[:1])
    with pytest.raises(MeshError, match="carry no groups|is in no boundary group"):
        mesh_geometry(bare)
    g = mesh_geometry(bare, ungrouped="boundary")
    assert g.boundary_names == {"boundary": 0} and (g.boundary_tags == 0).all()
    assert g.boundary_areas.sum() == pytest.approx(6.0)
