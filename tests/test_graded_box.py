"""Graded boxes: the geometry of a DMDA box whose cells have given widths
along each axis (plugin.flow.box.partition_geometry's ``widths``) against
the unstructured path's geometry of the same cells written as a mesh, and
its ranks' parts against the whole; the tanh law of the channel."""

import meshio
import numpy
import pytest

from plugin.flow.box import BoxPartition, box_geometry, partition_geometry, tanh_widths
from plugin.flow.mesh import mesh_geometry

WIDTHS = [numpy.array([0.3, 0.5, 0.2, 0.6, 0.4]), tanh_widths(6, 2.0, 1.8)]


def quad_mesh(widths, origin):
    """The 2D box of cells ``widths`` as a meshio mesh of quadrilaterals with its sides as groups."""
    x, y = (origin[d] + numpy.concatenate(([0.0], numpy.cumsum(w))) for d, w in enumerate(widths))
    nx, ny = len(x), len(y)
    points = numpy.array([(x[i], y[j]) for j in range(ny) for i in range(nx)])
    node = numpy.arange(nx * ny).reshape(ny, nx)
    quads = numpy.array([(node[j, i], node[j, i + 1], node[j + 1, i + 1], node[j + 1, i])
                         for j in range(ny - 1) for i in range(nx - 1)])
    sides = {"xmin": node[:, 0], "xmax": node[:, -1], "ymin": node[0, :], "ymax": node[-1, :]}
    lines, tags = [], []
    for tag, (name, nodes) in enumerate(sides.items(), start=1):
        lines += [(a, b) for a, b in zip(nodes[:-1], nodes[1:])]
        tags += [tag] * (len(nodes) - 1)
    return meshio.Mesh(points, [("quad", quads), ("line", numpy.array(lines))],
                       cell_data={"gmsh:physical": [numpy.zeros(len(quads), dtype=int), numpy.array(tags)]},
                       field_data={name: numpy.array([tag, 1]) for tag, name in enumerate(sides, start=1)})


def keyed(g):
    """Cells by rounded centroid: (volumes, {face: (area, distance, weight of the face's lower-x/y cell)},
    {(cell, outward normal): (area, distance)})."""
    key = [tuple(numpy.round(c, 9)) for c in g.centroids]
    volumes = dict(zip(key, g.volumes))
    faces = {}
    for (a, b), area, distance, weight in zip(g.face_cells, g.face_areas, g.face_distances, g.face_weights):
        (first, w), (second, _) = sorted([(key[a], weight), (key[b], 1 - weight)])
        faces[first, second] = (area, distance, w)
    boundary = {(key[c], tuple(numpy.round(n, 9) + 0.0)): (area, distance)
                for c, n, area, distance in zip(g.boundary_cells, g.boundary_normals, g.boundary_areas,
                                                g.boundary_distances)}
    return volumes, faces, boundary


def test_a_graded_box_is_the_mesh_of_its_cells():
    origin = (0.5, -1.0)
    box = box_geometry([len(w) for w in WIDTHS], [w.sum() for w in WIDTHS], (False, False), origin, WIDTHS)
    mesh = mesh_geometry(quad_mesh(WIDTHS, origin))
    for got, expected in zip(keyed(box), keyed(mesh)):
        assert got.keys() == expected.keys()
        for k in expected:
            numpy.testing.assert_allclose(got[k], expected[k], rtol=1e-12, atol=1e-14, err_msg=str(k))
    centres = {tuple(numpy.round(c, 9)) for c in box.boundary_centroids}
    assert centres == {tuple(numpy.round(c, 9)) for c in mesh.boundary_centroids}


@pytest.mark.parametrize("periodic", [(False, False, False), (True, False, True)])
def test_the_ranks_parts_of_a_graded_box_are_the_wholes(periodic):
    widths = [numpy.array([0.3, 0.5, 0.2, 0.6]), tanh_widths(5, 2.0, 2.0), numpy.array([1.0, 0.5, 0.25])]
    shape, lengths = [len(w) for w in widths], [w.sum() for w in widths]
    whole = partition_geometry(BoxPartition(shape, [[n] for n in shape], periodic), lengths, 0, None, widths)
    parts = BoxPartition(shape, [[2, 2], [3, 2], [1, 2]], periodic)
    natural = whole.cell_numbers
    for rank in range(parts.size):
        g = partition_geometry(parts, lengths, rank, None, widths)
        at = numpy.searchsorted(natural, g.cell_numbers)
        numpy.testing.assert_allclose(g.volumes, whole.volumes[at], rtol=1e-14)
        numpy.testing.assert_allclose(g.centroids, whole.centroids[at], rtol=1e-14)
        by_pair = {}
        for (a, b), area, distance, weight in zip(whole.face_cells, whole.face_areas, whole.face_distances,
                                                  whole.face_weights):
            by_pair[natural[a], natural[b]] = (area, distance, weight)
        number = dict(zip(range(parts.cell_ranges[rank], parts.cell_ranges[rank + 1]), g.cell_numbers))
        for (a, b), area, distance, weight in zip(g.face_cells, g.face_areas, g.face_distances, g.face_weights):
            a, b = (number.get(c, parts_natural(parts, c)) for c in (a, b))
            numpy.testing.assert_allclose((area, distance, weight), by_pair[a, b], rtol=1e-14)


def parts_natural(parts, cell):
    """The natural number of a cell given by its number in the ranks' numbering."""
    rank = numpy.searchsorted(parts.cell_ranges, cell, side="right") - 1
    ijk = parts.block(rank)[:, cell - parts.cell_ranges[rank]]
    return int(sum(ijk[d] * numpy.prod(parts.shape[:d]) for d in range(parts.dim)))


def test_the_tanh_law_clusters_cells_at_both_walls():
    w = tanh_widths(64, 2.0, 2.5)
    assert w.sum() == pytest.approx(2.0, rel=1e-14) and (w > 0).all()
    numpy.testing.assert_allclose(w, w[::-1], rtol=1e-12)  # symmetric about the centre
    assert w[0] < w[31] / 10  # fine at the wall, coarse at the centre
    numpy.testing.assert_allclose(tanh_widths(8, 2.0, 0.0), 0.25)


def test_a_graded_channel_recovers_poiseuille_flow():
    """-flow_box_grading on a DMDA channel: the DMDA's coordinates are the
    graded cells' centres, the pressure takes gpuamg's aggregation, and the
    flow at t = 1 is the parabola closer than on equal cells."""
    import plugin  # noqa: F401
    from gpu_mats.backend import to_host
    from plugin.flow.boundary import Inflow, Outflow
    from test_flow_solver import make_solver

    inflow = Inflow(lambda x, t: numpy.column_stack([4 * x[:, 1] * (1 - x[:, 1]), 0 * x[:, 1]]))
    errors = {}
    for beta in (0.0, 2.0):
        options = {"flow_box_grading": beta, "flow_max_steps": 4000}  # to t = 1: the fine wall cells cut dt
        da, solver = make_solver((12, 16), (False, False), 0.05, options, walls={"xmin": inflow, "xmax": Outflow()},
                                 lengths=(2.0, 1.0))
        state = solver.run(solver.initial_state())
        assert state.t == pytest.approx(1.0)
        y = solver.geometry.centroids[:, 1]
        errors[beta] = abs(to_host(solver.xp, state.u)[0] - 4 * y * (1 - y)).max()
        if beta:
            numpy.testing.assert_allclose(da.getCoordinates().getArray().reshape(-1, 2), solver.geometry.centroids)
            assert solver.multigrid is None and solver.pressure_ksp.getPC().getType() != "boxfft"
            widths = numpy.unique(numpy.round(solver.geometry.volumes, 12))
            assert widths.size == 8  # 16 rows of cells, symmetric
    assert errors[2.0] < errors[0.0] < 0.02, errors  # the cells clustered where the profile curves most


def test_grading_is_refused_where_there_is_no_box_or_no_wall():
    from petsc4py import PETSc

    from meshes import unit_mesh
    from petsc_ext.options import OptionError, option_defaults
    from plugin.flow.boundary import Wall
    from plugin.flow.mesh import mesh_geometry
    from plugin.flow.solver import FlowSolver
    from test_flow_solver import make_solver

    g = mesh_geometry(unit_mesh(("quad",), n=4))
    with option_defaults("", {"flow_box_grading": 1.5}), pytest.raises(OptionError, match="grades the cells of a DMDA"):
        FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"lid": Wall((1.0, 0.0)), "wall": Wall()})
    with pytest.raises(OptionError, match="clusters cells at the walls of the y axis: this box has none"):
        make_solver((6, 6), (False, True), 0.01, {"flow_box_grading": 1.5})


@pytest.mark.mpi
def test_ranks_agree_with_one_rank_on_a_graded_box():
    from mpi4py import MPI
    from petsc4py import PETSc

    from plugin.flow.boundary import Wall
    from plugin.flow.box import dmda_partition
    from plugin.flow.output import natural_field
    from test_flow_solver import make_solver

    fields = []
    for comm in (PETSc.COMM_WORLD, PETSc.COMM_SELF):
        da, solver = make_solver((9, 14), (True, False), 0.02, {"flow_box_grading": 2.0, "flow_max_steps": 6,
                                                               "pressure_ksp_rtol": 1e-12},
                                 comm=comm, walls={"ymax": Wall((1.0, 0.0))})
        x, y = solver.geometry.centroids.T
        state = solver.run(solver.initial_state(numpy.array([numpy.sin(2 * numpy.pi * x) * y, 0 * y])))
        numpy.testing.assert_allclose(da.getCoordinates().getArray().reshape(-1, 2), solver.geometry.centroids)
        fields.append(natural_field(comm.tompi4py(), dmda_partition(da), solver.xp, state.u))
    if MPI.COMM_WORLD.Get_rank() == 0:
        numpy.testing.assert_allclose(fields[0], fields[1], rtol=0, atol=1e-9)
