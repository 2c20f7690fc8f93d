"""plugin.flow.distribution: a mesh file read on rank 0 and distributed
through DMPlex gives each rank the geometry that the one-rank geometry of
the whole mesh (plugin.flow.mesh.mesh_geometry) has for its cells and faces.
Run on 1 rank and, under mpiexec, on 2 and 3."""

import os

import meshio
import numpy
import pytest
from meshes import MESHES, gmsh_mesh, shared_file, sided, unit_mesh
from petsc4py import PETSc

from plugin.flow.distribution import distribute
from plugin.flow.mesh import MeshError, mesh_geometry
from plugin.flow.partition import PARTITIONERS, partition_quality

pytestmark = pytest.mark.mpi


def gathered(comm, array):
    return numpy.concatenate(comm.allgather(numpy.asarray(array)))


@pytest.mark.parametrize("partitioner", sorted(set(PARTITIONERS) - {"columns"}))  # columns: tests/test_extruded.py
@pytest.mark.parametrize("kind", [*MESHES, "curved-disk", "hexahedra, periodic along x and z"])
def test_each_rank_gets_the_whole_meshs_geometry_of_its_cells_and_faces(tmp_path, kind, partitioner):
    comm = PETSc.COMM_WORLD.tompi4py()
    periodic = ()
    if kind == "curved-disk":  # second-order triangles: each rank measures its cells curved
        path, _ = shared_file(tmp_path, lambda: gmsh_mesh(tmp_path, "disk", 0.4, order=2), "disk.msh")
    elif kind.startswith("hexahedra, periodic"):  # the joined faces' cells neighbours in the partition and overlap
        periodic = (("xmin", "xmax"), ("zmin", "zmax"))
        path, _ = shared_file(tmp_path, lambda: sided(unit_mesh("hexahedron", n=3, jitter=0.25)), "periodic.msh")
    else:
        cells, jitter = MESHES[kind]
        path, _ = shared_file(tmp_path, lambda: unit_mesh(cells, n=3, jitter=jitter), f"{kind}.msh")
    whole = mesh_geometry(meshio.read(path), periodic=periodic)
    parts = distribute(path, comm, partitioner, periodic)
    g = parts.geometry

    # Cells: every cell once, numbered rank after rank, measured as in the whole mesh.
    natural = gathered(comm, g.cell_numbers)  # global number -> number in the file
    numpy.testing.assert_array_equal(numpy.sort(natural), numpy.arange(whole.num_cells))
    assert g.cell_ranges[comm.rank + 1] - g.cell_ranges[comm.rank] == g.num_cells
    numpy.testing.assert_allclose(g.volumes, whole.volumes[g.cell_numbers], rtol=1e-12)
    numpy.testing.assert_allclose(g.centroids, whole.centroids[g.cell_numbers], rtol=0, atol=1e-13)

    # Faces: each once among the owners, cell 0 the one of lower number, as the whole mesh measures them.
    mine = (g.face_ids >= g.face_start) & (g.face_ids < g.face_start + g.num_faces)
    assert mine.sum() == g.num_faces
    assert ((g.face_cells[mine, 0] >= g.cell_start) & (g.face_cells[mine, 0] < g.cell_start + g.num_cells)).all()
    assert (g.face_cells[:, 0] < g.face_cells[:, 1]).all()
    touches = ((g.face_cells >= g.cell_start) & (g.face_cells < g.cell_start + g.num_cells)).any(axis=1)
    assert touches.all()
    numpy.testing.assert_array_equal(numpy.sort(gathered(comm, g.face_ids[mine])), numpy.arange(whole.num_faces))
    index = {tuple(pair): f for f, pair in enumerate(whole.face_cells.tolist())}
    for f, (a, b) in enumerate(natural[g.face_cells].tolist()):
        same = (a, b) in index
        w = index[(a, b) if same else (b, a)]
        assert g.face_areas[f] == pytest.approx(whole.face_areas[w], rel=1e-12)
        numpy.testing.assert_allclose(g.face_normals[f], whole.face_normals[w] * (1 if same else -1), atol=1e-12)
        numpy.testing.assert_allclose(g.face_offsets[f], whole.face_offsets[w] * (1 if same else -1), atol=1e-12)
    # A face between two ranks has the one number its owner gave it.
    owned = {tuple(p): i for p, i in zip(gathered(comm, g.face_cells[mine]).reshape(-1, 2).tolist(),
                                         gathered(comm, g.face_ids[mine]).tolist(), strict=True)}
    assert all(owned[tuple(p)] == i for p, i in zip(g.face_cells.tolist(), g.face_ids.tolist(), strict=True))

    # Boundary faces of the rank's cells, with their groups.
    assert comm.allreduce(len(g.boundary_cells)) == len(whole.boundary_cells)
    for name, tag in whole.boundary_names.items():
        assert g.boundary_names[name] == tag
        area = comm.allreduce(g.boundary_areas[g.boundary_tags == tag].sum())
        assert area == pytest.approx(whole.boundary_areas[whole.boundary_tags == tag].sum(), rel=1e-12)
    assert ((g.boundary_cells >= g.cell_start) & (g.boundary_cells < g.cell_start + g.num_cells)).all()
    numpy.testing.assert_array_equal(g.boundary_counts[comm.rank], numpy.bincount(g.boundary_tags,
                                                                                 minlength=g.boundary_counts.shape[1]))

    # The partition's cost as reported: faces cut and halo cells per rank.
    owner = numpy.empty(whole.num_cells, dtype=numpy.int64)
    owner[natural] = numpy.searchsorted(g.cell_ranges, numpy.arange(whole.num_cells), side="right") - 1
    assert (parts.faces_cut, parts.halo) == partition_quality(whole.face_cells, owner)
    assert (parts.whole is None) == (comm.rank != 0)


def test_an_inverted_cell_is_an_error_on_every_rank_naming_its_number_in_the_file(tmp_path):
    comm = PETSc.COMM_WORLD.tompi4py()

    def inverted():
        mesh = unit_mesh("tetra", n=3, jitter=0.1)
        mesh.cells[0].data[40] = mesh.cells[0].data[40][[1, 0, 2, 3]]
        return mesh

    path, _ = shared_file(tmp_path, inverted, "inverted.msh")
    with pytest.raises(MeshError, match=r"cell 40 \(tetrahedron, .*\) is inverted or degenerate"):
        distribute(path, comm)


def test_a_missing_file_is_an_error_on_every_rank(tmp_path):
    comm = PETSc.COMM_WORLD.tompi4py()
    with pytest.raises(MeshError, match="cannot read the mesh .*nowhere.msh"):
        distribute(os.path.join(str(tmp_path), "nowhere.msh"), comm)
