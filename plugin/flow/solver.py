"""The incompressible flow driver: fractional steps on any finite-volume
geometry, run in time like a production code.

CFL-adaptive time steps (and the explicit diffusion limit), a monitor line
per step, progress reports, atomic checkpoints and restart, blow-up
detection that keeps the last good state, PETSc log events per phase and a
timing breakdown. Its options (prefix-aware, listed by ``-help``) are in
plugin.flow.solver_options; a program sets its own defaults for them with
petsc_ext.options.option_defaults around the constructor.

``FlowSolver(geometry, ...)`` takes a FiniteVolumeGeometry and a boundary
condition per boundary group; ``FlowSolver.from_dmda`` builds both for a DMDA
box, with the box's geometric pressure multigrid. The matrices take the
type given (on a DMDA its ``-dm_mat_type``; the demos make gpusell the
default).
"""

import contextlib
import functools
import math
import os
import time
from dataclasses import replace

import numpy
from mpi4py import MPI
from petsc4py import PETSc

from gpu_mats.backend import cupy_status
from petsc_ext import gpusell
from petsc_ext.device import choose_backend, gpu_available, use_petsc_device_and_stream
from petsc_ext.matrices import dm_mat_type
from petsc_ext.options import OptionError, read_options

from . import checkpoint
from .boundary import OPTION as BOUNDARY_OPTION
from .boundary import BoundaryError, Inflow, Outflow, conditions_by_tag, conditions_from_options, walls_at_rest
from .box import dmda_partition, partition_geometry, tanh_widths, uniform_widths
from .collective import on_every_rank
from .integrator import FractionalStep, StepFailure
from .least_squares import GradientError
from .forcing import Forcing
from .les import EddyViscosity
from .linear_solvers import LinearSolvers
from .matrices import FlowMatrices
from .operators import FlowOperators
from .pressure_guess import EXACT_PCS, FISCHER_SIZE, FischerGuess
from .pressure_multigrid import PressureMultigrid
from .scheme import OPTION_PARTS, Scheme, part_default
from .solver_options import COLLAPSE, OPTIONS

# Largest growth of dt per step; dt (and with implicit diffusion the momentum
# matrix) is held while its limit is within [dt, _BAND dt).
_GROWTH = {"explicit": 1.1, "implicit": 1.25}
_BAND = 1.25
_SHRINK = 1.1  # and drops to 1/1.1 of the limit when the limit falls below it
PRESSURE_BASIS = "pressure_basis"  # a checkpoint's Fischer basis (FischerGuess)

# What a program that picks AIJ matrices where no GPU is usable says first.
CPU_NOTICE = ("no usable GPU: PETSc's own types on the CPU (AIJ matrices, cg + gamg for the pressure, gmres for "
              "momentum), the fastest measured there (README); -dm_mat_type gpusell runs the project's types "
              "(graphcg + gpuamg for the pressure, graphcg + ainv fsai for momentum)")


def program_mat_type(program, comm=None):
    """The matrix type of a mesh program: the user's -dm_mat_type if given (aij
    runs PETSc's own solvers on the CPU even beside a GPU), else gpusell where a
    GPU is usable, else aij, after printing CPU_NOTICE under ``program``'s name."""
    named = PETSc.Options().getString("dm_mat_type", "")
    if named:
        return named
    if gpu_available():
        return "gpusell"
    PETSc.Sys.Print(f"{program}: {CPU_NOTICE}", comm=comm)
    return "aij"


def assembly_module(choice, mat_type):
    """numpy or cupy: where -flow_assembly ``choice`` assembles the operators of
    matrices of ``mat_type`` (auto: where gpusell keeps them, by -gpu_backend;
    PETSc's cusparse types on the GPU where one is usable); ``device`` where no
    GPU is usable is an error."""
    if choice == "host":
        return numpy
    if choice == "auto" and "gpusell" in mat_type:
        return choose_backend()
    cupy, reason = cupy_status()
    if choice == "device":
        if cupy is None or not gpu_available():
            raise OptionError(f"-flow_assembly device needs a usable GPU: {reason or 'this PETSc has no CUDA'}")
    elif "cusparse" not in mat_type or cupy is None or not gpu_available():
        return numpy
    use_petsc_device_and_stream()  # the operators' arrays on this rank's GPU, where its matrices will be
    return cupy


class FlowBlowUp(RuntimeError):
    """The run stopped: NaN, a CFL number above -flow_cfl_max, a collapsed time step, or a failed solve."""


def graded_widths(partition, lengths, boundary_types, beta, prefix=""):
    """The cell widths of a box graded along y by the tanh law (-flow_box_grading ``beta``); None for 0."""
    if not beta:
        return None
    if partition.dim < 2 or boundary_types[1] == PETSc.DM.BoundaryType.PERIODIC:
        raise OptionError(f"-{prefix}flow_box_grading clusters cells at the walls of the y axis: this box has none")
    widths = uniform_widths(partition.shape, lengths)
    widths[1] = tanh_widths(partition.shape[1], lengths[1], beta)
    return widths


def set_cell_coordinates(da, centroids):
    """The DMDA's coordinates: its cells' centres (the rank's, in its order), for PETSc's viewers and the
    application."""
    da.setUniformCoordinates()  # makes the coordinate DM and vector
    coordinates = da.getCoordinates()
    coordinates.setArray(numpy.ascontiguousarray(centroids).ravel())
    da.setCoordinates(coordinates)


class FlowSolver:
    """Incompressible flow with viscosity ``nu`` on ``geometry`` (a
    FiniteVolumeGeometry on ``comm``), its operators as matrices of
    ``mat_type``; ``boundary_conditions`` gives a condition
    (plugin.flow.boundary) for every boundary group, keyed by tag or name.
    ``prefix`` prefixes the -flow_ options. ``pressure_multigrid``: grids for
    ``-pressure_pc_type mg`` (a box's PressureMultigrid), None where the
    geometry has none. ``box``: a DMDA box's (shape, periodic), None on a
    mesh (from_dmda gives it)."""

    def __init__(self, geometry, comm, mat_type, nu, boundary_conditions, prefix="", pressure_multigrid=None,
                 box=None):
        self.comm, self.mpi = comm, comm.tompi4py()
        for attr, value in read_options(self, OPTIONS, prefix, "Incompressible flow (fractional step)", comm,
                                        self._default).items():
            setattr(self, attr, value)
        if self.box_grading and box is None:
            raise OptionError(f"-{prefix}flow_box_grading grades the cells of a DMDA box (FlowSolver.from_dmda); a "
                              "mesh brings its own cells")
        self.geometry = geometry
        self.widths = None  # a graded box's cell widths per axis (from_dmda)
        self.box_shape = None if box is None else box[0]  # a DMDA box's cells per axis
        self.companions = []  # see keep()
        self.scheme_parts = Scheme(**{part: getattr(self, attr) for attr, part in OPTION_PARTS.items()})
        if self.pressure_laplacian == "wide" and replace(self.scheme_parts, diffusion_correction=False,
                                                         implicit_rhie_chow=True, les="none") != Scheme():
            raise OptionError(f"-{prefix}flow_pressure_laplacian wide is the symmetric scheme's exact projection: "
                              f"it needs -{prefix}flow_scheme symmetric (with at most -flow_nonorthogonal)")
        folder = os.path.dirname(os.path.abspath(self.checkpoint_file))
        if self.checkpoint_every and not os.path.isdir(folder):  # refused now, not at the first write
            raise OptionError(f"-{prefix}flow_checkpoint_file {self.checkpoint_file}: the directory {folder} does "
                              "not exist")
        if os.path.exists(self.checkpoint_file) and not os.path.isfile(self.checkpoint_file):
            # a blow-up writes there too, renaming a new file over the path (over /dev/null, say)
            raise OptionError(f"-{prefix}flow_checkpoint_file {self.checkpoint_file}: not a regular file; a "
                              "checkpoint replaces it with one")
        self.setup_seconds = {}  # stage -> seconds of this constructor (set_up_stage); from_dmda adds its own
        with self.set_up_stage("operators"):
            self.boundary_conditions = self._conditions(boundary_conditions, prefix)
            through = [tag for tag, c in self.boundary_conditions.items() if isinstance(c, (Inflow, Outflow))]
            if self.forcing == "flow_rate" and through:
                raise OptionError(f"-{prefix}flow_forcing flow_rate holds the flow rate of a closed or periodic "
                                  f"flow; here inflows and outflows set it (groups {through})")
            self.operators = on_every_rank(self.mpi, lambda: FlowOperators(
                geometry, nu, self.boundary_conditions, assembly_module(self.assembly, mat_type), self.scheme_parts),
                GradientError)
            self._check_mass_balance()
        implicit = self.diffusion == "implicit"
        with self.set_up_stage("matrices"):
            self.matrices = FlowMatrices(self.operators, comm, mat_type, implicit_diffusion=implicit,
                                         pressure_laplacian=self.pressure_laplacian, box=box,
                                         box_stencils=self.box_stencils)
            if not self.operators.has_outflow:  # else the outflow's pressure makes L nonsingular
                nullspace = PETSc.NullSpace().create(constant=True, comm=comm)
                self.matrices.poisson.setNullSpace(nullspace)
                self.matrices.poisson.setTransposeNullSpace(nullspace)  # KSPSolve projects the rhs onto the range
        self.multigrid = pressure_multigrid
        self.solvers = LinearSolvers(self.matrices, self.operators, pressure_multigrid, comm, self.pressure_levels,
                                     self.pressure_laplacian, box)
        if self.solvers.box_on_one_rank and self.matrices.poisson.getType() == gpusell.SEQ_TYPE:
            # the pressure's MatMult from the grid where its values are a stencil (-mat_gpusell_stencil)
            gpusell.context(self.matrices.poisson).set_grid(*box)
        with self.set_up_stage("solvers"):
            self.pressure_ksp = self.solvers.pressure_ksp()
            self.pressure_ksp.setUp()  # its preconditioner (gpuamg's hierarchy) here, not in the first step
            self.momentum_ksp = self.solvers.momentum_ksp() if implicit else None
            eddy = (None if self.les == "none" else
                    EddyViscosity(self.les, self.les_constant, self.operators, self.matrices.xp))
            forcing = None if self.forcing == "none" else Forcing(self.forcing, self.forcing_value, self.matrices,
                                                                  self.mpi)
            self.stepper = FractionalStep(self.matrices, self.pressure_ksp, self.momentum_ksp,
                                          extrapolate_pressure=self.pressure_guess != "previous",
                                          cuda_graphs=self.cuda_graphs, eddy=eddy, forcing=forcing,
                                          fischer=self._fischer_guess(), graph_steps=self.graph_steps)
            self.stepper.track_change = bool(self.steady_tol)  # only a steady state's test reads it every step
        self.xp = self.stepper.xp
        self.diffusion_rate = self.mpi.allreduce(self.operators.diffusion_rate(), op=MPI.MAX)
        self.unit_rate = self.stepper.unit_convective_rate()
        parts = self.scheme_parts  # the fourier memory's limit on dt (-flow_memory_fourier)
        self._memory_limited = (implicit and parts.face_memory and parts.memory_beta == "fourier"
                                and self.memory_fourier > 0)
        self._capture_noticed = False
        self._held_dt = None  # the dt held while the limit allows it (with implicit diffusion: the momentum matrix's)
        self.steps_run, self.pressure_iterations, self.momentum_iterations, self.run_seconds = 0, 0, 0, 0.0

    def _fischer_guess(self):
        """The flow's Fischer basis for the pressure solves (-flow_pressure_guess), or None."""
        ksp = self.pressure_ksp
        options = PETSc.Options(ksp.getOptionsPrefix())
        own = options.hasName("ksp_guess_type") or options.hasName("ksp_fischer_guess")
        if self.pressure_guess == "fischer" and own:
            raise OptionError(f"-flow_pressure_guess fischer and -{ksp.getOptionsPrefix()}ksp_guess_type: two "
                              "initial guesses for one solve; give one")
        wanted = self.pressure_guess == "fischer" or (self.pressure_guess == "auto" and not own
                                                      and ksp.getPC().getType() not in EXACT_PCS)
        return FischerGuess(self.matrices, FISCHER_SIZE) if wanted else None

    @property
    def pressure_start(self):
        """What the pressure solves start from, in words."""
        if self.stepper.fischer is not None:
            return f"Fischer's projection on at most {FISCHER_SIZE} earlier solutions"
        return "the last pressure" + (" extrapolated" if self.pressure_guess != "previous" else "")

    @staticmethod
    def _default(option, chosen):
        """An option's default: for a part of the scheme, that of the scheme chosen."""
        return part_default(option.attr, chosen["scheme"]) if option.attr in OPTION_PARTS else option.default

    @classmethod
    def from_dmda(cls, da, lengths, nu, boundary_conditions=None, origin=None, widths=None):
        """The flow on the cells of a DMDA over a box of side ``lengths`` (low corner ``origin``, default 0):
        the box's walls are the sides "xmin", "xmax", "ymin", ... (tags 0,
        1, 2, ...) of its non-periodic axes; those not in
        ``boundary_conditions`` are walls at rest. Matrices of the DM's type,
        options with the DM's prefix, and the box's pressure multigrid.
        ``widths``: each axis's cell widths (a graded box; default equal
        cells, or -flow_box_grading's along y), set as the DMDA's
        coordinates (the cell centres); a graded box has no geometric
        pressure levels."""
        start = time.perf_counter()
        prefix = da.getOptionsPrefix() or ""
        partition = dmda_partition(da)
        widths = widths if widths is not None else graded_widths(partition, lengths, da.getBoundaryType(),
                                                                  PETSc.Options(prefix).getReal("flow_box_grading", 0.0),
                                                                  prefix)
        geometry = partition_geometry(partition, lengths, da.getComm().getRank(), origin, widths)
        conditions = {**walls_at_rest(geometry), **(boundary_conditions or {})}
        built = time.perf_counter()
        multigrid = None
        if widths is None:
            multigrid = PressureMultigrid(partition, lengths, da.getComm())
        else:
            set_cell_coordinates(da, geometry.centroids)
        grids = time.perf_counter()
        periodic = tuple(kind == PETSc.DM.BoundaryType.PERIODIC for kind in da.getBoundaryType())
        solver = cls(geometry, da.getComm(), dm_mat_type(da), nu, conditions, prefix=prefix,
                     pressure_multigrid=multigrid, box=(partition.shape, periodic))
        solver.widths = widths
        solver.setup_seconds = {"geometry": built - start, "multigrid grids": grids - built, **solver.setup_seconds}
        return solver

    def _conditions(self, conditions, prefix):
        """{tag: condition}: the program's, with those of -flow_bc_<group> options."""
        g = self.geometry
        if PETSc.Options().hasName("help"):
            groups = ", ".join(g.boundary_names) or "none"
            PETSc.Sys.Print(f"  -{prefix}{BOUNDARY_OPTION}<group> <kind[:values]>: the condition of a boundary group: "
                            f"wall, wall:<velocity>, inflow:<velocity>, outflow, outflow:<pressure>, slip (groups: "
                            f"{groups})", comm=self.comm)
        return conditions_by_tag(g, conditions_from_options(g, conditions, prefix))

    def _check_mass_balance(self):
        """A closed domain (no outflow) whose inflows bring a net flux at the
        start cannot stay divergence-free: refused, on every rank."""
        if self.operators.has_outflow:
            return
        flux = self.operators.boundary_values(0.0)[self.operators.dim]
        net, total = self.mpi.allreduce(numpy.array([flux.sum(), abs(flux).sum()]), op=MPI.SUM)
        if abs(net) > 1e-12 * total:
            raise BoundaryError(f"the inflow groups carry a net flux of {-net:.6g} into a domain with no outflow "
                                "group: the velocity cannot be divergence-free (give an outflow, e.g. "
                                "-flow_bc_<group> outflow, or inflows that balance)")

    def describe_conditions(self):
        """One line: each boundary group and its condition."""
        tags = {tag: name for name, tag in self.geometry.boundary_names.items()}
        return ", ".join(f"{tags[tag]}: {c.describe()}" for tag, c in sorted(self.boundary_conditions.items()))

    @contextlib.contextmanager
    def set_up_stage(self, name):
        """Time a stage of the set-up (host wall time) into ``setup_seconds``."""
        start = time.perf_counter()
        yield
        self.setup_seconds[name] = time.perf_counter() - start

    def setup_report(self):
        """One line: the set-up stages and their seconds."""
        return ", ".join(f"{name} {seconds:.2f}" for name, seconds in self.setup_seconds.items())

    # --- states ------------------------------------------------------------------

    def initial_state(self, u=None, project=False):
        """The starting state: from -flow_restart if given, else u (default at
        rest), made discretely divergence-free first with ``project``."""
        state = self.stepper.initial_state(u)
        if project and not self.restart_file:
            try:
                self.stepper.project(state)
            except StepFailure as exc:  # as a step's failure is reported: one line, no traceback
                raise FlowBlowUp(f"flow: the projection of the starting velocity failed: {exc}") from exc
        if self.restart_file:
            fischer = self.stepper.fischer
            extra = checkpoint.load(self.restart_file, self.mpi, self.operators, state, self.xp,
                                    {} if fischer is None else {PRESSURE_BASIS: fischer.load})
            self._held_dt = extra.get("held_dt", extra.get("momentum_dt")) or None  # (the files before it: momentum_dt)
            if self._held_dt and self.momentum_ksp is not None:  # implicit diffusion: its matrix as it was
                self.matrices.set_momentum_dt(self._held_dt)
            PETSc.Sys.Print(f"flow: restarted from {self.restart_file} at step {state.step}, t = {state.t:.6g}",
                            comm=self.comm)
            for companion, suffix in self.companions:
                if not os.path.exists(self.restart_file + suffix):
                    raise checkpoint.CheckpointError(f"-flow_restart {self.restart_file}: its companion "
                                                     f"{self.restart_file + suffix} is missing")
                companion.load(self.restart_file + suffix)
        return state

    def keep(self, companion, suffix):
        """Save ``companion`` (save(path), load(path): running statistics, say) with every checkpoint, at the
        checkpoint's path + ``suffix``, and load it from there on a restart."""
        self.companions.append((companion, suffix))

    def save(self, state, path=None):
        path = path or self.checkpoint_file
        fischer = self.stepper.fischer
        checkpoint.save(path, self.mpi, self.xp, state, self.operators, {"held_dt": self._held_dt or 0.0},
                        {} if fischer is None else {PRESSURE_BASIS: fischer.vectors()})
        for companion, suffix in self.companions:
            companion.save(path + suffix)
        return path

    # --- time steps --------------------------------------------------------------

    def _diffusion_rate(self, state):
        """max_i D_ii / Omega_i of the diffusion taken explicitly, at most: nu's,
        plus with a subgrid model the largest its eddy viscosity adds (of the
        step that made ``state``; before the first step, of ``state``'s own
        velocity, so that the first dt keeps to it too); with Crank-Nicolson
        the eddy viscosity's alone."""
        molecular = self.diffusion_rate if self.diffusion == "explicit" else 0.0
        if self.stepper.eddy is None:
            return molecular
        if not state.step:
            return molecular + self.stepper.eddy_rate_now(state)
        return molecular + self.stepper.largest_eddy_rate(state)

    def _time_step(self, state, rate):
        """The CFL limit (and explicit diffusion's, and the fourier face memory's), grown smoothly, and held
        while the limit is within the band above it (a new dt is a new CUDA
        graph of the step, and with implicit diffusion a new momentum
        matrix); shortened to end on t_end without a sliver."""
        if self.fixed_dt:
            dt = self.fixed_dt
        else:
            rate = rate if rate > 0 else self.velocity_scale * self.unit_rate
            # no CFL limit on a grid without interior faces (one cell)
            limits = self._limits(self._diffusion_rate(state), rate if rate > 0 else None)
            limit = min(limits, default=self.t_end - state.t)
            dt = min(limit, _GROWTH[self.diffusion] * state.dt_old) if state.dt_old else limit  # smooth extrapolation
            held = self._held_dt
            if held and _holds(held, limit):
                dt = held
            elif held and limit < held:
                dt = limit / _SHRINK  # room to hold the new dt for a while
        remaining = self.t_end - state.t
        if _near_the_end(remaining, dt):
            dt = remaining if remaining <= dt * (1 + 1e-12) else remaining / 2
        if self.momentum_ksp is not None and dt != self._held_dt:
            self.stepper.drop_ahead()  # a step launched ahead reads the matrix
            self.matrices.set_momentum_dt(dt)  # the KSP sees the new values and sets its PC up again
        self._held_dt = dt
        return dt

    def _limits(self, explicit_rate, rate=None):
        """The limits on dt: explicit diffusion's (``explicit_rate``: the
        largest D_ii / Omega_i taken explicitly), the fourier face memory's,
        and with ``rate`` (a positive convective rate, or an array of them)
        the CFL number's."""
        limits = [] if rate is None else [self.cfl / rate]
        if explicit_rate > 0:
            limits.append(self.fourier / explicit_rate)
        if self._memory_limited and self.diffusion_rate > 0:
            limits.append(self.memory_fourier / self.diffusion_rate)
        return limits

    def run(self, state, observe=None, watched_only=False):
        """Step until t_end, max_steps or a steady state; returns the last state.
        ``observe(state)``, where given, sees each new state (forces, probes);
        ``watched_only``: it reads nothing of a state but what its watchers
        copied (FractionalStep.watch: GroupForce, PointPressure), so that
        with -flow_graph_steps the device may run steps in loops past the
        states it sees, whose fields the loops' later steps write over."""
        start, steps0 = time.perf_counter(), state.step
        rate = self.stepper.convective_rate(state)
        report = _Progress(self, state)
        first_dt = None
        looped = ((observe is None or watched_only) and not self.monitor and self.stepper.eddy is None
                  and self.stepper.graph_steps > 1)
        self.stepper.loop_rule = self._loop_rule() if looped else None

        def going_on(step, t):
            return step - steps0 < self.max_steps and t < self._t_stop

        while going_on(state.step, state.t):
            dt = self._time_step(state, rate)
            first_dt = first_dt or dt
            if dt < COLLAPSE * first_dt and state.t + dt < self._t_stop:  # not the last, cut short
                self._blow_up(state, dt, f"the time step fell to {dt:.4g}, below {COLLAPSE:g} of this run's first "
                                         f"({first_dt:.4g}): the velocity grows while the CFL limit holds its "
                                         "number down")
            more = self._steps_after(state, dt, steps0)
            try:
                new = self.stepper.advance(state, dt, more=more, loop=self._looped(state, dt, more))
            except StepFailure as exc:
                self._blow_up(state, dt, str(exc))
            self._notice_refused_capture()
            rate = self.stepper.convective_rate(new)
            cfl = dt * rate
            if not math.isfinite(cfl) or cfl > self.cfl_max:
                self._blow_up(state, dt, f"the CFL number reached {cfl:.4g} (limit -flow_cfl_max {self.cfl_max:g})")
            state = new
            self.steps_run += 1
            self.pressure_iterations += self.stepper.pressure_iterations
            self.momentum_iterations += self.stepper.momentum_iterations
            if self.monitor:
                self._monitor(state, cfl)
            if observe is not None:
                observe(state)
            report(state)
            if self.checkpoint_every and state.step % self.checkpoint_every == 0:
                self.save(state)
            if self.steady_tol and self.stepper.change_rate(state) < self.steady_tol:
                PETSc.Sys.Print(f"flow: steady at step {state.step}, t = {state.t:.6g}: max |du/dt| below "
                                f"{self.steady_tol:g}", comm=self.comm)
                break
            state, rate = self._take_launched(state, dt, rate, observe, report)
        self.stepper.drop_ahead()
        if self.checkpoint_every and state.step % self.checkpoint_every:
            self.save(state)  # the run's end, to go on from with -flow_restart
        self.run_seconds += time.perf_counter() - start
        return state

    def _take_launched(self, state, dt, rate, observe, report):
        """Take the steps of dt after ``state`` (``rate``: its convective
        rate) that a CUDA graph already waited for holds, so long as each is
        one that run's loop would take with nothing to do but count, observe
        and report: the same dt from the state before it, its solves
        converged, its CFL number within bounds, and no steady state,
        checkpoint or monitor line at it; checked for all of them at once from
        their readbacks, where the loop's checks one step at a time cost the
        host about as much as the step's launch (BENCHMARKS.md). Returns the
        last state taken and its convective rate."""
        stepper = self.stepper
        steps = [] if self.monitor or stepper.eddy is not None else stepper.launched(state, dt)
        if not steps:
            return state, rate
        rates, changes = stepper.launched_rates(steps)
        before = numpy.concatenate(([rate], rates[:-1]))  # the rate each step's dt is taken from
        plain = numpy.array([step.failure is None for step in steps])
        plain &= self._keeps_dt(state, dt, before, numpy.array([step.state.t for step in steps]))
        cfl = dt * rates
        plain &= numpy.isfinite(cfl) & (cfl <= self.cfl_max)
        if self.steady_tol:
            plain &= changes / dt >= self.steady_tol
        if self.checkpoint_every:
            plain &= numpy.array([step.new.step % self.checkpoint_every for step in steps]) != 0
        count = len(steps) if plain.all() else int(plain.argmin())
        for state in stepper.take(count):  # judged with their launches: they cannot fail
            self.steps_run += 1
            self.pressure_iterations += stepper.pressure_iterations
            self.momentum_iterations += stepper.momentum_iterations
            if observe is not None:
                observe(state)
            report(state)
        return state, (float(rates[count - 1]) if count else rate)

    def _keeps_dt(self, state, dt, rates, times):
        """Whether _time_step would give the held ``dt`` again from each of
        states at ``times`` whose convective rates are ``rates`` (arrays;
        their explicit diffusion that of ``state``): each limit within the
        held band and t_end not near. A rate of zero is never kept (there
        _time_step takes the velocity scale's rate instead)."""
        keeps = rates > 0
        if not self.fixed_dt:
            limits = self._limits(self._diffusion_rate(state), numpy.where(keeps, rates, 1.0))
            keeps &= _holds(dt, functools.reduce(numpy.minimum, limits))
        return keeps & ~_near_the_end(self.t_end - times, dt)

    def _loop_rule(self):
        """The rule by which the device judges a step of a loop (the flow
        family's step_verdict): _take_launched's and _keeps_dt's, the limits
        other than the CFL number's those of explicit diffusion alone (no
        subgrid model: its rate changes every step)."""
        other = min(self._limits(self._diffusion_rate(None)), default=math.inf)
        return (self.cfl, other, _BAND, self.cfl_max, self.steady_tol, bool(self.fixed_dt))

    def _looped(self, state, dt, more):
        """How many of the ``more`` steps of dt after the step from ``state`` a
        loop on the device may take (none without stepper.loop_rule): those
        the run takes with the others by count and time, none starting near
        t_end, and none after a checkpoint's (whose state the host saves);
        at most two loops' worth."""
        if self.stepper.loop_rule is None:
            return 0
        t, step, count, every = state.t + dt, state.step + 1, 0, self.checkpoint_every
        most, t_end = min(more, 2 * self.stepper.graph_steps), self.t_end
        while count < most and not (every and step % every == 0) and not _near_the_end(t_end - t, dt):
            count, t, step = count + 1, t + dt, step + 1
        return count

    @property
    def _t_stop(self):
        """The time past which a run takes no more steps: t_end, less its rounding."""
        return self.t_end * (1 - 1e-12)

    def _steps_after(self, state, dt, steps0):
        """How many steps of dt may follow the step of dt from ``state`` in the run that started at step
        ``steps0`` (run's going_on, counted): to max_steps, or to t_end."""
        by_count = self.max_steps - (state.step + 1 - steps0)
        remaining = self._t_stop - (state.t + dt)
        return max(0, min(by_count, math.ceil(remaining / dt))) if remaining > 0 else 0

    def _notice_refused_capture(self):
        """Once: what of the step cannot be captured and runs as launched."""
        if self._capture_noticed:
            return
        stepper, notice = self.stepper, None
        if stepper.step_graphs is not None and stepper.step_graphs.refused is not None:
            notice = f"the step runs without a CUDA graph of its own: {stepper.step_graphs.refused}"
        elif stepper.step_refusal is not None:
            notice = f"only the explicit part of the step replays as a CUDA graph: {stepper.step_refusal}"
        if stepper.explicit_graphs is not None and stepper.explicit_graphs.refused is not None:
            notice = f"the explicit part of the step runs without a CUDA graph: {stepper.explicit_graphs.refused}"
        if notice is not None:
            PETSc.Sys.Print(f"flow: {notice}", comm=self.comm)
            self._capture_noticed = True

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
        self.stepper.steps_ahead = 0
        self.steps_run, self.pressure_iterations, self.momentum_iterations, self.run_seconds = 0, 0, 0, 0.0

    def timing(self):
        """Seconds per step of each phase (a step's graph: per replay; its
        first runs and captures apart, in all), pressure (and with implicit
        diffusion momentum) iterations per step and million cell-steps per
        second over the steps run since the last reset (slowest rank)."""
        steps = max(self.steps_run, 1)
        timer = self.stepper.phases
        timer.settle()
        seconds = {name: self.mpi.allreduce(value, op=MPI.MAX) for name, value in timer.seconds.items()}
        captures = {"steps": timer.uses["Capture"], "seconds": seconds.pop("Capture"), "captures": timer.captures,
                    "capture_seconds": timer.capture_seconds}
        phases = {name: value / (max(timer.timed["Step"], 1) if name == "Step" else steps)
                  for name, value in seconds.items()}
        # a replayed step's graph by phase, from the events the graph records (one rank: no reduction)
        graph_phases = {name: value / timer.graph_timed for name, value in timer.graph_seconds.items()}
        per_step = self.mpi.allreduce(self.run_seconds, op=MPI.MAX) / steps
        cells = self.geometry.num_global_cells
        # where every step was one graph and one wait: the rest of the wall time is the host's (Python, driver),
        # of which the graphs' first runs and captures are a one-off
        graphs = self.steps_run and timer.waits == self.steps_run
        host = per_step - timer.waited / steps if graphs else None
        replayed = host - timer.first_runs / steps if graphs else None
        return {"cells": cells, "steps": self.steps_run, "seconds_per_step": per_step, "phases": phases,
                "graph_phases": graph_phases, "captured_steps": captures,
                "host_seconds_per_step": host, "host_seconds_per_step_replayed": replayed,
                "first_run_seconds": timer.first_runs if graphs else None,
                "steps_launched_ahead": self.stepper.steps_ahead,
                "pressure_iterations_per_step": self.pressure_iterations / steps,
                "momentum_iterations_per_step": (None if self.momentum_ksp is None else
                                                 self.momentum_iterations / steps),
                "million_cell_steps_per_second": cells / per_step / 1e6 if self.steps_run else 0.0}

    def print_timing(self):
        t = self.timing()
        phases = [f"{name.lower()} {1e3 * s:.2f}" for name, s in t["phases"].items() if s and name != "Step"]
        if t["phases"]["Step"]:
            inside = dict(t["graph_phases"])
            whole = inside.pop("Step", None)
            inside = ", ".join(f"{name.lower()} {1e3 * s:.3f}" for name, s in inside.items())
            phases.append(f"a replayed step's graph {1e3 * t['phases']['Step']:.3f}" +
                          ("" if whole is None else f" (by its own events {1e3 * whole:.3f}: {inside})"))
        phases = ", ".join(phases) + " ms" if phases else ""
        host = ""
        if t["host_seconds_per_step"] is not None:
            captured = t["captured_steps"]
            host = (f"{'; ' if phases else ''}the host's own {1e3 * t['host_seconds_per_step']:.2f} ms, "
                    f"{1e3 * t['host_seconds_per_step_replayed']:.3f} ms past the graphs' first runs and captures "
                    f"({captured['steps']} steps: {t['first_run_seconds']:.2f} s, of it {captured['captures']} "
                    f"captures {captured['capture_seconds']:.2f} s; on the GPU {captured['seconds']:.2f} s)")
        ahead = f", {t['steps_launched_ahead']} steps launched ahead" if t["steps_launched_ahead"] else ""
        momentum = t["momentum_iterations_per_step"]
        momentum = "" if momentum is None else f", {momentum:.1f} momentum"
        PETSc.Sys.Print(f"flow: {t['steps']} steps of {t['cells']} cells: {1e3 * t['seconds_per_step']:.2f} ms per step "
                        f"({phases}{host}), {t['pressure_iterations_per_step']:.1f} pressure{momentum} iterations "
                        f"per step, {t['million_cell_steps_per_second']:.1f} million cell-steps per second{ahead}",
                        comm=self.comm)

    def destroy(self):
        for ksp in (self.pressure_ksp, self.momentum_ksp):
            if ksp is not None:
                ksp.destroy()
        if self.multigrid is not None:
            self.multigrid.destroy()
        self.matrices.destroy()


def _holds(held, limit):
    """Whether a held dt stays under ``limit`` (a float, or an array of them): the limit within [held, _BAND held)."""
    return (held <= limit) & (limit < _BAND * held)


def _near_the_end(remaining, dt):
    """Whether a step of dt would leave less than another before t_end (``remaining`` away: a float or an array)."""
    return remaining < 2 * dt


class _Progress:
    """Prints every further tenth of the run (of t_end, or of max_steps when it binds first)."""

    def __init__(self, solver, state):
        self.solver, self.t0, self.step0, self.next = solver, state.t, state.step, 1
        self.span, self.steps = max(solver.t_end - state.t, 1e-300), solver.max_steps  # the run's: fixed

    def __call__(self, state):
        s = self.solver
        if s.monitor:
            return
        done = max((state.t - self.t0) / self.span, (state.step - self.step0) / self.steps)
        if done * 10 >= self.next:
            self.next = int(done * 10) + 1
            PETSc.Sys.Print(f"flow: {min(done, 1.0):4.0%} step {state.step}, t = {state.t:.6g}, "
                            f"{s.stepper.pressure_iterations} pressure iterations", comm=s.comm)
