"""The incompressible flow driver: fractional steps on a DMDA box, run in
time like a production code.

CFL-adaptive time steps (and the explicit diffusion limit), a monitor line
per step, progress reports, atomic checkpoints and restart, blow-up
detection that keeps the last good state, PETSc log events per phase and a
timing breakdown. Options (prefix-aware, listed by ``-help``):

  -flow_cfl, -flow_fourier, -flow_dt, -flow_diffusion explicit|implicit,
  -flow_pressure_guess extrapolated|previous, -flow_pressure_laplacian compact|wide,
  -flow_t_end, -flow_max_steps, -flow_steady_tol, -flow_monitor,
  -flow_checkpoint_every, -flow_checkpoint_file, -flow_restart, -flow_cfl_max

The operators come from ``dmda_geometry``; a DMPlex geometry with the same
attributes would drive the same loop. The matrices take the DM's matrix
type (``-dm_mat_type``; the demos make gpusell the default).
"""

import math
import os
import time

from mpi4py import MPI
from petsc4py import PETSc

from petsc_ext.matrices import dm_mat_type
from petsc_ext.options import OptionsReader, options_set

from . import checkpoint
from .geometry import dmda_geometry, dmda_partition
from .integrator import FractionalStep, StepFailure
from .matrices import FlowMatrices
from .operators import FlowOperators
from .pressure_multigrid import PressureMultigrid

DIFFUSION = ("explicit", "implicit")
PRESSURE_GUESS = ("extrapolated", "previous")
PRESSURE_LAPLACIAN = ("compact", "wide")
# Largest growth of dt per step. With implicit diffusion dt (and with it the
# momentum matrix) is held until the CFL limit leaves [dt, 1.25 dt).
_GROWTH = {"explicit": 1.1, "implicit": 1.25}
_SHRINK = 1.1  # and drops to 1/1.1 of the limit when the limit falls below it


class FlowBlowUp(RuntimeError):
    """The run stopped: NaN, a CFL number above -flow_cfl_max, or a failed solve."""


class FlowSolver:
    """Incompressible flow with viscosity ``nu`` on the cells of a DMDA over a
    box of side ``lengths``; ``wall_velocity(side)`` gives the velocity of the
    walls (box sides 0: x low, 1: x high, 2: y low, ...). ``defaults`` sets
    the defaults of -flow_ options (a demo's own, say)."""

    def __init__(self, da, lengths, nu, wall_velocity=None, defaults=None):
        self.comm = da.getComm()
        self.mpi = self.comm.tompi4py()
        self._read_options(da.getOptionsPrefix(), defaults or {})
        self.geometry = dmda_geometry(da, lengths)
        self.shape = tuple(da.getSizes())
        self.operators = FlowOperators(self.geometry, nu, wall_velocity)
        implicit = self.diffusion == "implicit"
        self.matrices = FlowMatrices(self.operators, self.comm, dm_mat_type(da), implicit_diffusion=implicit,
                                     pressure_laplacian=self.pressure_laplacian)
        nullspace = PETSc.NullSpace().create(constant=True, comm=self.comm)
        self.matrices.poisson.setNullSpace(nullspace)
        self.matrices.poisson.setTransposeNullSpace(nullspace)  # KSPSolve projects the right-hand side onto the range
        self.multigrid = PressureMultigrid(dmda_partition(da), lengths, self.comm)
        self.pressure_ksp = self.pressure_solver()
        self.momentum_ksp = self._momentum_ksp() if implicit else None
        self.stepper = FractionalStep(self.matrices, self.pressure_ksp, self.momentum_ksp,
                                      extrapolate_pressure=self.pressure_guess == "extrapolated")
        self.xp = self.stepper.xp
        self.diffusion_rate = self.mpi.allreduce(self.operators.diffusion_rate(), op=MPI.MAX)
        self.unit_rate = self.stepper.unit_convective_rate()
        self._momentum_dt = None
        self.steps_run, self.pressure_iterations, self.run_seconds = 0, 0, 0.0

    def _read_options(self, prefix, defaults):
        reader = OptionsReader(prefix, "Incompressible flow (fractional step)", self.comm)

        def default(name, value):
            return defaults.get(name, value)

        self.cfl = reader.real("flow_cfl", default("flow_cfl", 0.5), "target convective CFL number", low=0.0)
        self.fourier = reader.real("flow_fourier", default("flow_fourier", 0.4),
                                   "explicit diffusion: dt times max(D_ii / Omega_i); stable below 0.5",
                                   low=0.0, high=0.5)
        self.fixed_dt = reader.real("flow_dt", default("flow_dt", 0.0), "fixed time step (0: adaptive)", low=0.0)
        self.diffusion = reader.choice("flow_diffusion", default("flow_diffusion", "explicit"), DIFFUSION,
                                       "diffusion explicit, or Crank-Nicolson with a -momentum_ KSP")
        self.pressure_guess = reader.choice("flow_pressure_guess", default("flow_pressure_guess", "extrapolated"),
                                            PRESSURE_GUESS, "the pressure solve starts from the last pressure "
                                            "extrapolated linearly in time, or from the last pressure")
        self.pressure_laplacian = reader.choice(
            "flow_pressure_laplacian", default("flow_pressure_laplacian", "compact"), PRESSURE_LAPLACIAN,
            "compact (seed 000, eq. 1.7; dissipates O(dt h^2) of the kinetic energy), or wide: "
            "M Omega^-1 M^T, an exact projection that conserves it, but blind to checkerboard pressures")
        self.t_end = reader.real("flow_t_end", default("flow_t_end", 1.0), "final time", low=0.0)
        self.max_steps = reader.int("flow_max_steps", default("flow_max_steps", 10**9), "most steps to run",
                                    low=0, high=10**9)
        self.steady_tol = reader.real("flow_steady_tol", default("flow_steady_tol", 0.0),
                                      "stop at max |u^{n+1} - u^n| / dt below this (0: never)", low=0.0)
        self.velocity_scale = reader.real("flow_velocity_scale", default("flow_velocity_scale", 1.0),
                                          "velocity that sets the first time step of a fluid at rest", low=0.0)
        self.monitor = reader.bool("flow_monitor", default("flow_monitor", False),
                                   "print step, t, dt, CFL, pressure iterations, ||Ms u_s||, kinetic energy")
        self.checkpoint_every = reader.int("flow_checkpoint_every", default("flow_checkpoint_every", 0),
                                           "write a checkpoint every N steps (0: never)", low=0, high=10**9)
        self.checkpoint_file = reader.string("flow_checkpoint_file",
                                             default("flow_checkpoint_file", "flow_checkpoint.npz"),
                                             "checkpoint file (written atomically)")
        self.restart_file = reader.string("flow_restart", default("flow_restart", ""),
                                          "start from this checkpoint")
        self.cfl_max = reader.real("flow_cfl_max", default("flow_cfl_max", 2.0),
                                   "stop (blow-up) when the CFL number exceeds this", low=0.0)

    def pressure_solver(self, prefix="pressure_"):
        """The pressure KSP (options ``prefix``). With ``-pressure_pc_type mg``
        its levels come from plugin.flow.pressure_multigrid: by default all of
        the box's grids, Jacobi-preconditioned Chebyshev smoothing, SVD on the
        coarsest grid."""
        ksp = PETSc.KSP().create(comm=self.comm)
        ksp.setOptionsPrefix(prefix)
        ksp.setOperators(self.matrices.poisson)
        ksp.setType("cacg")
        ksp.getPC().setType("ainv")
        ksp.setTolerances(rtol=1e-8)
        ksp.setInitialGuessNonzero(True)  # warm start from the last pressure
        ksp.setFromOptions()
        pc = ksp.getPC()
        if pc.getType() == PETSc.PC.Type.MG:
            if not PETSc.Options(prefix).hasName("pc_mg_levels"):
                with options_set(prefix, {"pc_mg_levels": self.multigrid.depth}):
                    pc.setFromOptions()  # the level count first: -pc_mg_cycle_type and the like act on the levels
            self.multigrid.attach(pc, self.matrices.poisson.getType())
        return ksp

    def _momentum_ksp(self):
        ksp = PETSc.KSP().create(comm=self.comm)
        ksp.setOptionsPrefix("momentum_")
        ksp.setOperators(self.matrices.momentum)
        ksp.setType("gmres")
        ksp.getPC().setType("ainv")
        ksp.getPC().getPythonContext().kind = "spai"  # the default here: D is symmetric, Omega^-1 D need not be
        ksp.setTolerances(rtol=1e-10)
        ksp.setInitialGuessNonzero(True)
        ksp.setFromOptions()
        return ksp

    # --- states ------------------------------------------------------------------

    def initial_state(self, u=None, project=False):
        """The starting state: from -flow_restart if given, else u (default at
        rest), made discretely divergence-free first with ``project``."""
        state = self.stepper.initial_state(u)
        if project and not self.restart_file:
            self.stepper.project(state)
        if self.restart_file:
            extra = checkpoint.load(self.restart_file, self.mpi, self.geometry, state, self.xp)
            self._momentum_dt = extra.get("momentum_dt") or None
            if self._momentum_dt:
                self.matrices.set_momentum_dt(self._momentum_dt)
            PETSc.Sys.Print(f"flow: restarted from {self.restart_file} at step {state.step}, t = {state.t:.6g}",
                            comm=self.comm)
        return state

    def save(self, state, path=None):
        path = path or self.checkpoint_file
        checkpoint.save(path, self.mpi, self.xp, state, self.geometry, {"momentum_dt": self._momentum_dt or 0.0})
        return path

    # --- time steps --------------------------------------------------------------

    def _time_step(self, state, rate):
        """The CFL (and explicit diffusion) limit, grown smoothly; with
        implicit diffusion held while the momentum matrix's dt is within the
        band below the limit; shortened to end on t_end without a sliver."""
        if self.fixed_dt:
            dt = self.fixed_dt
        else:
            limits = [self.cfl / (rate if rate > 0 else self.velocity_scale * self.unit_rate)]
            if self.diffusion == "explicit" and self.diffusion_rate > 0:
                limits.append(self.fourier / self.diffusion_rate)
            dt = min(limits)
            if state.dt_old:
                dt = min(dt, _GROWTH[self.diffusion] * state.dt_old)  # the extrapolation stays smooth
            held = self._momentum_dt
            if self.momentum_ksp is not None and held:
                if held <= dt < _GROWTH["implicit"] * held:
                    dt = held
                elif dt < held:
                    dt /= _SHRINK  # room to hold the new dt for a while
        remaining = self.t_end - state.t
        if remaining < 2 * dt:
            dt = remaining if remaining <= dt * (1 + 1e-12) else remaining / 2
        if self.momentum_ksp is not None and dt != self._momentum_dt:
            self.matrices.set_momentum_dt(dt)  # the KSP sees the new values and sets its PC up again
            self._momentum_dt = dt
        return dt

    def run(self, state):
        """Step until t_end, max_steps or a steady state; returns the last state."""
        start, steps0 = time.perf_counter(), state.step
        rate = self.stepper.convective_rate(state)
        report = _Progress(self, state)
        while state.step - steps0 < self.max_steps and state.t < self.t_end * (1 - 1e-12):
            dt = self._time_step(state, rate)
            try:
                new = self.stepper.advance(state, dt)
            except StepFailure as exc:
                self._blow_up(state, dt, str(exc))
            rate = self.stepper.convective_rate(new)
            cfl = dt * rate
            if not math.isfinite(cfl) or cfl > self.cfl_max:
                self._blow_up(state, dt, f"the CFL number reached {cfl:.4g} (limit -flow_cfl_max {self.cfl_max:g})")
            state = new
            self.steps_run += 1
            self.pressure_iterations += self.stepper.pressure_iterations
            if self.monitor:
                self._monitor(state, cfl)
            report(state)
            if self.checkpoint_every and state.step % self.checkpoint_every == 0:
                self.save(state)
            if self.steady_tol and self.stepper.change_rate(state) < self.steady_tol:
                PETSc.Sys.Print(f"flow: steady at step {state.step}, t = {state.t:.6g}: max |du/dt| below "
                                f"{self.steady_tol:g}", comm=self.comm)
                break
        self.run_seconds += time.perf_counter() - start
        return state

    def _monitor(self, state, cfl):
        s = self.stepper
        PETSc.Sys.Print(f"step {state.step:6d} t {state.t:.6e} dt {state.dt_old:.4e} CFL {cfl:.4f} "
                        f"pressure its {s.pressure_iterations:4d} ||Ms u_s|| {s.divergence_norm(state):.3e} "
                        f"kinetic energy {s.kinetic_energy(state):.6e}", comm=self.comm)

    def _blow_up(self, good, dt, reason):
        path = self.save(good)
        raise FlowBlowUp(f"flow: step {good.step + 1} (t = {good.t:.6g}, dt = {dt:.4g}) failed: {reason}. "
                         f"The last good state (step {good.step}) is saved in {os.path.abspath(path)}")

    # --- timing ------------------------------------------------------------------

    def reset_timing(self):
        self.stepper.phases.reset()
        self.steps_run, self.pressure_iterations, self.run_seconds = 0, 0, 0.0

    def timing(self):
        """Seconds per step of each phase, pressure iterations per step and
        million cell-steps per second over the steps run since the last reset
        (slowest rank)."""
        steps = max(self.steps_run, 1)
        phases = {name: self.mpi.allreduce(seconds, op=MPI.MAX) / steps
                  for name, seconds in self.stepper.phases.seconds.items()}
        per_step = self.mpi.allreduce(self.run_seconds, op=MPI.MAX) / steps
        cells = self.geometry.num_global_cells
        return {"cells": cells, "steps": self.steps_run, "seconds_per_step": per_step, "phases": phases,
                "pressure_iterations_per_step": self.pressure_iterations / steps,
                "million_cell_steps_per_second": cells / per_step / 1e6 if self.steps_run else 0.0}

    def print_timing(self):
        t = self.timing()
        phases = ", ".join(f"{name.lower()} {1e3 * s:.2f}" for name, s in t["phases"].items() if s)
        PETSc.Sys.Print(f"flow: {t['steps']} steps of {t['cells']} cells: {1e3 * t['seconds_per_step']:.2f} ms per step "
                        f"({phases} ms), {t['pressure_iterations_per_step']:.1f} pressure iterations per step, "
                        f"{t['million_cell_steps_per_second']:.1f} million cell-steps per second", comm=self.comm)

    def destroy(self):
        for ksp in (self.pressure_ksp, self.momentum_ksp):
            if ksp is not None:
                ksp.destroy()
        self.multigrid.destroy()
        self.matrices.destroy()


class _Progress:
    """Prints every further tenth of the run (of t_end, or of max_steps when it binds first)."""

    def __init__(self, solver, state):
        self.solver, self.t0, self.step0, self.next = solver, state.t, state.step, 1

    def __call__(self, state):
        s = self.solver
        if s.monitor:
            return
        by_time = (state.t - self.t0) / max(s.t_end - self.t0, 1e-300)
        by_steps = (state.step - self.step0) / s.max_steps
        done = max(by_time, by_steps)
        if done * 10 >= self.next:
            self.next = int(done * 10) + 1
            PETSc.Sys.Print(f"flow: {min(done, 1.0):4.0%} step {state.step}, t = {state.t:.6g}, "
                            f"{s.stepper.pressure_iterations} pressure iterations", comm=s.comm)
