"""The flow driver (plugin.flow.solver) on small DMDA grids: projection,
energy, checkpoints, blow-up, options; the MPI tests compare 1, 2 and 3
ranks."""

import dataclasses
import os

import meshio
import numpy
import pytest
import scipy.linalg
import scipy.sparse
from mpi4py import MPI
from petsc4py import PETSc

import plugin  # noqa: F401
from gpu_mats.backend import address, to_host
from gpu_mats.kernels.flow import COUNT, GO, KEEP
from meshes import MESHES, unit_mesh
from petsc_ext.options import OptionError, option_defaults
from plugin.flow import checkpoint
from plugin.flow.boundary import Inflow, Outflow, Slip, Wall
from plugin.flow.box import SIDE_NAMES, dmda_partition
from plugin.flow.distribution import distribute
from plugin.flow.forces import GroupForce
from plugin.flow.matrices import component_blocks
from plugin.flow.mesh import mesh_geometry, rank_geometry
from plugin.flow.partition import coordinate_bisection, graph_partition, locality_order
from plugin.flow.operators import host_matrix
from plugin.flow.output import mesh_field, natural_field
from plugin.flow.solver import FlowBlowUp, FlowSolver

PERIODIC, WALL = PETSc.DM.BoundaryType.PERIODIC, PETSc.DM.BoundaryType.NONE


LID = {"ymax": Wall((1.0, 0.0))}


def make_solver(sizes, periodic, nu, options, comm=PETSc.COMM_SELF, walls=None, lengths=None,
                mat_type="gpusell"):
    boundary = tuple(PERIODIC if p else WALL for p in periodic)
    da = PETSc.DMDA().create(dim=len(sizes), sizes=sizes, boundary_type=boundary, stencil_width=1, comm=comm,
                             setup=False)
    da.setMatType(mat_type)
    da.setUp()
    lengths = lengths or (1.0,) * len(sizes)
    with option_defaults("", options):
        solver = FlowSolver.from_dmda(da, lengths, nu, walls)
    return da, solver


def vortex(g, rng=None, amplitude=0.0):
    """Taylor-Green velocity on the unit box (periodic), plus a random smooth perturbation."""
    x, y = 2 * numpy.pi * g.centroids.T
    u = numpy.array([-numpy.cos(x) * numpy.sin(y), numpy.sin(x) * numpy.cos(y)])
    if rng is not None:
        k = rng.integers(1, 3, size=(4, 2))
        phase = rng.uniform(0, 2 * numpy.pi, size=4)
        for (kx, ky), ph in zip(k, phase, strict=True):  # stream-function modes: divergence-free
            s = numpy.cos(kx * x + ky * y + ph)
            u += amplitude * numpy.array([-ky * s, kx * s])
    return u


def test_projection_leaves_face_velocities_divergence_free():
    da, solver = make_solver((16, 12), (False, False), 0.01, {"flow_max_steps": 5, "pressure_ksp_rtol": 1e-12},
                             walls=LID)
    state = solver.run(solver.initial_state())
    Ms, u_s = host_matrix(solver.operators.Ms), to_host(solver.xp, state.u_s)  # operators may be on the GPU
    flux = abs(Ms) @ abs(u_s)
    divergence = Ms @ u_s
    assert state.step == 5
    assert abs(divergence).max() < 1e-10 * flux.max()


def test_flow_solver_runs_on_any_finite_volume_geometry():
    """FlowSolver built from a geometry that is no box (a perturbed tetrahedral
    mesh of the unit cube), walls on its one boundary group: steps run and the
    face velocities stay divergence-free."""
    cube = unit_mesh("tetra", n=3, jitter=0.1)
    g = mesh_geometry(meshio.Mesh(cube.points, cube.cells[:1]), ungrouped="boundary")  # no groups in the file
    with option_defaults("", {"flow_max_steps": 3, "pressure_ksp_rtol": 1e-12}):
        solver = FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"boundary": Wall((0.0, 1.0, 0.0))})
    state = solver.run(solver.initial_state(numpy.sin(numpy.pi * g.centroids.T), project=True))
    Ms, u_s = host_matrix(solver.operators.Ms), to_host(solver.xp, state.u_s)
    assert state.step == 3 and numpy.isfinite(to_host(solver.xp, state.u)).all()
    assert abs(Ms @ u_s).max() < 1e-9 * (abs(Ms) @ abs(u_s)).max()
    with pytest.raises(ValueError, match=r"no boundary condition for the boundary groups boundary \(tag 0\)"):
        FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {})
    with pytest.raises(ValueError, match="'inlet': the mesh has no such boundary group"):
        FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"inlet": Wall(), "boundary": Wall()})
    with option_defaults("", {"pressure_pc_type": "mg"}):
        with pytest.raises(ValueError, match="-pressure_pc_type mg needs the grids of a DMDA box"):
            FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"boundary": Wall()})


@pytest.mark.parametrize("name", ["triangles-and-quads", "prisms", "pyramids"])
def test_a_cavity_runs_on_an_unstructured_mesh(name):
    """The lid-driven cavity on a mesh of plugin.flow.mesh (boundary groups
    "lid" and "wall"): steps run, the face velocities stay divergence-free and
    the lid drags the fluid its way."""
    kinds, jitter = MESHES[name]
    g = mesh_geometry(unit_mesh(kinds, n=4, jitter=jitter))
    lid = tuple(numpy.eye(g.dim)[0])
    with option_defaults("", {"flow_max_steps": 4, "pressure_ksp_rtol": 1e-12}):
        solver = FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"lid": Wall(lid), "wall": Wall()})
    state = solver.run(solver.initial_state())
    Ms, u_s, u = host_matrix(solver.operators.Ms), to_host(solver.xp, state.u_s), to_host(solver.xp, state.u)
    assert state.step == 4 and numpy.isfinite(u).all()
    assert abs(Ms @ u_s).max() < 1e-9 * (abs(Ms) @ abs(u_s)).max()
    under_the_lid = g.boundary_cells[g.boundary_tags == g.boundary_names["lid"]]
    assert (u[0, under_the_lid] > 0).all() and u[0, under_the_lid].mean() > 2 * abs(u[0]).mean()


@pytest.mark.mpi
@pytest.mark.parametrize("partitioner, nonorthogonal", [("bisection", False), ("metis", False), ("metis", True),
                                                        ("dmplex", False)])
def test_ranks_agree_with_one_rank_on_an_unstructured_mesh(tmp_path, partitioner, nonorthogonal):
    """A cavity on a mesh of quadrilaterals and triangles, cut among the ranks
    of COMM_WORLD (coordinate bisection, or METIS with the cells of each rank
    in reverse Cuthill-McKee order; or read from a file on rank 0 and
    distributed through DMPlex), against the same run on one rank; also with
    the non-orthogonal correction, whose product T G needs other ranks' rows."""
    mesh = unit_mesh(("quad", "triangle"), n=6, jitter=0.3)
    whole = mesh_geometry(mesh)
    comm = PETSc.COMM_WORLD
    if partitioner == "dmplex":
        path = comm.tompi4py().bcast(str(tmp_path / "cavity.msh") if comm.getRank() == 0 else None)
        if comm.getRank() == 0:
            mesh.write(path, file_format="gmsh22", binary=False)
        comm.tompi4py().Barrier()
        mine = distribute(path, comm.tompi4py()).geometry
    elif partitioner == "metis":
        owner = comm.tompi4py().bcast(graph_partition(whole.face_cells, whole.num_cells, comm.getSize()) if comm.getRank() == 0 else None)
        mine = rank_geometry(whole, owner, comm.getRank(), locality_order(whole.face_cells, owner))
    else:
        mine = rank_geometry(whole, coordinate_bisection(whole.centroids, comm.getSize()), comm.getRank())
    options = {"flow_max_steps": 6, "pressure_ksp_rtol": 1e-12, "pressure_ksp_type": "cg", "pressure_pc_type": "ainv",
               "flow_nonorthogonal": nonorthogonal}
    fields = []
    for geometry, on in ((mine, comm), (whole, PETSc.COMM_SELF)):
        with option_defaults("", options):
            solver = FlowSolver(geometry, on, "gpusell", 0.01, {"lid": Wall((1.0, 0.0)), "wall": Wall()})
        state = solver.run(solver.initial_state())
        fields.append(mesh_field(on.tompi4py(), geometry, solver.xp, state.u))
    if comm.getRank() == 0:
        parallel, serial = fields
        numpy.testing.assert_allclose(parallel, serial, rtol=0, atol=1e-9)


def kinetic_energy_drift(n, dt, laplacian="compact"):
    """Relative change of kinetic energy over t = 0.2 of an inviscid periodic
    vortex, made discretely divergence-free first."""
    options = {"flow_dt": dt, "flow_t_end": 0.2, "pressure_ksp_rtol": 1e-13, "flow_pressure_laplacian": laplacian}
    da, solver = make_solver((n, n), (True, True), 0.0, options)
    state = solver.initial_state(vortex(solver.geometry, numpy.random.default_rng(3), 0.3), project=True)
    assert solver.stepper.divergence_norm(state) < 1e-11
    e0 = solver.stepper.kinetic_energy(state)
    state = solver.run(state)
    return abs(solver.stepper.kinetic_energy(state) - e0) / e0


def test_inviscid_kinetic_energy_drift_is_the_collocated_projections():
    """C is skew-symmetric (test_flow_operators), so the only energy change is
    the time integration's and the collocated projection's, which removes
    dt (L + M Omega^-1 M^T) p from the cell velocities' divergence each step:
    a drift O(dt h^2) (Trias et al., JCP 258, 2014). Halving dt halves it,
    halving h quarters it."""
    drift = {(n, dt): kinetic_energy_drift(n, dt) for n, dt in ((24, 0.002), (24, 0.001), (48, 0.001))}
    print("relative kinetic energy drift over t = 0.2: " + ", ".join(f"{n}^2 dt {dt}: {d:.3e}" for (n, dt), d in drift.items()))
    assert drift[24, 0.002] < 1e-2
    assert 1.7 < drift[24, 0.002] / drift[24, 0.001] < 2.3
    assert 3.5 < drift[24, 0.001] / drift[48, 0.001] < 5.0


def test_wide_laplacian_conserves_kinetic_energy_to_the_time_integration():
    """-flow_pressure_laplacian wide makes the projection exact: what is left
    is the one-leg scheme's O(dt^2) drift, 4x smaller on halving dt."""
    drift = {dt: kinetic_energy_drift(24, dt, "wide") for dt in (0.004, 0.002, 0.001)}
    print("relative kinetic energy drift over t = 0.2, wide Laplacian: " +
          ", ".join(f"dt {dt}: {d:.3e}" for dt, d in drift.items()))
    assert drift[0.001] < 0.02 * kinetic_energy_drift(24, 0.001)  # the compact L's dissipation is gone
    for dt in (0.004, 0.002):
        assert 3.7 < drift[dt] / drift[dt / 2] < 4.3


@pytest.mark.parametrize("diffusion", ["explicit", "implicit"])
def test_checkpoint_restart_continues_to_the_same_result(tmp_path, diffusion):
    path = str(tmp_path / "flow.h5")
    options = {"flow_max_steps": 12, "pressure_ksp_rtol": 1e-10, "flow_diffusion": diffusion}
    _, whole = make_solver((12, 10), (False, False), 0.01, options, walls=LID)
    reference = whole.run(whole.initial_state())
    _, first = make_solver((12, 10), (False, False), 0.01,
                           {**options, "flow_max_steps": 7, "flow_checkpoint_every": 7, "flow_checkpoint_file": path},
                           walls=LID)
    first.run(first.initial_state())
    assert os.path.exists(path) and not os.path.exists(path + ".tmp")
    _, second = make_solver((12, 10), (False, False), 0.01, {**options, "flow_max_steps": 5, "flow_restart": path},
                            walls=LID)
    restarted = second.run(second.initial_state())
    assert restarted.step == reference.step == 12
    assert restarted.t == pytest.approx(reference.t, rel=1e-15)
    for name in ("u", "u_old", "u_s", "p"):
        numpy.testing.assert_allclose(to_host(second.xp, getattr(restarted, name)),
                                      to_host(whole.xp, getattr(reference, name)), rtol=0, atol=1e-12)


def test_a_checkpointing_run_saves_its_last_state(tmp_path):
    """With -flow_checkpoint_every N, a run that stops between multiples of N
    saves where it stopped too, so a restart goes on from its end."""
    path = str(tmp_path / "flow.h5")
    _, solver = make_solver((8, 8), (False, False), 0.01,
                            {"flow_max_steps": 5, "flow_checkpoint_every": 3, "flow_checkpoint_file": path}, walls=LID)
    state = solver.run(solver.initial_state())
    last = to_host(solver.xp, state.u).copy()  # a new state may reuse the arrays
    saved = solver.stepper.initial_state()
    checkpoint.load(path, MPI.COMM_SELF, solver.operators, saved, solver.xp)
    assert saved.step == state.step == 5
    numpy.testing.assert_array_equal(to_host(solver.xp, saved.u), last)


def test_an_interrupted_checkpoint_write_leaves_the_last_one_readable(tmp_path, monkeypatch):
    path = str(tmp_path / "flow.h5")
    _, solver = make_solver((8, 8), (False, False), 0.01, {"flow_max_steps": 2}, walls=LID)
    state = solver.run(solver.initial_state())
    solver.save(state, path)
    saved = to_host(solver.xp, state.u).copy()  # the next steps reuse the state's arrays

    def killed(descriptor):  # the write stopped half way, before the rename
        os.truncate(descriptor, os.fstat(descriptor).st_size // 2)
        raise KeyboardInterrupt("killed while writing")

    monkeypatch.setattr(checkpoint.os, "fsync", killed)
    later = solver.run(state)
    with pytest.raises(KeyboardInterrupt):
        solver.save(later, path)
    monkeypatch.undo()
    fresh = solver.stepper.initial_state()
    checkpoint.load(path, MPI.COMM_SELF, solver.operators, fresh, solver.xp)
    assert fresh.step == 2
    numpy.testing.assert_array_equal(to_host(solver.xp, fresh.u), saved)


def test_blow_up_names_the_step_and_saves_the_last_good_state(tmp_path):
    path = str(tmp_path / "flow.h5")
    _, solver = make_solver((16, 16), (False, False), 0.01,
                            {"flow_dt": 0.1, "flow_t_end": 100.0, "flow_checkpoint_file": path}, walls=LID)
    with pytest.raises(FlowBlowUp, match=r"step (\d+) .* failed: .*last good state \(step \d+\) is saved") as failure:
        solver.run(solver.initial_state())
    bad_step = int(failure.value.args[0].split("step ")[1].split(" ")[0])
    saved = solver.stepper.initial_state()
    checkpoint.load(path, MPI.COMM_SELF, solver.operators, saved, solver.xp)
    assert saved.step == bad_step - 1
    assert numpy.isfinite(to_host(solver.xp, saved.u)).all()


def test_a_checkpoint_file_that_is_not_a_regular_file_is_refused(tmp_path):
    """A checkpoint is written by renaming a new file over the path: a
    directory or a device there (os.devnull) is refused before the run."""
    for path in (str(tmp_path), os.devnull):
        with pytest.raises(ValueError, match="not a regular file"):
            make_solver((6, 6), (False, False), 0.01, {"flow_checkpoint_file": path}, walls=LID)


@pytest.mark.parametrize("diffusion, growth", [("explicit", 1.1), ("implicit", 1.25)])
def test_the_time_step_is_held_in_a_band_below_its_limit_and_grows_again(diffusion, growth):
    """dt stays where the CFL limit is within [dt, 1.25 dt) (a new dt is a
    new graph of the step), drops below a limit that fell under it, and
    grows by its diffusion's growth factor where the limit rose past the
    band (the explicit runs' dt, capped at 1.1 dt, stayed held for ever once
    it had dropped)."""
    _, solver = make_solver((8, 8), (False, False), 1e-5, {"flow_diffusion": diffusion}, walls=LID)
    state = solver.initial_state()
    state.step, state.dt_old, state.t = 5, 0.01, 0.0
    solver.t_end = 10.0

    def step_for(limit):
        dt = solver._time_step(state, solver.cfl / limit)
        state.dt_old = dt
        return dt

    solver._held_dt = 0.01
    assert step_for(0.0124) == 0.01  # within the band: held
    assert step_for(0.009) == pytest.approx(0.009 / 1.1)  # below it: under the new limit
    assert step_for(0.05) == pytest.approx(growth * 0.009 / 1.1)  # far above: grows
    assert step_for(0.05) == pytest.approx(growth**2 * 0.009 / 1.1)


@pytest.mark.parametrize("diffusion", ["explicit", "implicit"])
def test_the_held_dt_checked_over_many_states_at_once_is_the_time_steps(diffusion):
    """FlowSolver._keeps_dt, with which run's loop takes a CUDA graph's later
    steps together (their checks as arrays), agrees with _time_step state by
    state: CFL limits below, within and above the band, the explicit
    diffusion's limit (0.012 here) below some of them, times near t_end; a
    rate of zero is never kept."""
    _, solver = make_solver((8, 8), (False, False), 1e-5, {"flow_diffusion": diffusion}, walls=LID)
    solver.diffusion_rate = solver.fourier / 0.012  # max D_ii / Omega_i: explicit diffusion's limit 0.012
    state = solver.initial_state()
    state.step, state.dt_old = 5, 0.01
    solver.t_end = 1.0
    limits = [0.005, 0.0099999, 0.01, 0.0124, 0.0125, 0.013, 0.05]
    times = [0.0, 0.5, 0.975, 0.98, 0.985, 0.99]
    rates = numpy.array([solver.cfl / limit for limit in limits for _ in times] + [0.0])
    at = numpy.array(times * len(limits) + [0.5])
    expected = []
    for rate, t in zip(rates.tolist(), at.tolist()):
        solver._held_dt, state.t = 0.01, t
        expected.append(solver._time_step(state, rate) == 0.01)
    solver._held_dt = 0.01
    keeps = solver._keeps_dt(state, 0.01, rates, at)
    numpy.testing.assert_array_equal(keeps[:-1], expected[:-1])
    assert not keeps[-1] and keeps.any() and not keeps.all()


def test_a_collapsing_time_step_is_a_blow_up(tmp_path):
    """A velocity that doubles every step keeps the CFL number at its target
    while dt halves: the run stops once dt is below _COLLAPSE of its first,
    naming the step, instead of running on with ever smaller steps."""
    _, solver = make_solver((8, 8), (False, False), 0.01,
                            {"flow_t_end": 100.0, "flow_checkpoint_file": str(tmp_path / "flow.h5")}, walls=LID)
    rate = solver.stepper.convective_rate
    solver.stepper.convective_rate = lambda state: rate(state) * 2.0**state.step
    with pytest.raises(FlowBlowUp, match=r"the time step fell to .* below 1e-06 of this run's first") as failure:
        solver.run(solver.initial_state())
    assert 20 <= int(failure.value.args[0].split("step ")[1].split(" ")[0]) <= 40


def test_options_show_in_help_and_are_checked(capfd):
    with option_defaults("", {"help": None}):
        make_solver((6, 6), (False, False), 0.01, {}, walls=LID)
    out = capfd.readouterr().out
    assert "-flow_cfl <now 0.5 : formerly 0.5>" in out and "-flow_diffusion <now explicit" in out
    with pytest.raises(ValueError, match="-flow_diffusion crank is not valid"):
        make_solver((6, 6), (False, False), 0.01, {"flow_diffusion": "crank"}, walls=LID)


def test_implicit_diffusion_matches_explicit_on_a_short_run():
    results = []
    for mode in ("explicit", "implicit"):
        _, solver = make_solver((16, 16), (False, False), 0.01,
                                {"flow_dt": 2e-3, "flow_t_end": 0.1, "flow_diffusion": mode,
                                 "pressure_ksp_rtol": 1e-12}, walls=LID)
        results.append(solver.run(solver.initial_state()))
        if mode == "implicit":
            assert solver.stepper.momentum_iterations > 0
            assert solver.momentum_ksp.getPC().getType() == "ainv"
    explicit, implicit = results
    assert explicit.step == implicit.step == 50
    difference = abs(to_host(solver.xp, explicit.u - implicit.u)).max()
    assert 0 < difference < 2e-3  # both second order in time: O(dt^2) apart


def test_the_momentum_matrix_is_omega_plus_half_dt_d_symmetric_and_solved_by_graphcg():
    """Crank-Nicolson's (Omega + dt/2 D) u = Omega u^: symmetric positive
    definite, so that CG takes it; on the project's matrices graphcg + ainv fsai."""
    _, solver = make_solver((6, 5), (False, False), 0.05, {"flow_diffusion": "implicit"}, walls=LID)
    dt, ops = 0.3, solver.operators
    solver.matrices.set_momentum_dt(dt)
    scalar = (scipy.sparse.diags(ops.volumes) + 0.5 * dt * host_matrix(ops.D)).toarray()
    assert abs(scalar - scalar.T).max() == 0 and numpy.linalg.eigvalsh(scalar).min() > 0
    expected = scipy.linalg.block_diag(scalar, scalar)
    mat = solver.matrices.momentum
    columns = []
    for k in range(expected.shape[0]):  # M's columns by its products (the values written in place, dt's)
        e, y = mat.createVecs()
        e.setValue(k, 1.0)
        e.assemble()
        mat.mult(e, y)
        columns.append(to_host(solver.xp, y.getArray(readonly=True)).copy())
    numpy.testing.assert_allclose(numpy.array(columns).T, expected, atol=1e-14 * abs(scalar).max())
    ksp = solver.momentum_ksp
    assert (ksp.getType(), ksp.getPC().getType(), ksp.getPC().getPythonContext().kind) == ("graphcg", "ainv", "fsai")


class _EagerGraphs:
    """KeyedGraphs' stand-in on the host: the work runs as it is."""

    refused = None

    def captured(self, key, arrangement):
        return False

    def capture_first(self, arrangement):
        pass

    def run(self, key, arrangement, fn):
        fn()


def test_a_step_with_its_solves_queued_is_the_launched_step():
    """The work of a whole step's CUDA graph (both solves queued by graphcg in
    loops the device ends, judged after by settle, the convective rate with
    them), run at once on the host from one state: the launched step's
    fields and iterations (its blocks of one stop where the loops do; the
    closed cavity's pressure made mean-free on the device, as KSPSolve
    projects b)."""
    options = {"flow_diffusion": "implicit", "flow_max_steps": 5, "pressure_ksp_type": "graphcg",
               "pressure_pc_type": "jacobi", "pressure_ksp_graphcg_block": 1, "momentum_ksp_graphcg_block": 1}
    _, solver = make_solver((12, 10), (False, False), 0.01, options, walls=LID)
    stepper = solver.stepper
    lid = GroupForce(solver, "ymax")  # watched: the step's graph evaluates it
    state = solver.run(solver.initial_state())
    assert stepper._step_refusal() is None
    basis = stepper.fischer.basis  # the pressure's Fischer basis: the queued step starts from the same
    saved = basis.saved()
    basis.keep(saved)
    launched = stepper.advance(state, state.dt_old)
    basis.restore(saved)
    expected = {name: getattr(launched, name).copy() for name in ("u", "u_s", "p")}
    iterations = (stepper.momentum_iterations, stepper.pressure_iterations)
    stepper.step_graphs = _EagerGraphs()
    stepper.track_change = True  # as under -flow_steady_tol: the step's graph computes max |u^{n+1} - u^n|
    queued = stepper.advance(state, state.dt_old)
    assert (stepper.momentum_iterations, stepper.pressure_iterations) == iterations and min(iterations) > 1
    for name, value in expected.items():
        value = to_host(solver.xp, value)
        numpy.testing.assert_allclose(to_host(solver.xp, getattr(queued, name)), value, rtol=0,
                                      atol=1e-11 * abs(value).max(), err_msg=name)
    elsewhere = dataclasses.replace(queued, u_s=queued.u_s.copy())  # not the graph's state: evaluated now
    from_graph = stepper.convective_rate(queued)  # the rate the step left, read
    assert from_graph == stepper.convective_rate(elsewhere) > 0  # computed again
    change = abs(to_host(solver.xp, queued.u - queued.u_old)).max() / queued.dt_old
    assert stepper.change_rate(queued) == pytest.approx(change, rel=1e-14) and change > 0
    stepper.track_change = False  # a run without a steady-state test: the graph does not compute it, read now
    assert stepper.change_rate(queued) == pytest.approx(change, rel=1e-14)
    numpy.testing.assert_allclose(lid(queued), lid(elsewhere), rtol=1e-14)
    assert abs(lid(queued)).max() > 0


class _ReplayedGraphs(_EagerGraphs):
    """KeyedGraphs' stand-in on the host that takes an arrangement run once under
    the key as captured, so that the steps after are launched ahead (at once)."""

    def __init__(self):
        self.key, self.seen = None, set()

    def captured(self, key, arrangement):
        return key == self.key and arrangement in self.seen

    def run(self, key, arrangement, fn):
        if key != self.key:
            self.key, self.seen = key, set()
        self.seen.add(arrangement)
        fn()


def test_steps_launched_ahead_are_the_steps_waited_for_and_spare_the_states_before():
    """The whole step's work in graphs of one step, each next graph launched
    ahead (on the host at once, with the same dt): the fields,
    iterations and Fischer basis of the same run stepped one at a time, at
    every step; the graphs launched ahead write none of the buffers of a
    state taken or to be taken, nor of the state before (a step taken
    again, or a blow-up's save of the last good state, needs them); a new
    dt drops them, their solutions in Fischer's basis too, and takes the
    step anew."""
    options = {"flow_diffusion": "implicit", "flow_dt": 0.002, "flow_t_end": 1.0,
               "pressure_ksp_type": "graphcg", "pressure_pc_type": "jacobi"}
    _, solver = make_solver((12, 10), (False, False), 0.01, options, walls=LID)
    stepper = solver.stepper
    names = ("u", "u_old", "u_s", "u_s_old", "p", "p_old", "implicit", "implicit_old")
    basis = stepper.fischer.basis  # Fischer's, for the pressure (the default here)

    def snapshot(state):
        return {name: getattr(state, name).copy() for name in names}, basis.X.copy(), basis.state.copy()

    stepper.step_graphs = _ReplayedGraphs()
    stepper.time_levels()  # as a GPU's steps launched ahead take them
    state, waited = solver.initial_state(), []
    for _ in range(24):  # one at a time, each waited for
        state = stepper.advance(state, 0.002)
        waited.append((snapshot(state), stepper.pressure_iterations, stepper.momentum_iterations))
    assert stepper.steps_ahead == 0

    basis.load(basis.X[:0])  # empty, as at the start
    stepper.time_levels()  # the pressure at rest too
    good = state = solver.initial_state()
    for step, ((fields, X, count), pressure_its, momentum_its) in enumerate(waited):
        before = snapshot(good)[0]
        state = stepper.advance(state, 0.002, more=100)  # a long run
        assert (stepper.pressure_iterations, stepper.momentum_iterations) == (pressure_its, momentum_its)
        for name, value in fields.items():  # the state taken, as waited for
            assert numpy.array_equal(getattr(state, name), value), (step, name)
        for name, value in before.items():  # the state before, still there after the graphs launched since
            assert numpy.array_equal(getattr(good, name), value), (step, name)
        good = state
    assert stepper.steps_ahead >= 12 and stepper._queued
    stepper.drop_ahead()  # as before another dt: the steps launched past the state forgotten, their solutions too
    assert not stepper._queued
    assert numpy.array_equal(basis.X, X) and numpy.array_equal(basis.state, count)
    other = stepper.advance(state, 0.001, more=False)
    assert not stepper._queued and other.dt_old == 0.001 and other.step == state.step + 1
    assert stepper.step_graphs.key[:2] == (0.001, 0.5)  # the new dt's first graph: a key of its own ratio
    launched, launch = [], stepper._launch  # a run's graphs hold no step past its last (max_steps)

    def counted(*args, **kwargs):
        before = len(stepper._queued)
        launch(*args, **kwargs)
        launched.append(len(stepper._queued) - before)
    stepper._launch = counted
    solver.max_steps = 13
    end = solver.run(other)
    assert end.step == other.step + 13 == other.step + sum(launched) and max(launched) == 1


def _looping(solver, graph_steps):
    """``solver``'s steps in loops of up to ``graph_steps`` (the loops' work on
    the host, each verdict read: the flow family's NumPy twins of the
    device's), and a list of the steps each loop ran."""
    stepper, ran = solver.stepper, []
    stepper.step_graphs, stepper.graph_steps = _ReplayedGraphs(), graph_steps
    stepper.time_levels()
    take = stepper._take_loop

    def counted(loop, more):
        before = len(stepper._queued)
        take(loop, more)
        ran.append(len(stepper._queued) - before)
    stepper._take_loop = counted
    return ran


@pytest.mark.parametrize("graph_steps, dt", [(3, 0.0), (5, 0.0), (5, 0.004), (64, 0.004)])
def test_steps_in_loops_the_device_ends_are_the_steps_waited_for(graph_steps, dt):
    """A run (``dt`` fixed, or 0: adaptive to t_end, the held dt changing)
    whose steps run in loops of up to ``graph_steps``, each ended by the
    device's verdict after a step (step_verdict's twin) and the next launched
    ahead as the host takes one that ran to its end: the fields, iterations
    and lid force of the same run's steps one at a time, bit for bit; the
    loops end where the held dt changes, and at the run's end."""
    options = {"flow_diffusion": "implicit", "flow_dt": dt, "flow_t_end": 4.0, "flow_max_steps": 200,
               "pressure_ksp_type": "graphcg", "pressure_pc_type": "jacobi"}
    runs = []
    for steps in (graph_steps, 1):
        _, solver = make_solver((12, 10), (False, False), 0.01, options, walls=LID)
        ran, lid, forces, dts = _looping(solver, steps), GroupForce(solver, "ymax"), [], []
        end = solver.run(solver.initial_state(), lambda s: (forces.append(lid(s)), dts.append(s.dt_old)),
                         watched_only=True)
        runs.append((end, solver.pressure_iterations, solver.momentum_iterations, numpy.array(forces), ran, dts))
    (end, its, momentum, forces, ran, dts), (one, its_one, momentum_one, forces_one, none, _) = runs
    assert not none and sum(ran) > len(forces) / 2 and max(ran) == graph_steps
    assert end.step == one.step and end.t == one.t and (its, momentum) == (its_one, momentum_one)
    assert numpy.array_equal(forces, forces_one)
    for name in ("u", "u_old", "u_s", "p"):
        assert numpy.array_equal(getattr(end, name), getattr(one, name)), name
    if not dt:
        assert len(set(dts)) > 3  # the held dt changed, and the last steps were shortened to t_end


def test_a_loop_ends_after_the_first_step_its_rule_would_not_take():
    """With a CFL limit of 0 in its rule the device ends each loop after its
    first step: the host finds one step queued, takes it, and launches a
    loop anew for the next; the rule's own twin in the loop's status."""
    options = {"flow_diffusion": "implicit", "flow_dt": 0.002, "flow_max_steps": 9, "pressure_ksp_type": "graphcg",
               "pressure_pc_type": "jacobi"}
    _, solver = make_solver((12, 10), (False, False), 0.01, options, walls=LID)
    ran = _looping(solver, 4)
    stepper = solver.stepper
    state = solver.run(solver.initial_state())  # loops from the third step: 1, 1, 4, 3 steps
    assert ran == [4, 3] and state.step == 9
    stepper.loop_rule = (solver.cfl, numpy.inf, 1.25, 0.0, 0.0, True)
    for _ in range(3):
        state = stepper.advance(state, 0.002, more=10, loop=10)
        assert not stepper._queued and stepper._ahead_loop is None
    assert ran[-3:] == [1, 1, 1]
    status = stepper._loop_status
    assert (status[COUNT], status[KEEP], status[GO]) == (1.0, 0.0, 0.0)
    stepper.loop_rule = (solver.cfl, numpy.inf, 1.25, 10.0, 0.0, True)  # a CFL number of 10: four steps a loop
    state = stepper.advance(state, 0.002, more=10, loop=10)
    assert ran[-1] == 4 and len(stepper._queued) == 3 and stepper._ahead_loop is not None


def test_a_loops_first_run_finds_room_for_every_save_of_fischers_basis():
    """A loop's graph, captured at its first run, writes every pressure
    buffer of the pool, which the single steps before it need not have
    written: Fischer's basis has room for each of its steps' saves before
    it runs (a capture cannot allocate; where it fails, the loop runs
    kernel by kernel), and makes none inside."""
    options = {"flow_diffusion": "implicit", "flow_dt": 0.002, "flow_max_steps": 9, "pressure_ksp_type": "graphcg",
               "pressure_pc_type": "jacobi"}
    _, solver = make_solver((12, 10), (False, False), 0.01, options, walls=LID)
    _looping(solver, 4)
    stepper, seen = solver.stepper, []
    run = stepper.step_graphs.run

    def watched(key, arrangement, fn):
        before = set(stepper.fischer._saved)
        run(key, arrangement, fn)
        if "loop" in arrangement:
            seen.append((before, set(stepper.fischer._saved)))
    stepper.step_graphs.run = watched
    solver.run(solver.initial_state())
    pool = {address(p) for p in stepper._pressure}
    assert len(pool) == 4 and seen and all(before >= pool and after == before for before, after in seen)


def test_other_krylov_types_take_the_place_of_graphcg_in_both_solves():
    """graphcg leaves the norm type to PETSc, so that a type chosen over it
    (fgmres: the unpreconditioned norm only) sets up."""
    _, solver = make_solver((8, 8), (False, False), 0.01, {"flow_diffusion": "implicit", "flow_max_steps": 3,
                                                           "momentum_ksp_type": "fgmres",
                                                           "pressure_ksp_type": "fgmres"}, walls=LID)
    assert solver.run(solver.initial_state()).step == 3
    assert solver.momentum_ksp.getType() == solver.pressure_ksp.getType() == "fgmres"


def test_momentum_blocks_follow_the_velocity_layout_of_every_rank():
    """component_blocks on three ranks' rows (3, 2 and 4 cells) is diag(S, S)
    of the whole scalar matrix S with the unknowns renumbered rank by rank,
    component by component; each row's columns stay sorted."""
    counts, dim = [3, 2, 4], 2
    starts = numpy.concatenate([[0], numpy.cumsum(counts)])
    S = scipy.sparse.random(9, 9, density=0.4, random_state=1, format="csr") + scipy.sparse.eye(9)
    S.sort_indices()
    pieces = [component_blocks(S[starts[q]:starts[q + 1]].tocsr(), dim, counts) for q in range(3)]
    stacked = scipy.sparse.vstack(pieces, format="csr")
    cells = numpy.arange(9)
    owner = numpy.searchsorted(starts, cells, side="right") - 1
    number = numpy.concatenate([dim * starts[owner] + d * numpy.asarray(counts)[owner] + cells - starts[owner]
                                for d in range(dim)])  # of (component d, cell c), in diag(S, S)'s order
    expected = scipy.sparse.block_diag([S] * dim, format="csr")[numpy.argsort(number)][:, numpy.argsort(number)]
    assert abs(stacked - expected).max() == 0 and stacked.nnz == expected.nnz
    assert all((numpy.diff(stacked.indices[a:b]) > 0).all() for a, b in zip(stacked.indptr[:-1], stacked.indptr[1:]))


def test_implicit_steps_grow_to_the_cfl_limit_and_rebuild_the_momentum_matrix_rarely(monkeypatch):
    _, solver = make_solver((16, 16), (False, False), 0.01, {"flow_diffusion": "implicit", "flow_t_end": 6.0},
                            walls=LID)
    built, build = [], solver.matrices.set_momentum_dt
    monkeypatch.setattr(solver.matrices, "set_momentum_dt", lambda dt: built.append(dt) or build(dt))
    state = solver.run(solver.initial_state())
    assert state.t == pytest.approx(6.0, rel=1e-14)
    assert len(built) < state.step / 5
    assert built[0] < 0.5 * max(built)  # from rest dt grew well past the first step's


def test_the_cpu_reference_runs_the_same_loop_on_petsc_aij():
    runs = []
    for mat_type in ("gpusell", "aij"):
        _, solver = make_solver((10, 12), (False, False), 0.01, {"flow_max_steps": 6, "pressure_ksp_rtol": 1e-12,
                                                                 "flow_box_stencils": False}, walls=LID, mat_type=mat_type)
        assert solver.matrices.mats["C"].getType() in ("seqaijgpusell", "seqaij")
        state = solver.run(solver.initial_state())
        runs.append([to_host(solver.xp, a) for a in (state.u, state.u_s)])
    for gpusell, aij in zip(*runs, strict=True):
        numpy.testing.assert_allclose(gpusell, aij, rtol=0, atol=1e-12)


def test_gpusell_loop_operators_make_their_matrices_only_when_asked():
    """On one rank with gpusell the loop multiplies SellOperators: no PETSc
    matrix (no host AIJ copy) until one is asked for; the one made then has
    the operator's entries and products, C's the values the loop wrote."""
    _, solver = make_solver((10, 12), (False, False), 0.01, {"flow_max_steps": 3, "flow_box_stencils": False},
                            walls=LID)  # the box's matrices, not its stencils
    m = solver.matrices
    state = solver.run(solver.initial_state())
    assert m.mats.made() == [] and set(m.mats) >= {"Ms", "Gamma", "Gs", "G", "K", "flux_rate", "C", "E"}
    rng = numpy.random.default_rng(0)
    for name in m.mats:
        operator = m.mats.operator(name)
        mat = m.mats[name]
        assert mat.getType() == "seqaijgpusell" and mat in m.mats.made()
        x = rng.standard_normal(mat.getSize()[1])
        product = solver.xp.empty(mat.getSize()[0])
        operator.multiply_arrays(solver.xp.asarray(x), product)
        by_operator = to_host(solver.xp, product)
        xv, yv = mat.createVecs()
        xv.setArray(x)
        mat.mult(xv, yv)
        numpy.testing.assert_allclose(yv.getArray(), by_operator, rtol=1e-14, atol=1e-14)
        if name != "C":  # C's AIJ copy keeps L's pattern with zeros: its values live in the SELL copy
            numpy.testing.assert_allclose(host_matrix(mat_csr(mat)).toarray() @ x, by_operator, rtol=1e-12,
                                          atol=1e-12)
    # The C made above takes the values the loop writes in place from then on (Val(C) = E u_s).
    solver.max_steps = 2
    state = solver.run(state)
    m.refresh_convection(state.u_s)
    C, E = m.mats["C"], m.mats["E"]
    values = solver.xp.empty(E.getSize()[0])
    m.mats.operator("E").multiply_arrays(state.u_s, values)
    values = to_host(solver.xp, values)
    x = rng.standard_normal(C.getSize()[1])
    xv, yv = C.createVecs()
    xv.setArray(x)
    C.mult(xv, yv)
    indptr, indices, _ = C.getValuesCSR()
    refreshed = scipy_csr(indptr, indices, values[to_host(solver.xp, m._values.slots)], C.getSize())
    numpy.testing.assert_allclose(yv.getArray(), refreshed @ x, rtol=1e-12, atol=1e-12)
    solver.destroy()


def mat_csr(mat):
    indptr, indices, values = mat.getValuesCSR()
    return scipy_csr(indptr, indices, values, mat.getSize())


def scipy_csr(indptr, indices, values, shape):
    import scipy.sparse

    return scipy.sparse.csr_matrix((values, indices, indptr), shape=shape)


def test_set_up_stages_are_timed():
    _, box = make_solver((12, 10), (False, False), 0.01, {}, walls=LID)
    assert list(box.setup_seconds) == ["geometry", "multigrid grids", "operators", "matrices", "solvers"]
    assert all(seconds >= 0 for seconds in box.setup_seconds.values())
    assert box.setup_report().startswith("geometry ")
    g = mesh_geometry(unit_mesh("quad", n=3))
    with option_defaults("", {}):
        mesh = FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"lid": Wall((1.0, 0.0)), "wall": Wall()})
    assert list(mesh.setup_seconds) == ["operators", "matrices", "solvers"]


def test_pressure_multigrid_levels_are_rediscretized(capfd):
    """-pressure_pc_type mg: every grid of plugin.flow.pressure_multigrid, each
    with its own Laplacian (not Galerkin products) and SVD on the coarsest;
    the same flow as with cg + ainv."""
    runs = []
    for pc_type in ("mg", "ainv"):
        options = {"flow_max_steps": 6, "pressure_ksp_rtol": 1e-12, "pressure_ksp_type": "cg",
                   "pressure_pc_type": pc_type}
        _, solver = make_solver((24, 16), (False, False), 0.01, options, walls=LID)
        state = solver.run(solver.initial_state())
        runs.append((to_host(solver.xp, state.u), solver.pressure_iterations / solver.steps_run,
                     solver.pressure_ksp.getPC()))
    (mg_u, mg_its, pc), (ainv_u, ainv_its, _) = runs
    assert pc.getMGLevels() == 4  # 24 x 16 -> 12 x 8 -> 6 x 4 -> 3 x 2
    assert [pc.getMGSmoother(level).getOperators()[0].getSize()[0] for level in (1, 2, 3)] == [24, 96, 384]
    assert [pc.getMGSmoother(level).getOperators()[0].getType() for level in (1, 2, 3)] == ["seqaijgpusell"] * 3
    assert pc.getMGCoarseSolve().getOperators()[0].getType() == "seqaij"
    assert pc.getMGCoarseSolve().getPC().getType() == "svd"
    numpy.testing.assert_allclose(mg_u, ainv_u, rtol=0, atol=1e-9)
    assert mg_its < ainv_its / 4
    pc.view()
    assert "Not using Galerkin computed coarse grid matrices" in capfd.readouterr().out


def test_pressure_multigrid_refuses_more_levels_than_the_grid_has():
    options = {"flow_max_steps": 2, "pressure_ksp_type": "cg", "pressure_pc_type": "mg", "pressure_pc_mg_levels": 5}
    with pytest.raises(ValueError, match="-pressure_pc_mg_levels 5: this grid has 4 levels"):
        make_solver((24, 16), (False, False), 0.01, options, walls=LID)
    _, solver = make_solver((24, 16), (False, False), 0.01, {**options, "pressure_pc_mg_levels": 2},
                            walls=LID)
    assert solver.run(solver.initial_state()).step == 2
    assert solver.pressure_ksp.getPC().getMGCoarseSolve().getOperators()[0].getSize() == (96, 96)


def test_pressure_guesses_save_iterations():
    """The pressure changes smoothly in time: p^n extrapolated to t^{n+1} is a
    better start than p^n, Fischer's projection on the last solutions (the
    default here) better still, and the flow is the same to the solver's
    tolerance (cacg + ainv: an iterative solve; gpuamg solves this small grid
    on its one dense level in one iteration from any start)."""
    runs = {}
    for guess in ("auto", "extrapolated", "previous"):
        options = {"flow_max_steps": 30, "pressure_ksp_rtol": 1e-9, "flow_pressure_guess": guess,
                   "pressure_ksp_type": "cacg", "pressure_pc_type": "ainv"}
        _, solver = make_solver((24, 16), (False, False), 0.01, options, walls=LID)
        state = solver.run(solver.initial_state())
        runs[guess] = (solver.pressure_iterations, to_host(solver.xp, state.u), solver.stepper.fischer)
    (fischer, u_f, basis), (extrapolated, u_e, none), (previous, u_p, _) = runs.values()
    assert basis.count > 0 and none is None
    assert fischer < 0.8 * extrapolated < 0.8 * 0.9 * previous, (fischer, extrapolated, previous)
    numpy.testing.assert_allclose(u_e, u_p, rtol=0, atol=1e-7)
    numpy.testing.assert_allclose(u_f, u_e, rtol=0, atol=1e-7)


def test_fischers_guess_stands_down_where_the_pc_solves_exactly_or_the_ksp_has_a_guess_of_its_own():
    common = {"flow_max_steps": 1, "pressure_ksp_type": "cg"}
    for extra, expected in (({"pressure_pc_type": "boxfft"}, "the last pressure extrapolated"),
                            ({"pressure_ksp_guess_type": "fischer"}, "the last pressure extrapolated"),
                            ({"flow_pressure_guess": "previous"}, "the last pressure"),
                            ({"flow_pressure_guess": "fischer", "pressure_pc_type": "boxfft"},
                             "Fischer's projection on at most 16 earlier solutions")):
        _, solver = make_solver((8, 8), (True, True), 0.01, {**common, **extra})
        assert solver.pressure_start == expected, extra
    with pytest.raises(OptionError, match="two initial guesses"):
        make_solver((8, 8), (True, True), 0.01, {**common, "flow_pressure_guess": "fischer",
                                                 "pressure_ksp_guess_type": "fischer"})


CHANNEL = {"xmin": Inflow(lambda x, t: numpy.column_stack([x[:, 1] * (1 - x[:, 1]), 0 * x[:, 1]])),
           "xmax": Outflow(0.3), "ymin": Slip()}


@pytest.mark.mpi
@pytest.mark.parametrize("sizes, periodic, pc_type, laplacian, conditions", [
    ((13, 11), (False, False), "ainv", "compact", None),
    ((9, 8, 7), (True, False, True), "ainv", "compact", None),
    ((24, 12), (False, False), "mg", "compact", None),
    ((13, 11), (False, False), "gamg", "compact", None),
    ((14, 10), (True, False), "ainv", "wide", None),
    ((24, 12), (False, False), "mg", "compact", CHANNEL),
    ((13, 11), (False, False), "ainv", "wide", CHANNEL),
], ids=["cavity2d", "periodic3d", "cavity2d-mg", "cavity2d-gamg", "channel2d-wide", "inflow-outflow-mg",
        "inflow-outflow-wide"])
def test_ranks_agree_with_one_rank_to_solver_tolerance(sizes, periodic, pc_type, laplacian, conditions):
    """The run on all ranks of COMM_WORLD against the same run on one rank (each rank runs it)."""
    dim = len(sizes)
    walls = conditions or ({} if periodic[-1] else {SIDE_NAMES[2 * dim - 1]: Wall(tuple(numpy.eye(dim)[0]))})
    options = {"flow_max_steps": 8, "pressure_ksp_rtol": 1e-12, "pressure_ksp_type": "cg",
               "pressure_pc_type": pc_type, "flow_pressure_laplacian": laplacian}
    fields = []
    for comm in (PETSc.COMM_WORLD, PETSc.COMM_SELF):
        da, solver = make_solver(sizes, periodic, 0.02, options, comm=comm, walls=walls)
        state = solver.run(solver.initial_state(numpy.sin(2 * numpy.pi * solver.geometry.centroids.T)))
        fields.append([natural_field(comm.tompi4py(), dmda_partition(da), solver.xp, a) for a in (state.u, state.p)])
    (parallel, parallel_p), (serial, serial_p) = fields
    if PETSc.COMM_WORLD.getRank() == 0:
        numpy.testing.assert_allclose(parallel, serial, rtol=0, atol=1e-9)
        if conditions:  # the outflow fixes the pressure's level
            numpy.testing.assert_allclose(parallel_p, serial_p, rtol=0, atol=1e-8)


@pytest.mark.mpi
def test_a_truncated_checkpoint_is_an_error_naming_it_on_every_rank(tmp_path_factory):
    """Rank 0 reads the file; what it finds wrong reaches every rank as one clear error, never a hang."""
    comm = PETSc.COMM_WORLD
    mpi = comm.tompi4py()
    path = mpi.bcast(str(tmp_path_factory.mktemp("truncated") / "state.h5") if mpi.rank == 0 else None)
    _, solver = make_solver((8, 6), (False, False), 0.01, {"flow_max_steps": 2}, comm=comm, walls=LID)
    state = solver.run(solver.initial_state())
    solver.save(state, path)
    if mpi.rank == 0:
        size = os.path.getsize(path)
        with open(path, "r+b") as stream:
            stream.truncate(size // 2)
    mpi.Barrier()
    with pytest.raises(ValueError, match=r"cannot read the checkpoint .*state\.h5: .*truncated or corrupt"):
        checkpoint.load(path, mpi, solver.operators, state, solver.xp)


@pytest.mark.parametrize("name", ["flow_cfl", "flow_velocity_scale", "flow_fourier"])
def test_zero_cfl_velocity_scale_or_fourier_is_refused_with_the_range(name):
    with pytest.raises(ValueError, match=f"-{name} 0 is out of range: valid values are above 0"):
        make_solver((6, 6), (False, False), 0.01, {name: 0.0}, walls=LID)


def test_a_checkpoint_of_another_grid_shape_is_refused(tmp_path):
    """16 x 48 and 48 x 16 cells have the same counts; the grid's fingerprint tells them apart."""
    path = str(tmp_path / "tall.h5")
    _, tall = make_solver((16, 48), (False, False), 0.01, {"flow_max_steps": 1}, walls=LID)
    tall.save(tall.run(tall.initial_state()), path)
    _, wide = make_solver((48, 16), (False, False), 0.01, {}, walls=LID)
    with pytest.raises(ValueError, match="was written on another grid"):
        checkpoint.load(path, MPI.COMM_SELF, wide.operators, wide.stepper.initial_state(), wide.xp)


def test_mesh_programs_take_the_users_matrix_type():
    """-dm_mat_type names the mesh programs' matrix type, with or without a GPU
    (aij runs PETSc's own solvers on the CPU beside a GPU); without it the
    program's default is gpusell or aij."""
    from plugin.flow.solver import program_mat_type

    default = program_mat_type("test")
    assert default in ("gpusell", "aij")
    for named in ("aij", "gpusell"):
        with option_defaults("", {"dm_mat_type": named}):
            assert program_mat_type("test") == named
    assert program_mat_type("test") == default


def test_phase_timer_on_the_host_times_every_use_and_logs_an_event_per_phase():
    """On the host each use of a phase is timed by the wall clock (the GPU's
    sampling of replays does not apply) and counted, nested phases apart,
    and each phase is a PETSc log event of its own name."""
    from plugin.flow.phases import PhaseTimer

    timer = PhaseTimer(numpy)
    for _ in range(3):
        with timer("Step"):
            with timer("CFL"):
                sum(range(1000))
    assert timer.uses["Step"] == timer.timed["Step"] == timer.uses["CFL"] == timer.timed["CFL"] == 3
    assert timer.seconds["Step"] >= timer.seconds["CFL"] > 0.0
    assert timer.uses["Pressure"] == timer.timed["Pressure"] == 0 and timer.seconds["Pressure"] == 0.0
    assert [timer(name).event.name for name in ("Step", "CFL")] == ["FlowStep", "FlowCFL"]
    timer.reset()
    assert timer.timed["Step"] == timer.uses["Step"] == 0 and timer.seconds["Step"] == 0.0


def test_the_pressures_gpuamg_sparsifies_its_coarse_levels_only_where_cells_are_alike_in_every_direction():
    """conductance_spread is the largest ratio of a cell's face conductances
    A_f / delta_f: 1 on a cube's cubes, the square of the stretch on boxes
    flattened along one axis. The flow's gpuamg sparsifies its coarse levels
    (-pc_gpuamg_sparsify) where it is at most ISOTROPIC_SPREAD, keeps the
    Galerkin products (0) on stretched cells, and takes the user's value
    over either."""
    from plugin.flow.faces import conductance_spread
    from plugin.flow.linear_solvers import ISOTROPIC_SPARSIFY, ISOTROPIC_SPREAD

    cubes = unit_mesh("hexahedron", n=4)
    flat = unit_mesh("hexahedron", n=4)
    flat.points[:, 2] *= 0.05  # boxes 20 times wider than high: conductances 0.05 h and 20 h
    assert conductance_spread(mesh_geometry(cubes)) == pytest.approx(1.0)
    assert conductance_spread(mesh_geometry(flat)) == pytest.approx(400.0)
    assert conductance_spread(mesh_geometry(unit_mesh("hexahedron", n=1))) == 1.0  # no interior face

    def sparsify(mesh, **options):
        g = mesh_geometry(mesh)
        with option_defaults("", {"flow_max_steps": 1, **options}):
            solver = FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"lid": Wall((1.0, 0.0, 0.0)), "wall": Wall()})
        pc = solver.pressure_ksp.getPC()
        assert pc.getType() == "gpuamg"
        return solver.solvers.isotropic, pc.getPythonContext().sparsify

    assert 1.0 < ISOTROPIC_SPREAD < 400.0
    assert sparsify(cubes) == (True, ISOTROPIC_SPARSIFY)
    assert sparsify(flat) == (False, 0.0)
    assert sparsify(flat, pressure_pc_gpuamg_sparsify=0.1) == (False, 0.1)


@pytest.mark.mpi
def test_the_ranks_take_one_choice_of_coarse_levels_where_some_hold_only_cells_alike():
    """A box of cubes whose right half is stretched eight times along x, the
    stretched cells on the last rank and the cubes on the others: the spread
    is small on the first rank and large on the last, and every rank's
    gpuamg keeps the Galerkin products (the ranks' largest spread decides)."""
    from plugin.flow.faces import conductance_spread
    from plugin.flow.linear_solvers import ISOTROPIC_SPREAD

    comm = PETSc.COMM_WORLD
    size, rank = comm.getSize(), comm.getRank()
    mesh = unit_mesh("hexahedron", n=4)
    x = mesh.points[:, 0]
    mesh.points[:, 0] = numpy.where(x > 0.5, 0.5 + 8.0 * (x - 0.5), x)
    whole = mesh_geometry(mesh)
    stretched = whole.centroids[:, 0] > 0.5
    owner = numpy.where(stretched, size - 1, (whole.centroids[:, 1] * (size - 1)).astype(int))
    mine = rank_geometry(whole, owner, rank)
    if size > 1:  # (on one rank it holds both)
        assert (conductance_spread(mine) <= ISOTROPIC_SPREAD) == (rank < size - 1)
    with option_defaults("", {"flow_max_steps": 1}):
        solver = FlowSolver(mine, comm, "gpusell", 0.01, {"lid": Wall((1.0, 0.0, 0.0)), "wall": Wall()})
    pc = solver.pressure_ksp.getPC()
    assert (pc.getType(), solver.solvers.isotropic, pc.getPythonContext().sparsify) == ("gpuamg", False, 0.0)


def test_loops_end_at_checkpoints_whose_states_are_saved_whole():
    """With -flow_checkpoint_every a loop of steps ends at each checkpoint's
    step, so that the state saved is that step's, not written over by the
    loop's later steps: the fields each save sees, as a run one step at a
    time sees them."""
    options = {"flow_diffusion": "implicit", "flow_dt": 0.002, "flow_max_steps": 17, "flow_checkpoint_every": 5,
               "pressure_ksp_type": "graphcg", "pressure_pc_type": "jacobi"}
    runs = []
    for steps in (4, 1):
        _, solver = make_solver((12, 10), (False, False), 0.01, options, walls=LID)
        ran, saves = _looping(solver, steps), []
        solver.save = lambda state, path=None, saves=saves: saves.append((state.step, state.u.copy(), state.p.copy()))
        solver.run(solver.initial_state())
        runs.append((ran, saves))
    (ran, saves), (none, expected) = runs
    assert not none and sum(ran) >= 10 and [step for step, *_ in saves] == [5, 10, 15, 17]
    for (step, u, p), (_, u_one, p_one) in zip(saves, expected):
        assert numpy.array_equal(u, u_one) and numpy.array_equal(p, p_one), step
