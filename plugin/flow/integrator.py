"""The fractional-step time step of Oyarzún 2015 (Algorithm 1) on arrays.

One step from the state (u^n, u^{n-1}, u_s^n, u_s^{n-1}, p^n, p^{n-1}, dt_{n-1}) with step dt:
  u*   = (1 + r/2) u^n - (r/2) u^{n-1},  r = dt / dt_{n-1} (one-leg extrapolation)
  u_s* = (1 + r/2) u_s^n - (r/2) u_s^{n-1}  the convecting face velocities at t + dt/2 too
                                     (Verstappen and Veldman's one-leg method, JCP 187,
                                     2003): divergence-free as both are, so C(u_s*) stays
                                     skew-symmetric; from u_s^n alone convection lags half
                                     a step, first order in dt
  u^   = u^n + dt Omega^-1 (s - C(u_s*) u* - X u* - K v - S v - N u*)
                                     X u* = Ms (u_s* Kc grad u*) moves C's convected velocities
                                     to the faces' centroids (-flow_convection_skewness), explicit,
                                     u_s* capped at nu / |s| in it;
                                     K v = D u* (explicit diffusion), or D u^n / 2
                                     (Crank-Nicolson); S the boundary's normal term, explicit
                                     (slip faces; walls without their normal flux, the whole
                                     of it under Crank-Nicolson too);
                                     N u* = -nu T grad u* the diffusion's non-orthogonal
                                     correction (-flow_nonorthogonal), explicit;
                                     s the boundary's source at t + dt/2
  u^p  = u^, or with Crank-Nicolson the solution of (KSP prefix momentum_)
         (Omega + dt/2 D) (u^p + G q*) = Omega (u^ + G q*), q* = -dt p* the pressure
         guess below: incremental pressure correction (van Kan 1986), so that a
         steady state solves the steady equations whatever dt (without G q*
         it would be off by dt/2 Omega^-1 D G p, largest at walls); the solve
         starts from u^ + G q* plus its implicit share (solution less start)
         extrapolated from the last two steps' (FlowState.implicit)
  g    = theta ((Gamma + K) G q* - (Gs + T G) q*)   with Crank-Nicolson (-flow_implicit_rhie_chow, the
                                                 symmetric scheme's default): the
         theta = a / (1 + a), a = dim nu dt / delta^2   guess reaches the face velocities through the face
                                                 gradient on each face's implicit share theta, so that
                                                 the steady face velocities are Gamma u + dt / (1 + a)
                                                 (Gs p - Gamma G p), the Rhie-Chow coefficient of
                                                 OpenFOAM's rAUf (a the face's Crank-Nicolson diffusion
                                                 number: dt/2 Omega^-1 D is about dim nu dt / delta^2).
                                                 Without g, u^p carries -G q* wholly where a is large,
                                                 Gamma G q* returns to the pressure solve, and where
                                                 L^-1 Ms Gamma G exceeds 1 (gmsh triangles, tetrahedra) each step's
                                                 pressure grows from the last guess's
  w    = Gamma u^p (+ K grad u^p) (+ g)          the face velocities before projection, with the
         + beta (u_s^n - Gamma u^n (- K grad u^n))  skewness correction (-flow_skewness) and the
                                                 memory of the face velocities (-flow_face_memory):
                                                 beta on each face (-flow_face_memory_beta): fourier,
                                                 1 - Fo / (1 + Fo^2), Fo = nu dt / delta^2; damping,
                                                 d(x), the factor by which the step's diffusion damps
                                                 the mode of the face's two cells, x = dt (D_ii /
                                                 Omega_i + D_jj / Omega_j): Crank-Nicolson's (2 - x) /
                                                 (2 + x), explicit 1 - x. The consistent projection P,
                                                 repeated, amplifies some local velocities on
                                                 tetrahedra (P's eigenvalues leave [0, 1]); a step
                                                 then acts on 1 - beta of what earlier steps left.
                                                 A mode u that diffusion alone takes to d u goes to
                                                 beta u + P (d - beta) u: beta = d leaves d u whatever
                                                 P does, and fourier's beta, well above d where Fo
                                                 is large, lets modes of a few small cells grow
                                                 there (BENCHMARKS.md); but damping's shorter memory
                                                 did not hold the convective 3D-1Z. Without
                                                 viscosity beta is 1: inviscid flows are not held
  c    = T grad q_0                              the pressure's non-orthogonal correction
                                                 (-flow_pressure_nonorthogonal), deferred: q_0
                                                 = -dt p^n, or the last corrector's q
  A q  = Ms (w + c) + f + b_p                    A = -L, q = -dt p^{n+1} (KSP prefix pressure_;
                                                 singular with the constant null space where
                                                 no outflow holds the pressure), from
                                                 q = -dt ((1 + r) p^n - r p^{n-1}), or -dt p^n;
                                                 f the inflow fluxes at t + dt, b_p the outflow
                                                 pressures' part (x -dt)
  u^{n+1}   = u^p + G q (+ outflow part)         = u^p - dt G p
  u_s^{n+1} = w + c + Gs q (+ outflow part)      eq. 2.9: Gamma u^{n+1} - dt (Gs p - Gamma G p)
Then Ms u_s^{n+1} + f = Ms (w + c) + f - A q + b_p = 0 to the pressure solver's
tolerance, whatever c. G is the least-squares gradient with -flow_gradient
least-squares (plugin.flow.scheme: the consistent scheme).
With -flow_pressure_laplacian wide, L and Gs are Ms Gamma G and Gamma G
(plugin.flow.matrices), so u_s^{n+1} = Gamma u^{n+1}.

Everything is SpMV and vector updates on the arrays of the matrices' backend
(CuPy on the GPU); a step moves only scalars between host and device, apart
from what a KSP does inside its solve.
"""

import collections
import functools
import time
from dataclasses import dataclass

import numpy
from mpi4py import MPI
from petsc4py import PETSc

from gpu_mats.backend import address, array_module, to_host
from gpu_mats.kernels import family, keyed_graphs
from gpu_mats.kernels.flow import COUNT, FINE, GO, KEEP, LOOP_SLOTS
from petsc_ext.array_operators import mark_read, mark_written
from petsc_ext.arrays import get_array, restore_array
from petsc_ext.graphcg import Verdicts

from .boundary_sources import BoundarySources
from .phases import GraphPhases, PhaseTimer, untimed
from .readback import Launch, Queued, StepReadback
from .state import FlowState


_ITERATING = PETSc.KSP.ConvergedReason.ITERATING
_UNFINISHED = "unfinished"  # a judged step's failure where a solve's loop stopped short of max_it


class StepFailure(RuntimeError):
    """A linear solve of a step failed; the step's state is not valid."""


class FractionalStep:
    """Time steps of one set of matrices. A step writes its new state into
    buffers the previous state does not use, so that state stays valid (the
    last good state when a step goes wrong)."""

    def __init__(self, matrices, pressure_ksp, momentum_ksp=None, extrapolate_pressure=True, cuda_graphs=False,
                 eddy=None, forcing=None, fischer=None, graph_steps=1):
        """``extrapolate_pressure``: the pressure guess is p^n
        extrapolated linearly in time (from the third step), else p^n; the
        pressure solve starts from it, or with ``fischer`` (a
        plugin.flow.pressure_guess.FischerGuess) from Fischer's projection;
        a deferred non-orthogonal correction takes matrices.ops.scheme's
        pressure_correctors more solves after it; with a momentum KSP
        (Crank-Nicolson) and its scheme's implicit_rhie_chow, the guess's face
        term g above. ``cuda_graphs``: the explicit part replays as a CUDA
        graph where it can be captured (explicit_graphs), and the whole step
        where its solves can be queued (step_graphs): with ``graph_steps`` > 1,
        up to that many steps of one dt in one launch where more follow, in a
        loop the device ends after any step the host would not take with the
        others (loop_rule; a launch and a wait of the host for the loop's
        steps). ``eddy``: a subgrid
        model (plugin.flow.les.EddyViscosity) whose eddy viscosity each step's
        explicit part adds to the diffusion's, from u^n. ``forcing``: the mean
        flow's (plugin.flow.forcing.Forcing): its body force in the explicit
        part, its flow rate held after the correction."""
        m = self.matrices = matrices
        self.eddy, self.forcing, self.fischer = eddy, forcing, fischer
        self.extrapolate_pressure = extrapolate_pressure
        ops, xp = m.ops, m.xp
        self.xp, self.updates, self.flow_kernels = xp, family("blas", xp), family("flow", xp)
        self.pressure_ksp, self.momentum_ksp = pressure_ksp, momentum_ksp
        self.comm = m.comm.tompi4py()
        self._one_rank = self.comm.Get_size() == 1  # global values need no reduction
        dim, n, faces = ops.dim, ops.geometry.num_cells, ops.num_faces
        self.shape = (dim, n)
        self.u_star, self.rate, self.u_hat, self.momentum_rhs = (xp.empty(self.shape) for _ in range(4))
        self.gradient, self.w, self.convecting = xp.empty(self.shape), xp.empty(faces), xp.empty(faces)  # u_s*
        self.cell_scratch, self.face_scratch, self.q_guess = xp.empty(n), xp.empty(faces), xp.empty(n)
        self.boundary = BoundarySources(ops, xp)
        self.correctors = ops.scheme.pressure_correctors if m.pressure_correction is not None else 0
        # (name, KSP, solves a step queues into it): the momentum's one, the pressure's and its correctors'
        self.solves = ((("momentum", momentum_ksp, 1),) if momentum_ksp is not None else ()) + (
            ("pressure", pressure_ksp, 1 + self.correctors),)
        self.departure = xp.empty(faces) if ops.scheme.face_memory else None  # beta (u_s^n - Gamma u^n ...)
        self.memory_share, self._memory_dt = (xp.empty(faces) if self.departure is not None else None), None  # beta
        coupled = momentum_ksp is not None and ops.scheme.implicit_rhie_chow
        self.guess_faces = xp.empty(faces) if coupled else None  # g
        self.guess_share, self._share_dt = (xp.empty(faces) if self.guess_faces is not None else None), None  # -theta
        self.face_diffusion = None  # nu / delta^2, in the matrices' module (the operators' may be another)
        if self.departure is not None or self.guess_faces is not None:
            self.face_diffusion = xp.asarray(to_host(array_module(ops.face_diffusion), ops.face_diffusion))
        self.mode_rate = None  # D_ii / Omega_i + D_jj / Omega_j of each face's cells i and j (damping's)
        if m.face_pairs is not None:
            rates = ops.cell_diffusion_rates()
            self.mode_rate = xp.empty(faces)
            m.face_pairs(xp.asarray(to_host(array_module(rates), rates)), self.mode_rate)
        self.velocity_gradient = xp.empty((dim * dim, n)) if m.velocity_gradient is not None else None
        # Kc grad u* on the faces, one block per component (the convected velocities' correction)
        self.convected = xp.empty((dim, faces)) if m.convection_correction is not None else None
        if self.convected is not None:  # the face velocities it takes, capped to [-cap, cap]; their scratch
            cap = xp.asarray(to_host(array_module(ops.convection_cap), ops.convection_cap))
            self.convection_bounds, self.capped = (-cap, cap), xp.empty(faces)
        self.corrected = xp.zeros(faces) if m.pressure_correction is not None else None  # w + c
        self.volumes = xp.asarray(ops.volumes)
        self.inverse_volume = 1.0 / self.volumes
        self.weight = xp.empty(n)
        self.b, self.q = m.poisson.createVecs()
        self.pressure_iterations = self.momentum_iterations = 0
        self.phases = PhaseTimer(xp)
        self._largest_value = xp.zeros(1)
        self._largest_scratch = xp.zeros(self.updates.reduction_slots(dim * n))  # dim * n >= n
        self.explicit_graphs = keyed_graphs() if cuda_graphs and self._capturable() else None
        # the whole step as CUDA graphs, where its solves can be queued into them (graphcg); else why not
        self.step_refusal = self._step_refusal() if self.explicit_graphs is not None else None
        self.step_graphs = (keyed_graphs(relaunch=False) if self.explicit_graphs is not None and self.step_refusal is None
                            else None)
        if graph_steps < 1:
            raise ValueError(f"a launch takes at least one step, not {graph_steps}")
        self.graph_steps = graph_steps if self.step_graphs is not None else 1
        # a loop of steps (graph_steps > 1): its status (flow family's slots), its steps' values in rows of one
        # readback (two launches' worth: the host reads one's while the next runs) and the status's own copy
        self._loop_status = self._loop_rows = self._loop_result = None
        self._loop_base = 0  # the first row of the next loop's
        self._ahead_loop = None  # a loop launched ahead of the host (Loop), not waited for
        # (cfl, other limit, band, cfl_max, steady_tol, fixed): the flow family's step_verdict, the flow
        # solver's rules for a step it takes with the others (set by it; None: no loops)
        self.loop_rule = None
        self.time_levels()
        self.watchers = []  # see watch()
        # the face velocities of the state the last step's graph made, and the readback its values were copied into
        self._graph_made = self._made_readback = None
        self._change_value = xp.zeros(1)  # max |u^{n+1} - u^n| of a step's graph
        self.track_change = True  # whether a step's graph computes it (a run that stops at no steady state: not)
        # the steps launched in step graphs and not taken yet (Queued), in order: those of the graph being taken
        # and of the one launched ahead of it (advance's ``more``)
        self._queued = collections.deque()
        self._contexts = None  # the KSPs' graphcg contexts, where a step's graph queues the solves
        self.steps_ahead = 0  # steps taken as launched ahead
        self._graph_marks = {}  # GraphPhases of each marked arrangement of a step graph, kept while steps run

    def time_levels(self):
        """New buffers of the time levels, taken in turn: a step writes the
        oldest, which its state does not hold; with step graphs (the next
        launched ahead of the host) nor the state before (the state the host
        takes and the one it started from): four buffers. The three pools of
        one length, so that their arrangement repeats every four steps (a
        loop's body: four steps). States made before are not valid after."""
        depth = 1 if self.step_graphs is None else 2
        xp, n = self.xp, self.shape[1]
        self._velocity = [xp.zeros(self.shape) for _ in range(2 + depth)]
        self._faces = [xp.zeros(self.matrices.ops.num_faces) for _ in range(2 + depth)]
        self._pressure = [xp.zeros(n) for _ in range(2 + depth)]
        # FlowState.implicit beside each velocity buffer, so that a step writes the one beside its u^{n+1}
        self._implicit = {id(u): xp.zeros(self.shape) for u in self._velocity} if self.momentum_ksp else None
        self._arrangements, self._last_key = {}, None  # _buffers by the pools' arrays a state holds; _graph_key
        # StepReadbacks by (the identity of) the face buffer a step writes, made by the first step queued for a
        # graph: each step copies into host memory of its own, so that the host reads a step's values while the
        # steps launched after it run
        self.readbacks = {}

    def _capturable(self):
        """Whether the explicit part can be captured: on the GPU, every product
        on arrays without the host (gpusell: on several ranks, its halos by
        NCCL), and the boundary's values the same at every time (else they
        are worked out on the host)."""
        m, names = self.matrices, ("E", "C", "K", "normal_term", "diffusion_correction", "velocity_gradient", "E_D",
                                   "eddy_rate")
        products = [getattr(m, name) for name in names if getattr(m, name) is not None]
        return (self.xp is not numpy and m.ops.boundary_steady
                and all(product.graph_key is not None for product in products))

    def _step_refusal(self):
        """Why the whole step cannot be one CUDA graph (None: it can): each of its
        KSPs must be graphcg with solves it can queue into a graph."""
        for ksp in (self.pressure_ksp, self.momentum_ksp):
            if ksp is None:
                continue
            if ksp.getType() != "graphcg":
                return f"the {ksp.getOptionsPrefix()}KSP is {ksp.getType()}, not graphcg"
            why = ksp.getPythonContext().queue_refusal(ksp)
            if why is not None:
                return f"the {ksp.getOptionsPrefix()}KSP: {why}"
        return None

    def watch(self, queue, out):
        """``queue(state)`` queues kernels that evaluate something of a new
        state (a force, a probe) into the device array ``out`` without
        reading it: a step's CUDA graph runs them after the step and copies
        ``out`` to the host with the step's other values, so that the caller
        reads them (watched(out, state)) with no launch or wait of its own."""
        self.watchers.append((queue, out))

    def watched(self, out, state):
        """The host copy of a watcher's ``out`` where the step's graph that made ``state`` left it, else None."""
        return self._copied(out) if self._made_by_graph(state) else None

    def _made_by_graph(self, state):
        return state.u_s is self._graph_made

    def _copied(self, array):
        """The host copy of one of the arrays the last step's graph read back."""
        return self._made_readback.copy_of(array)

    def initial_state(self, u=None):
        """u (a (dim, n) host or device array, default at rest) with its face velocities Gamma u."""
        # the old levels the last buffers, so that the steps take the pools in turn from the first
        state = FlowState(self._velocity[0], self._velocity[-1], self._faces[0], self._pressure[0], self._pressure[-1],
                          0.0, 0, 0.0, u_s_old=self._faces[-1])
        if u is not None:
            state.u[...] = self.xp.asarray(u)
        state.u_old[...] = state.u
        if self._implicit is not None:
            state.implicit, state.implicit_old = self._implicit_of(state.u), self._implicit_of(state.u_old)
            state.implicit.fill(0.0)
            state.implicit_old.fill(0.0)
        self.matrices.Gamma(state.u.ravel(), state.u_s)
        state.u_s_old[...] = state.u_s
        return state

    @staticmethod
    def _next(pool, current, *used):
        """The buffer after ``current`` in the pool's turn that holds none of ``used``."""
        after = next((k + 1 for k, b in enumerate(pool) if b is current), 0)
        return next(b for b in pool[after:] + pool[:after] if all(b is not u for u in used))

    def advance(self, state, dt, more=0, loop=0):
        """The state one step of size dt later (new arrays; ``state`` stays
        valid). ``more``: how many steps may follow (True: one), which, where
        the steps are captured, the device takes next with the same dt while
        the host works on this one: the step launched after it before the
        host waits for it, none past the last of ``more``; advance(new
        state, dt) then takes it, and a step of another dt first waits for it
        and drops it (drop_ahead). ``loop``: of those, how many the caller
        takes with nothing to do but count, observe and report where
        loop_rule says so (FlowSolver._take_launched): with graph_steps > 1
        the device runs them in loops of up to graph_steps, each ended by
        the device after the first step the rule would not take, and the
        next loop launched as the host takes one that ran to its end. Steps
        launched ahead write only buffers that no state the host may still
        take or go back to holds, and the host's reads of the device queue
        behind them."""
        self._graph_made = None
        graphs = self.step_graphs
        # after a refused capture the steps launched before it are still taken (graphs run as launched)
        if graphs is not None and (graphs.refused is None or self._queued or self._ahead_loop is not None):
            new = self._graph_step(state, dt, more, loop)
            if new is not None:
                return new
        return self._advance(state, dt)

    def drop_ahead(self):
        """Wait for the steps launched and not taken, and forget them: before a
        change of what their graphs read (the momentum matrix's dt). Steps of
        a loop are never dropped (the loop's later steps wrote over the
        states before them): a RuntimeError, where the host and the device
        part ways."""
        queued = self._queued
        if self._ahead_loop is not None or any(step.launch.loop for step in queued):
            ahead = self._ahead_loop
            start = ahead.state if ahead is not None else next(step.state for step in queued if step.launch.loop)
            raise RuntimeError(f"the steps a loop on the device ran after step {start.step} would be dropped: the "
                               "host does not take a step whose verdict the device gave (FlowSolver._take_launched "
                               "against the flow family's step_verdict), and the states before it are written "
                               "over; run with -flow_graph_steps 1 and report it")
        if queued:
            self._wait(queued[-1].launch.readback)
        while queued:  # the latest first: each undo puts back what its step's update changed
            self._undo(queued.pop())

    def _undo(self, step):
        """Undo what the graph of a Queued ``step``, dropped, left beyond its new
        state's buffers: its solution in Fischer's basis."""
        if self.fischer is not None:
            self.fischer.undo(address(step.new.p))

    def _wait(self, readback):
        """Block until ``readback``'s step is done, its time counted as waited (not the host's own)."""
        start = time.perf_counter()
        readback.wait()
        self.phases.waited += time.perf_counter() - start

    def _graph_step(self, state, dt, more, loop):
        """The step as one of its CUDA graph's (launched now, or before and
        taken now), the next graph launched ahead where ``more``; a loop of
        steps where ``loop`` and the state allow (_loops); its state once the
        host has waited for its graph and judged its solves from their
        records; None where a solve ran out of its loop short of max_it: the
        step is then taken again as launched."""
        queued, ahead = self._queued, self._ahead_loop
        if not queued and ahead is not None and ahead.state is state and ahead.dt == dt:
            self._ahead_loop = None
            self._take_loop(ahead, loop)
        if queued and queued[0].state is state and queued[0].dt == dt:
            step = queued.popleft()
            self.steps_ahead += 1
        else:  # steps launched from another state, or with another dt: forgotten
            self.drop_ahead()
            if loop and self._loops(state, dt):
                self._take_loop(self._launch_loop(state, dt, min(self.graph_steps, 1 + loop)), loop)
            else:
                self._launch(state, dt)
            step = queued.popleft()
        launch = step.launch
        if not launch.loop and more and not queued:  # none launched after it
            self._launch(step.new, dt, replayed_only=True)
        if not launch.waited:
            self._wait(launch.readback)
            launch.waited = True
            self._judge([step])
        self.phases.waits += 1
        if step.marks is not None:
            self.phases.add_graph(step.marks)
        if step.failure is not None:
            self._drop_taken(step)
            if step.failure == _UNFINISHED:
                return None
            name, ksp, _ = next(solve for solve in self.solves if solve[0] == step.failure)
            _check(ksp, name)
        self.momentum_iterations, self.pressure_iterations = step.iterations
        self._graph_made, self._made_readback = step.new.u_s, step.readback
        return step.new

    def _judge(self, steps):
        """Judge the solves of ``steps``, one launch's in order, from the
        records in their readbacks: each KSP's settings read once for all
        (graphcg.Verdicts), its state that of the last solve judged (of the
        launch's last step: a step taken before it finds the KSPs there).
        Each step keeps its (momentum, pressure) iterations and its failure:
        _UNFINISHED where a loop stopped short of max_it (the step is taken
        again as launched), or the name of a solve that failed; the judging
        stops at it, the steps after it being dropped when it is taken."""
        judges = [(name, Verdicts(ksp)) for name, ksp, _ in self.solves]
        for step in steps:
            iterations = {"momentum": 0, "pressure": 0}
            for (name, judge), records in zip(judges, step.readback.host):  # its first arrays: the records
                for its, reason in judge(records):  # a step's hot loop: no generators
                    iterations[name] += its
                    if reason == _ITERATING:
                        step.failure = _UNFINISHED
                if step.failure is None and reason < 0:
                    step.failure = name
                if step.failure is not None:
                    break
            step.iterations = (iterations["momentum"], iterations["pressure"])
            if step.failure is not None:
                break
        for (_, ksp, _), context, (_, judge) in zip(self.solves, self._contexts, judges):
            if judge.last is not None:
                context.conclude(ksp, judge)

    def launched(self, state, dt):
        """The steps of ``dt`` launched after ``state``, in order, whose launches
        the host has waited for and judged (Queued): advance(state, dt) takes
        the first of them without a wait."""
        steps = []
        for step in self._queued:
            if step.state is not state or step.dt != dt or not step.launch.waited:
                break
            steps.append(step)
            state = step.new
        return steps

    def take(self, count):
        """The first ``count`` steps of launched(...) taken in turn, each as
        advance(state, dt) would take it (judged, not failed): yields each
        new state with the stepper's iterations and watched values its
        step's, without advance's checks, which the caller made for all of
        them at once (FlowSolver._take_launched)."""
        queued, phases = self._queued, self.phases
        for _ in range(count):
            step = queued.popleft()
            self.steps_ahead += 1
            phases.waits += 1
            if step.marks is not None:
                phases.add_graph(step.marks)
            self.momentum_iterations, self.pressure_iterations = step.iterations
            self._graph_made, self._made_readback = step.new.u_s, step.readback
            yield step.new

    def launched_rates(self, steps):
        """(convective rates, changes max |u^{n+1} - u^n|): arrays over the
        Queued ``steps``' new states, from their readbacks, over all ranks."""
        values = numpy.array([(s.readback.copy_of(self._largest_value)[0], s.readback.copy_of(self._change_value)[0])
                              for s in steps])
        if not self._one_rank:
            self.comm.Allreduce(MPI.IN_PLACE, values, op=MPI.MAX)
        return values[:, 0], values[:, 1]

    def _drop_taken(self, step):
        """Forget the Queued ``step`` just taken (to be taken again as launched,
        or failed) and the steps launched after it (none where it is a loop's:
        the device ends a loop at a failed step)."""
        if step.launch.loop and self._queued:
            raise RuntimeError(f"a loop on the device ran past step {step.new.step}, whose solve failed")
        if not step.launch.loop:
            self.drop_ahead()
        self._undo(step)

    def _after(self, state, dt, buffers=None):
        """The state a step of dt from ``state`` makes, in the buffers it writes
        (_targets; ``buffers``: its _buffers, where the caller has them)."""
        (u_p, u_s, p), _, _, implicit = buffers or self._buffers(state)
        return FlowState(u_p, state.u, u_s, p, state.p, state.t + dt, state.step + 1, dt, implicit,
                         state.implicit, state.u_s)

    def _targets(self, state):
        """The buffers a step from ``state`` writes: u^{n+1}, u_s^{n+1}, p^{n+1}."""
        return self._buffers(state)[0]

    def _buffers(self, state):
        """(_targets, the arrangement of the buffers, the place of u in its
        pool or None, the FlowState.implicit array beside u^{n+1}) of
        ``state``: worked out once for each arrangement of
        the time levels' pools, which repeats every few steps, and found
        again by the identities of the arrays the state holds (the host asks
        for each state's several times a step)."""
        arrays = (state.u, state.u_old, state.u_s, state.u_s_old, state.p, state.p_old)
        ids = tuple(map(id, arrays))
        buffers = self._arrangements.get(ids)
        if buffers is None:
            targets = (self._next(self._velocity, state.u, state.u, state.u_old),
                       self._next(self._faces, state.u_s, state.u_s, state.u_s_old),
                       self._next(self._pressure, state.p, state.p, state.p_old))
            place = next((k for k, b in enumerate(self._velocity) if b is state.u), None)
            buffers = (targets, tuple(address(a) for a in arrays), place, self._implicit_of(targets[0]))
            pools = (self._velocity, self._velocity, self._faces, self._faces, self._pressure, self._pressure)
            if all(any(a is b for b in pool) for a, pool in zip(arrays, pools)):  # ids the pools keep alive
                self._arrangements[ids] = buffers
        return buffers

    def _graph_key(self, state, dt, buffers):
        """(key, arrangement) of the step's graph from ``state`` (its
        _buffers): dt, r and the KSPs' workspaces (a solve taken again as
        launched may have made new ones); the buffers, the extrapolation and
        the watchers. The key is the same object while it stays the same, so
        that the graphs' cache finds it by identity."""
        r = dt / (state.dt_old or dt)
        if self._contexts is None:  # the graphcg contexts the step's graph queues its solves into
            self._contexts = tuple(ksp.getPythonContext() for _, ksp, _ in self.solves)
        key = (dt, r, *(context.generation for context in self._contexts))
        if key != self._last_key:
            self._last_key = key
        return self._last_key, (*buffers[1], state.step >= 2, len(self.watchers))

    def _launch(self, state, dt, replayed_only=False):
        """The step from ``state`` as one CUDA graph per arrangement of the
        buffers (all dropped when the key changes), queued for the host to
        take (Queued): its solves queued into it (graphcg's loops the device
        ends), the new state's convective rate, change and watched values
        computed in it, and everything the host reads of the step copied
        after it (StepReadback); not waited for. The graphs that start from
        the first place in the pools are marked: their own kernels stamp the
        device's clock around each phase of the step (GraphPhases; one launch
        in four, which meets four of the sixteen steps between Fischer's
        restarts: the phases are a sample, the step's time the events'), the
        others are captured without. ``replayed_only``: launched only where
        the graph is captured (a step launched ahead: none run eagerly or
        captured)."""
        buffers = self._buffers(state)
        key, arrangement = self._graph_key(state, dt, buffers)
        marked = self.xp is not numpy and buffers[2] == 0
        arrangement = (*arrangement, marked)
        replay = self.step_graphs.captured(key, arrangement)
        if replayed_only and not replay:
            return
        start = time.perf_counter()
        marks = self._phase_marks(arrangement) if marked else None
        if not replay:  # a new dt's momentum preconditioner set up before a capture, which cannot allocate
            for _, ksp, _ in self.solves:
                ksp.setUp()
        new = self._after(state, dt, buffers)

        def step():  # run where the graph is captured or launched, not where it replays
            if marks is None:
                self._advance(state, dt, queued=True)
                return
            marks.recorded.clear()
            with marks("Step"):  # the same replay's whole step: the phases' share of it
                self._advance(state, dt, queued=True, marks=marks)
        with self.phases("Step" if replay else "Capture"):
            how = self.step_graphs.run(key, arrangement, step)
        self._count_first_run(replay, how, start)
        readback = self.readbacks[id(new.u_s)]
        readback.mark()
        self._queued.append(Queued(state, dt, new, readback, marks if replay else None, Launch(readback)))

    def _phase_marks(self, arrangement, loop=False):
        """The GraphPhases of a graph's arrangement: one an arrangement, under every key (a launch still running
        writes its memory); a ``loop``'s sum their body's passes."""
        marks = self._graph_marks.get(arrangement)
        if marks is None:  # .. CFL, Step
            marks = self._graph_marks[arrangement] = GraphPhases(self.xp, PhaseTimer.PHASES[:6], summed=loop)
        return marks

    def _count_first_run(self, replay, how, start):
        """Count a graph's run that was not a replay (from ``start``) among the first runs and captures."""
        if not replay:
            seconds = time.perf_counter() - start
            self.phases.first_runs += seconds
            if how == "captured":
                self.phases.captures += 1
                self.phases.capture_seconds += seconds

    # --- loops of steps the device ends -------------------------------------------

    def _loops(self, state, dt):
        """Whether a loop of steps of dt can start from ``state``: one whose
        body repeats the same work (r = 1, the pressure extrapolated), with
        the rule the device judges each step by."""
        return (self.graph_steps > 1 and self.loop_rule is not None and self.step_graphs.refused is None
                and state.dt_old == dt and state.step >= 2)

    def _launch_loop(self, state, dt, limit, replayed_only=False):
        """At most ``limit`` steps of dt from ``state`` as one launch of a CUDA
        graph (one per arrangement of the buffers where it starts, all
        dropped when the key changes): a conditional WHILE node whose body
        is four steps, the pools' period, each after the first under an IF
        node on the verdict of the step before (the flow family's
        step_verdict under loop_rule, with each solve's convergence: pcg's
        clear_unless_converged); each step's values gathered into a row of
        its own, and the loop's status after it. Not waited for; returns
        the Loop, or None where ``replayed_only`` and the graph is not
        captured (a loop launched ahead)."""
        buffers = self._buffers(state)
        key, arrangement = self._graph_key(state, dt, buffers)
        arrangement = (*arrangement, "loop", self.loop_rule)
        replay = self.step_graphs.captured(key, arrangement)
        if replayed_only and not replay:
            return None
        start = time.perf_counter()
        if not replay:
            for _, ksp, _ in self.solves:
                ksp.setUp()
            self.step_graphs.capture_first(arrangement)  # its steps' kernels have run in single steps
            if self.fischer is not None:  # its steps write pressure buffers no single step may have written yet
                self.fischer.reserve(address(p) for p in self._pressure)
        states = [state]
        for _ in range(max(limit, len(self._velocity))):
            states.append(self._after(states[-1], dt, buffers if len(states) == 1 else None))
        if self._loop_status is None:
            self._loop_status = self.xp.zeros(LOOP_SLOTS)
        if not replay:  # a replay's graph copies into the readbacks it was captured with
            self._loop_readbacks()
        marks = self._phase_marks(arrangement, loop=True) if self.xp is not numpy else None
        if replay and marks is not None:
            marks.clear()
        base = self._loop_base
        self._loop_base = self.graph_steps - base
        self.flow_kernels.loop_start(self._loop_status, limit, base)
        with self.phases("Step" if replay else "Capture", steps=0):
            how = self.step_graphs.run(key, arrangement, lambda: self._loop(states[:len(self._velocity)], dt, marks))
        self._count_first_run(replay, how, start)
        self._loop_result.mark()
        # the rows its steps wrote: a first run may have made them anew (_advance)
        return _Loop(state, dt, states, limit, base, replay, self._loop_rows, marks if replay else None)

    def _loop_readbacks(self):
        """(the rows of a loop's steps, the copy of its status), made again where the sources changed (a
        solve's first queue may make its records anew: on a run before a capture)."""
        sources = self._readback_sources()
        if self._loop_rows is None or not self._loop_rows.matches(sources):
            self._loop_rows = StepReadback(self.xp, sources, 2 * self.graph_steps, self._loop_status)
        if self._loop_result is None:
            self._loop_result = StepReadback(self.xp, [self._loop_status])
        return self._loop_rows, self._loop_result

    def _loop(self, states, dt, marks=None):
        """A loop's work: steps from the first of ``states`` (the pools'
        period of them, the body; its later steps each where the step before
        kept the loop going), for as long as the device's verdict says so;
        captured as conditional nodes, and run on the host, reading each
        verdict, where it is not (a first run; NumPy). ``marks``: the
        GraphPhases that the body's first step stamps, summed over the
        loop's passes."""
        xp, k, status = self.xp, self.flow_kernels, self._loop_status
        capturing = xp is not numpy and xp.cuda.get_current_stream().is_capturing()
        if capturing:
            from gpu_mats.kernels.cuda_graphs import if_then, while_loop
        pcg = family("pcg", xp)
        columns = [Verdicts(ksp).column for _, ksp, _ in self.solves]

        def going():
            return bool(to_host(xp, status[GO:GO + 1])[0])

        def from_step(j):
            if j or marks is None:
                self._advance(states[j], dt, queued=True, loop=True)
            else:
                marks.recorded.clear()
                with marks("Step"):
                    self._advance(states[0], dt, queued=True, marks=marks, loop=True)
            for (_, ksp, count), column in zip(self.solves, columns):
                pcg.clear_unless_converged(status[FINE:FINE + 1], ksp.getPythonContext().records(count), column)

            def verdict(handle):
                k.step_verdict(status, self._largest_value, self._change_value, dt, self.loop_rule, handle)
            if j == len(states) - 1:
                verdict(0)
            elif capturing:
                if_then(verdict, lambda: from_step(j + 1))
            else:
                verdict(0)
                if going():
                    from_step(j + 1)

        if capturing:
            def body(handle):
                from_step(0)
                k.loop_go(status, handle)
            while_loop(lambda handle: k.loop_go(status, handle), body)
        else:
            while going():
                from_step(0)
        self._loop_result.queue()

    def _take_loop(self, loop, more):
        """Wait for ``loop`` (a _Loop launched), queue the steps it ran for the
        host to take (Queued, judged), and launch the next loop ahead where
        this one ran all its steps and the last kept the loop going, and
        ``more`` (advance's ``loop``) allows more."""
        rows, result = loop.rows, self._loop_result
        self._wait(result)
        status = result.host[0]
        count, keep = int(status[COUNT]), bool(status[KEEP])
        self.phases.add_steps("Step" if loop.replayed else "Capture", count)
        if loop.marks is not None:  # read before the next loop, which stamps the same memory, is launched
            self.phases.add_graph(loop.marks, steps=-(-count // len(self._velocity)))  # its body's passes
        launch = Launch(result, loop=True)
        launch.waited = True
        steps = [Queued(before, loop.dt, new, rows.row(loop.base + j), None, launch)
                 for j, (before, new) in enumerate(zip(loop.states[:count], loop.states[1:count + 1]))]
        self._queued.extend(steps)
        self._judge(steps)
        left = more - (count - 1)
        if count == loop.limit and keep and left > 0:
            self._ahead_loop = self._launch_loop(loop.states[count], loop.dt, min(self.graph_steps, left),
                                                 replayed_only=True)

    def _advance(self, state, dt, queued=False, marks=None, loop=False):
        """The step; ``queued``: its solves queued (graphcg.queue) for a CUDA
        graph that holds the whole step, and the new convective rate and the
        watchers' values with them, copied to the host (into a row of the
        loop's readback where it is a ``loop``'s step); ``marks``: a
        GraphPhases that the graph's own events time its phases by."""
        m, xp, k = self.matrices, self.xp, self.updates
        phase = (marks or untimed) if queued else self.phases  # a graph's phases are timed by its own events
        u_p, u_s, p = self._targets(state)
        implicit = self.momentum_ksp is not None
        with phase("Explicit"):
            r = dt / (state.dt_old or dt)
            target = self.u_hat if implicit else u_p
            explicit = functools.partial(self._explicit, state, dt, r, target, implicit)
            if self.explicit_graphs is None or queued:
                explicit()
            else:  # a graph per arrangement of the buffers, all dropped when dt or r changes
                arrangement = tuple(address(a) for a in (state.u, state.u_old, state.u_s, state.u_s_old, target))
                self.explicit_graphs.run((dt, r), arrangement, explicit)
        self._pressure_guess(state, dt, self.q_guess)
        if implicit:
            with phase("Momentum"):
                m.G(self.q_guess, self.gradient.ravel())
                k.three_term(self.u_hat.ravel(), 1.0, self.u_hat.ravel(), 1.0, self.gradient.ravel(), 0.0,
                             self.u_hat.ravel())
                self._solve_momentum(state, u_p, r, queued)
                k.three_term(u_p.ravel(), 1.0, u_p.ravel(), -1.0, self.gradient.ravel(), 0.0, u_p.ravel())
                if self.guess_faces is not None:
                    self._guess_at_faces(dt)
        with phase("Pressure"):
            q = self._solve_pressure(u_p, lambda guess: self.updates.copy(guess, self.q_guess), state.t + dt, dt,
                                     state.p, self._face_terms(state, dt), queued, step=address(p))
        try:
            with phase("Correct"):
                self._correct(q, u_p, u_s, dt)  # u^p becomes u^{n+1}
                xp.multiply(q, -1.0 / dt, out=p)
                if self.forcing is not None:
                    self.forcing.hold(u_p, u_s, dt)
        finally:  # also where a capture refused the work (PETSc's array must go back)
            restore_array(self.q, "r")
        new = self._after(state, dt)
        if queued:
            with phase("CFL"):
                self._queue_rate(u_s)
            if self.track_change:
                k.max_abs(self._change_value, u_p.ravel(), state.u.ravel(), self._largest_scratch)
            for queue, _ in self.watchers:
                queue(new)
            if loop:
                self._loop_readbacks()[0].queue()
            else:
                self._queue_readback(u_s)
        return new

    def _readback_sources(self):
        """What the host reads of a step: the solves' records first, the convective rate, the change, the
        watchers' values, the eddy viscosity's largest rate, the flow rate's added velocity."""
        records = [ksp.getPythonContext().records(count) for _, ksp, count in self.solves]
        return [*records, self._largest_value, self._change_value, *(out for _, out in self.watchers),
                *(() if self.eddy is None else (self.eddy.largest,)),
                *(() if self.forcing is None or self.forcing.kind != "flow_rate" else (self.forcing.delta,))]

    def _queue_readback(self, u_s):
        """The copies of the step's values to the host, into its graph, in the
        readback of the face buffer ``u_s`` it writes (a new StepReadback
        where the arrays are new: only on a run before a capture)."""
        sources = self._readback_sources()
        readback = self.readbacks.get(id(u_s))
        if readback is None or not readback.matches(sources):
            readback = self.readbacks[id(u_s)] = StepReadback(self.xp, sources)
        readback.queue()

    def _explicit(self, state, dt, r, target, implicit):
        """target = u^n + dt Omega^-1 (s - C(u_s*) u* - X u* - K v - S v - N u*): the explicit part of the step."""
        m, xp, k = self.matrices, self.xp, self.updates
        k.three_term(self.u_star.ravel(), 1 + r / 2, state.u.ravel(), -r / 2, state.u_old.ravel(), 0.0,
                     state.u.ravel())
        k.three_term(self.convecting, 1 + r / 2, state.u_s, -r / 2, state.u_s_old, 0.0, state.u_s)
        m.refresh_convection(self.convecting)
        if self.eddy is not None:
            self.eddy.refresh(self.velocity_gradients(state.u, state.t), m)
        diffused = state.u if implicit else self.u_star
        m.explicit_rate(self.u_star, diffused, self.rate)
        if m.normal_term is not None:
            m.normal_term(diffused.ravel(), self.rate.ravel(), self.rate.ravel())
        if m.diffusion_correction is not None or m.convection_correction is not None:  # explicit, on u*
            gradients = self.velocity_gradients(self.u_star, state.t + dt / 2).ravel()
            if m.diffusion_correction is not None:
                m.diffusion_correction(gradients, self.rate.ravel(), self.rate.ravel())
            if m.convection_correction is not None:
                self._convection_correction(gradients)
        xp.multiply(self.inverse_volume, dt, out=self.weight)
        source, _, _ = self.boundary(state.t + dt / 2)
        if self.forcing is not None:
            source = self.forcing.source(source)
        self.flow_kernels.explicit_update(target, state.u, source, self.rate, self.weight)

    def _convection_correction(self, gradients):
        """rate += Ms (u_s* Kc grad u*), component by component, u_s* capped
        at nu / |s| on each face: the convected velocities moved from the
        midpoints of the centroids to the faces' centroids
        (plugin.flow.corrections.convection_correction, convection_cap)."""
        m = self.matrices
        m.convection_correction(gradients, self.convected.ravel())
        xp, (low, high) = self.xp, self.convection_bounds
        xp.minimum(xp.maximum(self.convecting, low, out=self.capped), high, out=self.capped)
        xp.multiply(self.convected, self.capped, out=self.convected)  # F_f / A_f times the correction
        for component, faces in enumerate(self.convected):
            m.Ms(faces, self.rate[component], self.rate[component])

    def project(self, state):
        """Make a starting velocity discretely divergence-free in place (u, and
        u_s with Ms u_s = 0) by the step's projection, from a zero guess: a
        given field, even a divergence-free one, is not so on the grid."""
        q = self._solve_pressure(state.u, lambda guess: guess.fill(0.0), state.t, 0.0, None)
        self._correct(q, state.u, state.u_s, 0.0)
        restore_array(self.q, "r")
        state.u_old[...] = state.u
        state.u_s_old[...] = state.u_s

    def _solve_momentum(self, state, u_p, r, queued=False):
        """Every component in one solve (the momentum matrix holds a block per
        component) of (Omega + dt/2 D) y = Omega y^, y^ = u^ (+ G q*) in
        u_hat, from y^ plus the implicit share y - y^ (about dt/2 Omega^-1 D
        y^) of this step guessed from the last two steps' (state.implicit,
        implicit_old): each share over its step extrapolated linearly in
        time to this one, r = dt / dt_old (from the second step: the last
        share alone, times r). The solve is left the guess's error. The new
        state's implicit share goes beside u_p. ``queued``: into a step's
        graph."""
        ksp, k = self.momentum_ksp, self.updates
        u_hat, rhs, share = self.u_hat.ravel(), self.momentum_rhs.ravel(), self._implicit_of(u_p).ravel()
        extrapolated = state.step >= 2  # both shares made by solves
        k.three_term(u_p.ravel(), 1.0, u_hat, r * (1.0 + r) if extrapolated else r, state.implicit.ravel(),
                     -r * r if extrapolated else 0.0, state.implicit_old.ravel())
        self.xp.multiply(self.u_hat, self.volumes, out=self.momentum_rhs)
        if queued:
            ksp.getPythonContext().queue(ksp, rhs, u_p.ravel(), 0)
        else:
            b, x = self.matrices.vecs(rhs), self.matrices.vecs(u_p.ravel())
            mark_written(b)
            mark_written(x)
            ksp.solve(b, x)
            _check(ksp, "momentum")
            mark_read(x)
            self.momentum_iterations = ksp.getIterationNumber()
        k.three_term(share, 1.0, u_p.ravel(), -1.0, u_hat, 0.0, u_hat)

    def _implicit_of(self, u):
        """The FlowState.implicit buffer beside the velocity buffer u (None without a momentum solve)."""
        return None if self._implicit is None else self._implicit[id(u)]

    def velocity_gradients(self, u, t):
        """(dim * dim, n): the cell gradient of each component of u (the held velocities at time t)."""
        self.matrices.velocity_gradient(u.ravel(), self.velocity_gradient.ravel())
        gradients = self.boundary(t)[2]
        if gradients is not None:
            self.velocity_gradient += gradients
        return self.velocity_gradient

    def _guess_at_faces(self, dt):
        """guess_faces = theta ((Gamma + K) G q* - (Gs + T G) q*), from G q* in
        self.gradient (the momentum phase's), theta = a / (1 + a), a = dim nu dt / delta^2."""
        m, g = self.matrices, self.guess_faces
        m.Gamma(self.gradient.ravel(), g)
        if m.skewness_correction is not None:  # G q*'s own gradient, no held values at the boundary
            m.velocity_gradient(self.gradient.ravel(), self.velocity_gradient.ravel())
            m.skewness_correction(self.velocity_gradient.ravel(), g, g)
        g *= -1.0
        if m.pressure_correction is not None:
            m.pressure_correction(self.gradient.ravel(), g, g)
        m.Gs(self.q_guess, g, g)  # (Gs + T G) q* - (Gamma + K) G q*
        if dt != self._share_dt:  # dt changes seldom with Crank-Nicolson (its matrix is kept)
            a = self.xp.multiply(self.face_diffusion, dt * self.shape[0], out=self.guess_share)
            self.xp.divide(a, -(1.0 + a), out=self.guess_share)
            self._share_dt = dt
        g *= self.guess_share

    def _face_terms(self, state, dt):
        """What w adds to the interpolated u^p: the face memory and g, or None."""
        if self.departure is None:
            return self.guess_faces
        self._remembered(state, dt)
        if self.guess_faces is not None:
            self.departure += self.guess_faces
        return self.departure

    def _remembered(self, state, dt):
        """departure = beta (u_s^n - Gamma u^n (- K grad u^n)): beta = 1 - Fo / (1 + Fo^2),
        Fo = dt face_diffusion; or (damping) (2 - x) / (2 + x) with Crank-Nicolson, 1 - x
        with explicit diffusion, x = dt mode_rate."""
        self._interpolated(state.u, state.t, self.departure)
        self.updates.three_term(self.departure, 1.0, state.u_s, -1.0, self.departure, 0.0, self.departure)
        if dt != self._memory_dt:  # in place: a step's CUDA graph holds no temporaries
            xp, beta = self.xp, self.memory_share
            if self.mode_rate is None:
                fo = xp.multiply(self.face_diffusion, dt, out=self.face_scratch)
                xp.multiply(fo, fo, out=beta)
                beta += 1.0
                xp.divide(fo, beta, out=beta)
                xp.subtract(1.0, beta, out=beta)
            else:
                x = xp.multiply(self.mode_rate, dt, out=self.face_scratch)
                if self.matrices.momentum is None:
                    xp.subtract(1.0, x, out=beta)
                else:
                    xp.add(x, 2.0, out=beta)
                    xp.subtract(2.0, x, out=x)
                    xp.divide(x, beta, out=beta)
            self._memory_dt = dt
        self.departure *= self.memory_share

    def _solve_pressure(self, u_p, start, t, dt, pressure, face_terms=None, queued=False, step=None):
        """q from A q = Ms (w + c) + f(t) - dt b_p, w = Gamma u^p (+ K grad u^p) (+
        ``face_terms``: the face memory, g) and c the deferred correction (both
        kept for the correction of u_s), starting
        from what ``start`` writes into q's array; returns that array, which
        stays taken until the caller restores it. The first c is that of
        -dt ``pressure`` (p^n; None: of the start), not of the extrapolated
        guess: extrapolation amplified the lagged correction's error on
        tetrahedra until the flow blew up. dt = 0: a projection, the
        outflow pressures play no part. ``queued``: the solves queued into a
        step's graph (graphcg.queue; record k the k-th corrector's).
        ``step``: a time step's key (its pressure buffer's address), whose
        first solve starts from Fischer's guess instead, where there is one,
        and joins its basis (kept under the key where queued, for _undo)."""
        m, n = self.matrices, self.cell_scratch.size
        fischer = self.fischer if step is not None else None
        guess_gradient = None
        if step is not None and m.held_difference is not None:  # G q*: the momentum phase's, else made here
            if self.momentum_ksp is None:
                m.G(self.q_guess, self.gradient.ravel())
            guess_gradient = self.gradient
        self._interpolated(u_p, t, self.w, guess_gradient)
        if face_terms is not None:
            self.w += face_terms
        start(get_array(self.q, "w", n))
        restore_array(self.q, "w")
        _, inflow, _ = self.boundary(t)
        self.pressure_iterations = 0
        for corrector in range(1 + self.correctors):
            if self.corrected is not None:  # c from p^n (or the start), then from each corrector's q
                if corrector == 0 and pressure is not None:
                    self.xp.multiply(pressure, -dt, out=self.cell_scratch)
                    self._cell_gradient(self.cell_scratch, dt)
                else:
                    self._cell_gradient(get_array(self.q, "r", n), dt)
                    restore_array(self.q, "r")
                m.pressure_correction(self.gradient.ravel(), self.corrected, self.w)
            b = get_array(self.b, "w", n)
            m.Ms(self._face_velocities(), b, inflow)
            outflow = m.outflow_pressure
            if outflow is not None and dt:
                self.updates.three_term(b, 1.0, b, -dt, outflow["cells"], 0.0, b)
            restore_array(self.b, "w")
            guessed = fischer is not None and corrector == 0
            if guessed:
                try:
                    fischer.guess(b, get_array(self.q, "w", n))
                finally:
                    restore_array(self.q, "w")
            if queued:  # the arrays stay where PETSc keeps them: b's is the one just written
                try:
                    q = get_array(self.q, "w", n)
                    self.pressure_ksp.getPythonContext().queue(self.pressure_ksp, b, q, corrector)
                    if guessed:
                        fischer.update(q, step)
                finally:
                    restore_array(self.q, "w")
                continue
            self.pressure_ksp.solve(self.b, self.q)
            _check(self.pressure_ksp, "pressure")
            self.pressure_iterations += self.pressure_ksp.getIterationNumber()
            if guessed:
                try:
                    fischer.update(get_array(self.q, "r", n))
                finally:
                    restore_array(self.q, "r")
        return get_array(self.q, "r", n)

    def _interpolated(self, u, t, out, guess_gradient=None):
        """out = Gamma u (+ K grad u, the skewness correction; the held velocities
        at time t). ``guess_gradient``: G q* where u is u^p, which does not hold
        the walls' velocities, u^p + G q* (about u^{n+1}) does: grad u^p is then
        that of u^p + G q* less the gradient of G q* with every boundary face
        free (held_difference on G q*)."""
        m = self.matrices
        m.Gamma(u.ravel(), out)
        if m.skewness_correction is not None:
            gradients = self.velocity_gradients(u, t).ravel()
            if guess_gradient is not None:
                m.held_difference(guess_gradient.ravel(), gradients, gradients)
            m.skewness_correction(gradients, out, out)

    def _face_velocities(self):
        """w + c: the face velocities the pressure corrects (w without the deferred correction)."""
        return self.w if self.corrected is None else self.corrected

    def _pressure_guess(self, state, dt, q):
        """q = -dt p^{n+1} guessed: p^n extrapolated linearly in time, or p^n.
        p^0 is no pressure of the flow (zero, or a restart's), so the
        extrapolation waits for p^2."""
        if self.extrapolate_pressure and state.step >= 2:
            r = dt / state.dt_old
            self.updates.three_term(q, -dt * (1 + r), state.p, dt * r, state.p_old, 0.0, state.p)
        else:
            self.xp.multiply(state.p, -dt, out=q)

    def pressure_gradient(self, p):
        """(dim, n): the cell gradient G p of a pressure, with the outflow pressures' part."""
        self._cell_gradient(p, -1.0)  # q = -dt p with dt = -1
        return self.gradient

    def _cell_gradient(self, q, dt):
        """gradient = G q, with the outflow pressures' part times -dt."""
        self.matrices.G(q, self.gradient.ravel())
        outflow = self.matrices.outflow_pressure
        if outflow is not None and dt:
            self.updates.three_term(self.gradient.ravel(), 1.0, self.gradient.ravel(), -dt,
                                    outflow["gradient"].ravel(), 0.0, self.gradient.ravel())

    def _correct(self, q, u, u_s, dt):
        """u += G q and u_s = w + c + Gs q: the projection's correction, with the
        outflow pressures' parts times -dt."""
        self._cell_gradient(q, dt)
        self.updates.three_term(u.ravel(), 1.0, u.ravel(), 1.0, self.gradient.ravel(), 0.0, u.ravel())
        self.matrices.Gs(q, u_s, self._face_velocities())
        outflow = self.matrices.outflow_pressure
        if outflow is not None and dt:
            self.updates.three_term(u_s, 1.0, u_s, -dt, outflow["faces"], 0.0, u_s)

    # --- global quantities (each one reduction) ----------------------------------

    def _max(self, local):
        return float(local) if self._one_rank else self.comm.allreduce(float(local), op=MPI.MAX)

    def _sum(self, local):
        return float(local) if self._one_rank else self.comm.allreduce(float(local), op=MPI.SUM)

    def _largest(self, x, y=None):
        """max |x - y| over all ranks (NaN if anywhere NaN): one kernel pair into fixed scratch, one read."""
        self.updates.max_abs(self._largest_value, x, y, self._largest_scratch)
        return self._max(to_host(self.xp, self._largest_value)[0])

    def convective_rate(self, state):
        """max over cells of sum_f A_f |u_s,f| / (2 Omega_i): the CFL number is
        dt times this (computed by the step's graph where one made ``state``)."""
        if self._made_by_graph(state):  # the step's graph computed and copied it (its time is the step's)
            return self._max(self._copied(self._largest_value)[0])
        with self.phases("CFL"):
            self._queue_rate(state.u_s)
            return self._max(to_host(self.xp, self._largest_value)[0])

    def _queue_rate(self, u_s):
        """The convective rate of u_s into _largest_value, not read."""
        self.matrices.largest_speed_rate(u_s, self._largest_value, self.cell_scratch, self.face_scratch,
                                         self._largest_scratch)

    def unit_convective_rate(self):
        """The convective rate of a unit speed on every face: sets the first
        step of a fluid at rest."""
        self.face_scratch[...] = 1.0
        self.matrices.flux_rate(self.face_scratch, self.cell_scratch)
        return self._largest(self.cell_scratch)

    def kinetic_energy(self, state):
        return 0.5 * self._sum(((state.u * state.u).sum(axis=0) * self.volumes).sum())

    def divergence_norm(self, state):
        """||Ms u_s + f||_2 (f: the inflow fluxes): what the projection makes zero."""
        _, inflow, _ = self.boundary(state.t)
        self.matrices.Ms(state.u_s, self.cell_scratch, inflow)
        return numpy.sqrt(self._sum((self.cell_scratch * self.cell_scratch).sum()))

    def largest_eddy_rate(self, state):
        """The largest D_ii / Omega_i that the eddy viscosity of the step that made ``state`` added, over all
        ranks (its graph's copy where a graph made it)."""
        largest = self.eddy.largest
        return self._max((self._copied(largest) if self._made_by_graph(state) else to_host(self.xp, largest))[0])

    def eddy_rate_now(self, state):
        """The largest D_ii / Omega_i that the eddy viscosity of ``state``'s own velocity adds, over all ranks,
        computed now (before a first step, whose dt no step's eddy viscosity limits); D's values refreshed
        from it, as the step will."""
        self.eddy.refresh(self.velocity_gradients(state.u, state.t), self.matrices)
        return self._max(to_host(self.xp, self.eddy.largest)[0])

    def mean_pressure_gradient(self, state):
        """-dP/dx of the step that made ``state`` under a forcing (its graph's copy where a graph made it)."""
        f = self.forcing
        made = self._made_by_graph(state) and f.kind == "flow_rate"
        return f.implied(self._copied(f.delta) if made else None)

    def change_rate(self, state):
        """max |u^{n+1} - u^n| / dt, the distance from a steady state (the step's graph's where one made
        ``state`` and computed it: ``track_change``)."""
        if self._made_by_graph(state) and self.track_change:
            return self._max(self._copied(self._change_value)[0]) / state.dt_old
        return self._largest(state.u.ravel(), state.u_old.ravel()) / state.dt_old


@dataclass(eq=False)
class _Loop:
    """A loop of steps launched (FractionalStep._launch_loop): the state it
    starts from and its dt, the states its steps would make (limit of them,
    or the body's four where more), its first row in the loop's readback,
    whether it was a replay, the readback its steps' rows went to, and the
    GraphPhases its replay stamped."""

    state: FlowState
    dt: float
    states: list
    limit: int
    base: int
    replayed: bool
    rows: StepReadback
    marks: object = None


def _check(ksp, name):
    reason = ksp.getConvergedReason()
    if reason < 0:
        raise StepFailure(f"the {name} solve failed: {ksp.getType()} stopped with KSPConvergedReason "
                          f"{reason} after {ksp.getIterationNumber()} iterations")
