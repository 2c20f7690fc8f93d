"""Checkpoints of the flow driver (plugin.flow.checkpoint): restart on another
number of ranks and on another backend, and runs killed at random moments
while they write checkpoints."""

import os
import random
import re
import signal
import subprocess
import sys

import h5py
import numpy
import pytest
from mpi4py import MPI
from petsc4py import PETSc

import plugin  # noqa: F401
from gpu_mats.backend import to_host
from plugin.flow import checkpoint
from meshes import channel_groups, regrouped, unit_mesh
from petsc_ext.options import option_defaults
from plugin.flow.boundary import Inflow, Outflow, Slip, Wall
from plugin.flow.box import dmda_partition
from plugin.flow.mesh import mesh_geometry, rank_geometry
from plugin.flow.partition import coordinate_bisection
from plugin.flow.output import natural_field
from plugin.flow.solver import FlowSolver
from test_flow_solver import LID, make_solver

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = ("u", "u_old", "p", "p_old")


def _shared_path(tmp_path_factory, name):
    mpi = MPI.COMM_WORLD
    return mpi.bcast(str(tmp_path_factory.mktemp("checkpoint") / name) if mpi.rank == 0 else None)


def _natural(da, solver, state):
    """The state's cell fields in the natural order, on the first rank of the
    DMDA's communicator; pressures less their mean (they are defined up to a
    constant, which the solver's start and rank count may shift)."""
    comm, partition = da.getComm().tompi4py(), dmda_partition(da)
    fields = {name: natural_field(comm, partition, solver.xp, getattr(state, name)) for name in FIELDS}
    if comm.Get_rank() == 0:
        for name in ("p", "p_old"):
            fields[name] = fields[name] - fields[name].mean()
    return fields


@pytest.mark.mpi
def test_a_restart_on_1_then_2_then_3_ranks_continues_to_the_same_result(tmp_path_factory):
    """Steps 0-6 on one rank, 6-12 on two, 12-18 on three (as many as there
    are), against 18 steps on one rank; each restart reads the last leg's file."""
    world = MPI.COMM_WORLD
    path = _shared_path(tmp_path_factory, "flow.h5")
    options = {"flow_max_steps": 6, "pressure_ksp_rtol": 1e-12, "flow_checkpoint_every": 6,
               "flow_checkpoint_file": path, "flow_diffusion": "implicit"}
    sizes, walls = (14, 11), LID
    for leg, ranks in enumerate((1, 2, 3)):
        color = 0 if world.rank < ranks else MPI.UNDEFINED
        sub = world.Split(color, world.rank)
        if sub != MPI.COMM_NULL:
            comm = PETSc.Comm(sub)
            restart = {"flow_restart": path} if leg else {}
            da, solver = make_solver(sizes, (False, False), 0.01, {**options, **restart}, comm=comm, walls=walls)
            state = solver.run(solver.initial_state())
            if leg == 2:
                pieced = _natural(da, solver, state), state.step, state.t
            del da, solver, state
            PETSc.garbage_cleanup(comm)  # the leg's parallel objects go before its communicator
            sub.Free()
        world.Barrier()
    if world.rank == 0:
        da, whole = make_solver(sizes, (False, False), 0.01, {**options, "flow_max_steps": 18,
                                                              "flow_checkpoint_every": 0}, walls=walls)
        reference = whole.run(whole.initial_state())
        fields, step, t = pieced
        assert step == reference.step == 18
        assert t == pytest.approx(reference.t, rel=1e-14)
        for name, values in _natural(da, whole, reference).items():
            numpy.testing.assert_allclose(fields[name], values, rtol=0, atol=1e-9, err_msg=name)


@pytest.mark.mpi
def test_a_checkpoint_that_cannot_be_written_is_an_error_naming_it_on_every_rank(tmp_path_factory):
    """Rank 0 writes the file; its failure reaches every rank as one clear error, never a hang."""
    path = os.path.join(_shared_path(tmp_path_factory, "missing"), "flow.h5")  # in a directory never made
    _, solver = make_solver((6, 5), (False, False), 0.01, {"flow_max_steps": 1}, comm=PETSc.COMM_WORLD, walls=LID)
    state = solver.run(solver.initial_state())
    with pytest.raises(ValueError, match=r"cannot write the checkpoint .*missing/flow\.h5"):
        solver.save(state, path)


def test_the_file_holds_the_natural_order_and_the_face_cells(tmp_path):
    """HDF5 a reader can use without this package: cells/u is (dim, cells) in
    the DMDA's natural order; each face's normal velocity comes with its two cells."""
    path = str(tmp_path / "flow.h5")
    da, solver = make_solver((6, 5), (False, False), 0.01, {"flow_max_steps": 3}, walls=LID)
    state = solver.run(solver.initial_state())
    solver.save(state, path)
    with h5py.File(path, "r") as stored:
        assert stored.attrs["format"] == checkpoint.FORMAT and stored.attrs["step"] == 3
        u = stored["cells/u"][...]
        pairs, u_s = stored["faces/cells"][...], stored["faces/u_s"][...]
    numpy.testing.assert_array_equal(u.reshape(2, 5, 6), _natural(da, solver, state)["u"])
    assert pairs.shape == (5 * 5 + 6 * 4, 2) and u_s.shape == (49,)
    assert ((pairs[:, 1] - pairs[:, 0] == 1) | (pairs[:, 1] - pairs[:, 0] == 6)).all()  # x and y neighbours


def test_a_face_stored_the_other_way_round_has_its_velocity_negated(tmp_path):
    """A grid numbering a face's cells in the other order (its normal the other
    way) reads the face velocity with the opposite sign."""
    path = str(tmp_path / "flow.h5")
    _, solver = make_solver((5, 4), (False, False), 0.01, {"flow_max_steps": 2}, walls=LID)
    state = solver.run(solver.initial_state())
    solver.save(state, path)
    saved = [to_host(solver.xp, a).copy() for a in (state.u_s, state.u_s_old)]  # a new state takes the buffers
    with h5py.File(path, "r+") as stored:
        pairs = stored["faces/cells"][...]
        order = numpy.lexsort(pairs[:, ::-1].T[::-1])
        stored["faces/cells"][...] = pairs[order, ::-1]
        for name in ("u_s", "u_s_old"):
            stored[f"faces/{name}"][...] = -stored[f"faces/{name}"][...][order]
    fresh = solver.stepper.initial_state()
    checkpoint.load(path, MPI.COMM_SELF, solver.operators, fresh, solver.xp)
    for stored, loaded in zip(saved, (fresh.u_s, fresh.u_s_old)):
        numpy.testing.assert_array_equal(to_host(solver.xp, loaded), stored)


_CAVITY = [os.path.join(ROOT, "demos", "cavity.py"), "-da_grid_x", "12", "-da_grid_y", "12", "-flow_t_end", "20.0",
           "-flow_steady_tol", "0", "-flow_checkpoint_every", "1", "-pressure_ksp_rtol", "1e-12"]
_KILLED_RUN = [sys.executable, os.path.join(ROOT, "tests", "killed_run.py")]


def _final_state(path):
    with h5py.File(path, "r") as stored:
        return stored.attrs["step"], {name: stored[f"cells/{name}"][...] for name in FIELDS}


def test_runs_killed_at_random_moments_while_writing_checkpoints_restart_to_the_same_result(tmp_path):
    """kill -9 at 20 random moments of runs that write a checkpoint every step:
    inside the write of a random step, at a random one of its function calls
    (counted, not timed: tests/killed_run.py), or just after it; each next
    run restarts from what the last one left. The checkpoint always loads and
    holds the step before the kill or the killed step, and the last run ends
    where an uninterrupted run ends."""
    path, reference = str(tmp_path / "killed.h5"), str(tmp_path / "whole.h5")
    whole = subprocess.run(_KILLED_RUN + ["count", "0"] + _CAVITY + ["-flow_checkpoint_file", reference],
                           capture_output=True, text=True)
    assert whole.returncode == 0, whole.stderr[-2000:]
    calls = int(re.search(r"calls per checkpoint write: (\d+)", whole.stdout).group(1))
    last_step, _ = _final_state(reference)
    assert calls > 100 and last_step > 40
    rng = random.Random(20261123)
    for step in sorted(rng.sample(range(2, last_step), 20)):
        call = rng.randrange(calls + calls // 10)  # past the last call: killed between the write and the next step
        restart = ["-flow_restart", path] if os.path.exists(path) else []
        killed = subprocess.run(_KILLED_RUN + [str(step), str(call)] + _CAVITY + ["-flow_checkpoint_file", path]
                                + restart, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        saved, fields = _final_state(path)
        assert saved == step or (saved == step - 1 and call < calls), (step, call, saved)
        assert all(numpy.isfinite(values).all() for values in fields.values())
    finished = subprocess.run([sys.executable] + _CAVITY + ["-flow_checkpoint_file", path, "-flow_restart", path],
                              capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr[-2000:]
    (step, fields), (step_whole, whole) = _final_state(path), _final_state(reference)
    assert step == step_whole
    for name in FIELDS:
        numpy.testing.assert_allclose(fields[name], whole[name], rtol=0, atol=1e-10, err_msg=name)


@pytest.mark.gpu
def test_a_gpu_checkpoint_restarts_on_the_cpu_and_back(tmp_path):
    """gpusell on the GPU for 5 steps, AIJ on the host for 5, gpusell again for
    5: the same flow as 15 steps on the GPU, to the solver's tolerance."""
    options = {"flow_max_steps": 5, "pressure_ksp_rtol": 1e-12, "momentum_ksp_rtol": 1e-12,
               "flow_checkpoint_every": 5, "flow_diffusion": "implicit"}
    sizes = (16, 12)
    legs = (("gpusell", "gpu.h5", None), ("aij", "cpu.h5", "gpu.h5"), ("gpusell", "again.h5", "cpu.h5"))
    for mat_type, name, restart in legs:
        leg = {**options, "flow_checkpoint_file": str(tmp_path / name)}
        if restart:
            leg["flow_restart"] = str(tmp_path / restart)
        da, solver = make_solver(sizes, (False, False), 0.01, leg, walls=LID, mat_type=mat_type)
        assert (solver.xp is numpy) == (mat_type == "aij")
        state = solver.run(solver.initial_state())
    da, whole = make_solver(sizes, (False, False), 0.01, {**options, "flow_max_steps": 15, "flow_checkpoint_every": 0},
                            walls=LID)
    reference = whole.run(whole.initial_state())
    assert state.step == reference.step == 15
    pieced, expected = _natural(da, solver, state), _natural(da, whole, reference)
    for name in FIELDS:
        numpy.testing.assert_allclose(pieced[name], expected[name], rtol=0, atol=1e-9, err_msg=name)


@pytest.mark.mpi
@pytest.mark.parametrize("boundary", ["walls", "inflow-outflow"])
def test_a_mesh_run_on_all_ranks_restarts_on_one(tmp_path_factory, boundary):
    """An unstructured mesh cut among the ranks writes its checkpoint in the
    mesh's cell order (outflow faces by their cell); one rank restarts from it
    and ends where 10 steps on one rank end."""
    path = _shared_path(tmp_path_factory, "mesh.h5")
    whole = mesh_geometry(unit_mesh(("quad", "triangle"), n=5, jitter=0.3))
    if boundary == "walls":
        walls = {"lid": Wall((1.0, 0.0)), "wall": Wall()}
    else:
        whole = regrouped(whole, channel_groups)
        walls = {"inlet": Inflow((1.0, 0.2)), "outlet": Outflow(), "slip": Slip(), "wall": Wall()}
    comm = PETSc.COMM_WORLD
    part = rank_geometry(whole, coordinate_bisection(whole.centroids, comm.getSize()), comm.getRank())
    options = {"flow_max_steps": 5, "pressure_ksp_rtol": 1e-12, "flow_checkpoint_every": 5,
               "flow_checkpoint_file": path}
    with option_defaults("", options):
        first = FlowSolver(part, comm, "gpusell", 0.01, walls)
    first.run(first.initial_state())
    with option_defaults("", {**options, "flow_checkpoint_every": 0, "flow_restart": path}):
        second = FlowSolver(whole, PETSc.COMM_SELF, "gpusell", 0.01, walls)
    restarted = second.run(second.initial_state())
    with option_defaults("", {**options, "flow_checkpoint_every": 0, "flow_max_steps": 10}):
        whole_run = FlowSolver(whole, PETSc.COMM_SELF, "gpusell", 0.01, walls)
    reference = whole_run.run(whole_run.initial_state())
    assert restarted.step == reference.step == 10
    numpy.testing.assert_allclose(to_host(second.xp, restarted.u), to_host(whole_run.xp, reference.u), rtol=0,
                                  atol=1e-9)
