"""Periodic pairs of boundary groups on meshes (plugin.flow.mesh's
periodic_identity): the faces of the two groups become interior faces
between the cells on either side, a period apart, so that a mesh of a box
with periodic sides is the DMDA box with periodic axes: the same faces and
the same flow. The faults: a group missing, groups that are not
translations of each other, a period one cell across."""

import re

import meshio
import numpy
import pytest
from petsc4py import PETSc

import plugin  # noqa: F401
from gpu_mats.backend import to_host
from meshes import sided, unit_mesh
from petsc_ext.options import option_defaults
from plugin.flow.boundary import Wall
from plugin.flow.mesh import MeshError, mesh_geometry
from plugin.flow.solver import FlowSolver
from test_flow_solver import make_solver

def test_a_periodic_pair_joins_its_faces_into_interior_faces_a_period_apart():
    mesh = sided(unit_mesh("hexahedron", n=4), (1.0, 1.0, 2.0))
    plain, joined = mesh_geometry(mesh), mesh_geometry(mesh, periodic=[("zmin", "zmax")])
    assert len(joined.face_cells) == len(plain.face_cells) + 16
    assert set(joined.boundary_names) == {"xmin", "xmax", "ymin", "ymax"}
    assert len(joined.boundary_tags) == len(plain.boundary_tags) - 32
    across = numpy.flatnonzero(abs(joined.centroids[joined.face_cells[:, 1], 2] -
                                   joined.centroids[joined.face_cells[:, 0], 2]) > 1.0)  # cells 1.5 apart in z
    assert len(across) == 16
    # each joins a cell of the first layer and one of the last, as neighbours half a cell from z = 0 or 2
    numpy.testing.assert_allclose(abs(joined.face_offsets[across]), [[0.0, 0.0, 0.5]] * 16, atol=1e-14)
    numpy.testing.assert_allclose(joined.face_distances[across], 0.5, atol=1e-14)
    numpy.testing.assert_allclose(joined.face_weights[across], 0.5, atol=1e-14)
    numpy.testing.assert_allclose(joined.face_areas[across], 1.0 / 16, atol=1e-15)


@pytest.mark.parametrize("kind", ["hexahedron", "wedge"])
def test_a_doubly_periodic_mesh_of_a_channel_is_the_dmda_channel(kind):
    """A box periodic along x and z, walls across y, driven by -dP/dx: on a
    mesh of hexahedra (or of prisms, which pair into the same cells' faces
    only where the box's are joined, so against the hexahedra) with its x
    and z sides joined, the flow of the DMDA box with x and z periodic."""
    n, lengths, nu = 4, (2.0, 1.0, 1.0), 0.05
    options = {"flow_max_steps": 6, "flow_dt": 0.01, "pressure_ksp_rtol": 1e-12, "momentum_ksp_rtol": 1e-12,
               "flow_forcing": "pressure_gradient", "flow_forcing_value": 1.0}

    def start(x):
        return numpy.array([x[:, 1] * (1 - x[:, 1]) * (1 + 0.3 * numpy.sin(numpy.pi * x[:, 0])),
                            0.1 * numpy.sin(2 * numpy.pi * x[:, 2]) * numpy.sin(numpy.pi * x[:, 1]),
                            0.1 * numpy.cos(numpy.pi * x[:, 0]) * x[:, 1] * (1 - x[:, 1])])

    def flow(solver):
        state = solver.run(solver.initial_state(start(solver.geometry.centroids), project=True))
        x = solver.geometry.centroids
        order = numpy.lexsort((x[:, 0].round(9), x[:, 1].round(9), x[:, 2].round(9)))
        return x[order], to_host(solver.xp, state.u)[:, order]

    _, box = make_solver((n, n, n), (True, False, True), nu, options, lengths=lengths)
    box_x, box_u = flow(box)
    g = mesh_geometry(sided(unit_mesh(kind, n=n), lengths), periodic=[("xmin", "xmax"), ("zmin", "zmax")])
    with option_defaults("", options):
        solver = FlowSolver(g, PETSc.COMM_SELF, "gpusell", nu, {"ymin": Wall(), "ymax": Wall()})
    mesh_x, mesh_u = flow(solver)
    if kind == "hexahedron":
        numpy.testing.assert_allclose(mesh_x, box_x, atol=1e-14)
        numpy.testing.assert_allclose(mesh_u, box_u, rtol=0, atol=1e-9 * abs(box_u).max())
    else:  # two prisms a box: their mean flow along x is the box's to the splitting's error
        assert abs(mesh_u[0].mean() / box_u[0].mean() - 1) < 0.02


def test_periodic_groups_that_do_not_match_are_refused_with_the_node():
    mesh = sided(unit_mesh("hexahedron", n=4, jitter=0.2))  # interior nodes moved: the sides' stay in place
    mesh_geometry(mesh, periodic=[("xmin", "xmax")])
    moved = mesh.points.copy()
    on_xmax = numpy.flatnonzero(numpy.isclose(moved[:, 0], 1.0) & (moved[:, 1] > 0) & (moved[:, 1] < 1)
                                & (moved[:, 2] > 0) & (moved[:, 2] < 1))
    moved[on_xmax[0], 1] += 0.05
    bad = meshio.Mesh(moved, mesh.cells, cell_data=mesh.cell_data, field_data=mesh.field_data)
    with pytest.raises(MeshError, match=r"node \d+ of group xmin at .* has no image in group xmax"):
        mesh_geometry(bad, periodic=[("xmin", "xmax")])
    with pytest.raises(MeshError, match=r"no boundary group 'front' to make periodic \(groups: xmax, xmin"):
        mesh_geometry(mesh, periodic=[("front", "back")])
    with pytest.raises(MeshError, match=r"node \d+ of group xmin at .* has no image in group ymin"):
        mesh_geometry(mesh, periodic=[("xmin", "ymin")])


def test_a_period_one_cell_across_is_refused():
    mesh = sided(unit_mesh("hexahedron", n=1))
    with pytest.raises(MeshError, match="cell 0 touches both groups of a periodic pair"):
        mesh_geometry(mesh, periodic=[("zmin", "zmax")])


def test_the_cavity_demo_runs_on_a_mesh_with_periodic_groups(tmp_path):
    """-flow_mesh_periodic: a lid-driven layer, periodic along x and z, on a
    mesh of hexahedra, runs to its end (its flow is the DMDA box's, above);
    a pair that is no pair is refused, naming the option; without the pairs
    the groups want conditions."""
    import subprocess
    import sys

    from test_demo import ROOT, _refused, run_script

    path = str(tmp_path / "layer.msh")
    sided(unit_mesh("hexahedron", n=4), names=("xmin", "xmax", "wall", "lid", "zmin", "zmax")).write(
        path, file_format="gmsh22", binary=False)
    out = run_script("cavity.py", "-flow_mesh", path, "-flow_mesh_periodic", "xmin:xmax,zmin:zmax", "-flow_re", "10",
                     "-flow_t_end", "0.5", "-dm_mat_type", "aij")
    assert re.search(r"flow: \d+ steps of 64 cells", out) and "64 cells (hexahedron)" in out
    assert "-flow_mesh_periodic xmin: give pairs" in _refused("cavity.py", "-flow_mesh", path, "-flow_mesh_periodic",
                                                              "xmin")
    assert "no boundary group 'front'" in _refused("cavity.py", "-flow_mesh", path, "-flow_mesh_periodic",
                                                   "front:back")
    unjoined = subprocess.run([sys.executable, f"{ROOT}/demos/cavity.py", "-flow_mesh", path, "-flow_t_end", "0.1"],
                              capture_output=True, text=True, cwd=ROOT)
    assert unjoined.returncode != 0 and "no boundary condition for the boundary groups xmin" in unjoined.stderr
