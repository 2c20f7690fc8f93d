"""What a user can get wrong, each answered by one clear error (on every
rank, never a rank left waiting) or by a run: meshes without cells, with a
repeated or non-finite node, fewer cells than ranks, a single cell; boundary
values that are not finite; a closed domain with a net inflow; checkpoints
holding NaN or written with another diffusion; gpuamg coarsened into a
singular matrix's null space; failures on rank 0 of work done there."""

import os
import subprocess
import sys

import meshio
import numpy
import pytest
import scipy.sparse
from mpi4py import MPI
from petsc4py import PETSc

import plugin  # noqa: F401
from conftest import krylov_solve
from petsc_ext.options import OptionError, option_defaults
from plugin.flow.boundary import BoundaryError, Inflow, Wall
from plugin.flow.collective import RankZeroError, on_rank_zero
from plugin.flow.distribution import distribute
from plugin.flow.mesh import MeshError, mesh_geometry
from plugin.flow.solver import FlowSolver
from test_flow_solver import LID, make_solver

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORLD = MPI.COMM_WORLD


def _triangles(points, triangles, tags=None):
    """A meshio mesh of ``triangles`` whose boundary edges are in the group "wall" (or ``tags``: edge -> group)."""
    triangles = numpy.asarray(triangles)
    edges = numpy.sort(triangles[:, [[0, 1], [1, 2], [2, 0]]].reshape(-1, 2), axis=1)
    unique, counts = numpy.unique(edges, axis=0, return_counts=True)
    boundary = unique[counts == 1]
    groups = numpy.array([(tags or {}).get(tuple(e), 2) for e in boundary.tolist()])
    return meshio.Mesh(numpy.asarray(points, dtype=float), [("line", boundary), ("triangle", triangles)],
                       cell_data={"gmsh:physical": [groups, numpy.full(len(triangles), 3)]},
                       field_data={"lid": numpy.array([1, 1]), "wall": numpy.array([2, 1]),
                                   "fluid": numpy.array([3, 2])})


SQUARE = ([[0, 0], [1, 0], [1, 1], [0, 1]], [[0, 1, 2], [0, 2, 3]])


def _written(tmp_path_factory, name, mesh):
    """``mesh`` written by rank 0 to a file every rank knows."""
    path = WORLD.bcast(str(tmp_path_factory.mktemp("meshes") / name) if WORLD.rank == 0 else None)
    if WORLD.rank == 0:
        meshio.write(path, mesh, file_format="gmsh22", binary=False)
    WORLD.Barrier()
    return path


@pytest.mark.mpi
def test_a_mesh_without_cells_is_one_error_on_every_rank(tmp_path_factory):
    """A .msh with nodes and no elements: "max() arg is an empty sequence" on rank 0, a hang elsewhere."""
    path = _written(tmp_path_factory, "no-cells.msh", meshio.Mesh(numpy.zeros((3, 2)), []))
    with pytest.raises(MeshError, match="the mesh has no cells"):
        distribute(path, WORLD)


@pytest.mark.mpi
def test_fewer_cells_than_ranks_is_one_error_on_every_rank_or_a_run(tmp_path_factory):
    """Two triangles on 2 or 3 ranks: a partition that leaves a rank without
    cells says so on every rank (it hung in allgather)."""
    path = _written(tmp_path_factory, "two.msh", _triangles(*SQUARE))
    try:
        parts = distribute(path, WORLD)
    except MeshError as exc:
        assert "without cells" in str(exc)
        outcome = "refused"
    else:
        assert parts.geometry.num_global_cells == 2
        outcome = "ran"
    assert len(set(WORLD.allgather(outcome))) == 1
    if WORLD.size > 2:
        assert outcome == "refused"


def test_a_quadrilateral_with_a_repeated_node_is_named():
    points = [[0, 0], [1, 0], [1, 1], [0, 1]]
    mesh = meshio.Mesh(numpy.array(points, dtype=float), [("quad", numpy.array([[0, 1, 2, 2]]))])
    with pytest.raises(MeshError, match="cell 0 .* a facet of zero area"):
        mesh_geometry(mesh, ungrouped="wall")


def test_a_node_that_is_not_finite_is_named():
    mesh = _triangles([[0, 0], [1, 0], [1, numpy.nan], [0, 1]], SQUARE[1])
    with pytest.raises(MeshError, match=r"node 2 has the coordinates \[1.0, nan\]"):
        mesh_geometry(mesh)


def test_a_single_cell_runs():
    """No interior face (a casting error in the operators, then no CFL limit): one step to the end.
    PETSc's types: gpuamg refuses the 1 x 1 zero pressure matrix by name."""
    geometry = mesh_geometry(_triangles([[0, 0], [1, 0], [0, 1]], [[0, 1, 2]]))
    with option_defaults("", {"flow_max_steps": 2}):
        solver = FlowSolver(geometry, PETSc.COMM_SELF, "aij", 0.01, {"wall": Wall(), "lid": Wall()})
    state = solver.run(solver.initial_state())
    assert state.step == 1 and numpy.isfinite(state.t)


@pytest.mark.parametrize("value", ["wall:nan,0", "wall:inf,0", "wall:1e400,0", "wall:1e308,0"])
def test_a_boundary_velocity_that_is_not_finite_is_refused_before_the_first_step(value):
    with pytest.raises(OptionError, match=r"-flow_bc_ymax .*finite"):
        make_solver((4, 4), (False, False), 0.01, {"flow_bc_ymax": value})


def test_a_net_inflow_into_a_closed_domain_is_refused():
    """Every side a wall but one inflow: ||Ms u_s|| stayed at 2e-2 and the run exited 0."""
    with pytest.raises(BoundaryError, match="net flux of 0.5 into a domain with no outflow"):
        make_solver((4, 4), (False, False), 0.01, {}, walls={"xmin": Inflow((0.5, 0.0))})


def test_balanced_inflows_into_a_closed_domain_run():
    _, solver = make_solver((4, 4), (False, False), 0.01, {"flow_max_steps": 1},
                            walls={"xmin": Inflow((0.5, 0.0)), "xmax": Inflow((0.5, 0.0))})
    assert solver.run(solver.initial_state()).step == 1


def test_the_boundary_options_are_used(tmp_path):
    """-flow_bc_<group> was applied yet listed among the options never used."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "demos", "cavity.py"), "-da_grid_x", "4", "-da_grid_y",
                          "4", "-flow_max_steps", "1", "-flow_bc_xmin", "wall", "-options_left"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "were not used" not in out.stdout + out.stderr and "There are no unused options" in out.stdout


def test_a_checkpoint_holding_nan_is_refused_and_left_alone(tmp_path):
    import h5py

    path = str(tmp_path / "flow.h5")
    _, solver = make_solver((5, 4), (False, False), 0.01, {"flow_max_steps": 2}, walls=LID)
    solver.save(solver.run(solver.initial_state()), path)
    with h5py.File(path, "r+") as stored:
        stored["cells/u"][0, 3] = numpy.nan
    before = os.stat(path).st_mtime_ns
    _, again = make_solver((5, 4), (False, False), 0.01, {"flow_restart": path, "flow_checkpoint_every": 1}, walls=LID)
    with pytest.raises(ValueError, match=r"holds Inf or NaN in u"):
        again.initial_state()
    assert os.stat(path).st_mtime_ns == before


def test_an_implicit_diffusion_checkpoint_restarts_with_explicit_diffusion(tmp_path):
    path = str(tmp_path / "flow.h5")
    _, solver = make_solver((5, 4), (False, False), 0.01, {"flow_max_steps": 2, "flow_diffusion": "implicit"},
                            walls=LID)
    solver.save(solver.run(solver.initial_state()), path)
    _, again = make_solver((5, 4), (False, False), 0.01, {"flow_max_steps": 2, "flow_diffusion": "explicit",
                                                          "flow_restart": path}, walls=LID)
    assert again.run(again.initial_state()).step == 4


@pytest.mark.mpi
@pytest.mark.parametrize("coarse_size", [1, 2, 5])
def test_gpuamg_on_a_neumann_matrix_with_a_tiny_coarse_size(coarse_size):
    """Coarsened down to one aggregate per Neumann component, the coarse matrix
    is rounding (diagonal -7.65e-14 refused, or 1e-14 inverted): the level above
    is the coarsest, on one rank or several."""
    n = 12
    one = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n)).tolil()
    one[0, 0] = one[-1, -1] = 1.0
    lap = scipy.sparse.kronsum(one, one).tocsr()
    lap.sort_indices()
    rhs = numpy.random.default_rng(2).standard_normal(n * n)
    ksp, _ = krylov_solve((lap.indptr, lap.indices, lap.data), n * n,
                          {"ksp_type": "cg", "pc_type": "gpuamg", "pc_gpuamg_coarse_size": coarse_size},
                          comm=PETSc.COMM_WORLD, rhs=rhs - rhs.mean(), nullspace=True)
    assert 0 < ksp.getConvergedReason() and ksp.getIterationNumber() < 30


@pytest.mark.mpi
def test_a_failure_on_rank_zero_reaches_every_rank():
    """A missing gmsh or a malformed file on rank 0: every rank raises (it waited at a barrier or in bcast)."""

    def work():
        import gmsh_that_is_not_installed  # noqa: F401

    with pytest.raises(RankZeroError, match="ModuleNotFoundError: No module named 'gmsh_that_is_not_installed'"):
        on_rank_zero(WORLD, work)
    assert on_rank_zero(WORLD, lambda: WORLD.rank + 41) == 41


def test_the_cylinder_demo_checks_the_meshs_dimension(tmp_path):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "demos", "cylinder.py"), "-cyl_case", "3d1z",
                          "-flow_mesh", os.path.join(ROOT, "demos", "data", "square-triangles.msh")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 1
    assert "cylinder: the case 3d1z is 3D and the mesh" in out.stderr and "is 2D" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("demo, option", [("beltrami.py", "-beltrami_nu"), ("hiemenz.py", "-hiemenz_nu")])
def test_an_exact_solution_demo_refuses_a_viscosity_out_of_range_in_one_line(tmp_path, demo, option):
    """It was a traceback."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "demos", demo), option, "-1"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert out.returncode == 1
    assert f"{demo[:-3]}: {option} -1 is out of range" in out.stderr and "Traceback" not in out.stderr


def test_an_unknown_subgrid_model_or_a_negative_constant_is_refused_before_the_first_step():
    with pytest.raises(OptionError, match="-flow_les vreman is not valid: choose one of none, smagorinsky, wale, sigma"):
        make_solver((4, 4), (False, False), 0.01, {"flow_les": "vreman"})
    with pytest.raises(OptionError, match="-flow_les_constant -0.1 is out of range: valid values are 0 to inf"):
        make_solver((4, 4), (False, False), 0.01, {"flow_les": "wale", "flow_les_constant": -0.1})


def test_a_checkpoint_file_in_a_missing_directory_is_refused_at_set_up(tmp_path):
    """It failed only at the first write, after the first checkpoint interval."""
    missing = str(tmp_path / "missing" / "flow.h5")
    with pytest.raises(OptionError, match=r"-flow_checkpoint_file .*missing/flow\.h5: the directory .* does not exist"):
        make_solver((4, 4), (False, False), 0.01, {"flow_checkpoint_every": 5, "flow_checkpoint_file": missing})


@pytest.mark.parametrize("demo", ["cavity.py", "taylor_green.py", "taylor_green_3d.py", "cylinder_les.py"])
def test_a_demo_asked_for_help_lists_its_options_and_stops(tmp_path, demo):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "demos", demo), "-help"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "-flow_cfl" in out.stdout and "-pressure_ksp_type" in out.stdout
    assert "steps of" not in out.stdout and "flow: 10%" not in out.stdout


def test_a_face_in_two_physical_groups_is_named():
    """It silently took the last group."""
    mesh = _triangles(*SQUARE, tags={(2, 3): 1})  # the top edge in "lid"
    edges = mesh.cells[0].data
    top = numpy.flatnonzero((numpy.sort(edges, axis=1) == [2, 3]).all(axis=1))
    mesh.cells.append(meshio.CellBlock("line", edges[top]))  # and listed again, in "wall"
    mesh.cell_data["gmsh:physical"].append(numpy.array([2]))
    with pytest.raises(MeshError, match=r"the face with vertices \[2, 3\] is in two boundary groups, lid and wall"):
        mesh_geometry(mesh)


def test_duplicate_nodes_are_named_as_such():
    """Two halves of the square meshed apart, their shared edge's nodes twice:
    it was reported as a face in no boundary group."""
    points = [[0, 0], [1, 0], [1, 1], [0, 1], [0, 0], [1, 1]]  # nodes 4 and 5 repeat 0 and 2
    mesh = _triangles(points, [[0, 1, 2], [4, 5, 3]])
    outer = [k for k, f in enumerate(numpy.sort(mesh.cells[0].data, axis=1).tolist()) if f not in ([0, 2], [4, 5])]
    mesh.cells[0] = meshio.CellBlock("line", mesh.cells[0].data[outer])  # the inner edges in no group
    mesh.cell_data["gmsh:physical"][0] = mesh.cell_data["gmsh:physical"][0][outer]
    with pytest.raises(MeshError, match="lie on each other but share no vertices: the mesh has duplicate nodes"):
        mesh_geometry(mesh)


def test_a_demo_told_to_restart_from_a_file_that_is_no_checkpoint_says_so_once(tmp_path):
    bad = tmp_path / "not-a-checkpoint.h5"
    bad.write_text("nothing")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "demos", "cavity.py"), "-da_grid_x", "4", "-da_grid_y",
                          "4", "-flow_restart", str(bad)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.count("cannot read the checkpoint") == 1 and "Traceback" not in out.stderr, out.stderr


def test_a_failed_projection_of_the_start_is_one_clear_error():
    """The starting velocity's projection whose pressure solve fails (here
    one iteration allowed) stops the run as a failed step does: FlowBlowUp,
    naming the solve and its reason."""
    from plugin.flow.solver import FlowBlowUp

    _, solver = make_solver((8, 8), (False, False), 0.01, {"pressure_ksp_max_it": 1, "pressure_ksp_rtol": 1e-14},
                            walls=LID)
    start = numpy.random.default_rng(2).standard_normal((2, 64))
    with pytest.raises(FlowBlowUp, match="the projection of the starting velocity failed: the pressure solve "
                                         "failed: .* stopped with KSPConvergedReason -3"):
        solver.initial_state(start, project=True)
