"""``-ksp_type graphcg``: preconditioned CG in blocks of iterations that the
GPU runs without the host, each block replayed as one CUDA graph.

PETSc's cg waits for the GPU at every dot product and launches each vector
operation from the host: below a few million unknowns that host time sets
the pace of a solve. graphcg keeps CG's scalars in device memory
(gpu_mats.device_cg), queues a block of iterations at once and reads their
residual norms back once, at the block's end; with a gpusell matrix and a
preconditioner that works on arrays without temporaries (gpuamg, ainv
fsai/spai, boxfft without walled transforms, jacobi, none), on one rank or
on several by NCCL (below), the block (the first one with the
solve's start: r = b - A x, z, p) is captured as a CUDA graph at its second
use and replayed by one launch after. The iterations are CG's, in the same
arithmetic whether replayed or launched.

The host's check at the end of a block sees each iteration's residual norm
(monitors are called with them, in order) and stops when the last one
passes the convergence test; a solve may so take up to a block's length
less one more iterations than cg would. By default (-ksp_graphcg_block 0)
the first block is as long as the last solve needed (its first iteration
whose norm passed the test), and the blocks after it one iteration each: a
run of similar solves (a time step's pressure) then checks once or twice a
solve and does an extra iteration only where a solve needs fewer than the
last. Where the driver and NVIDIA's cuda-bindings allow conditional graph
nodes (CUDA 12.4), the graphs can hold a loop in place of a block
(-ksp_graphcg_loop): after each iteration a kernel applies PETSc's default
test (rtol, atol, dtol, in the KSP's norm) and the WHILE node goes on or
stops, so a solve is one replay and one read; the host then judges every
norm as with blocks, and goes on in blocks of one where its test (a
monitor's, a custom one) has not passed. queue() and settle() put such a
solve into a graph that holds more (the flow's whole step), judged after
it from the device's own test. Like cacg, it leaves the null space to the right-hand side (PETSc
projects b where the matrix has a transpose null space): CG's iterates
stay in the range.

A KSPGuess of Fischer's model 2 (-ksp_guess_type fischer
-ksp_guess_fischer_model 2,SIZE) is applied by KSPSolve to a KSP's own
solves; a queued solve applies it itself, on the device
(gpu_mats.previous_solutions), so that a step's graph holds it. Other
guesses keep a step out of one graph (queue_refusal).

-ksp_graphcg_single_reduction takes Chronopoulos and Gear's iteration in
place of CG's (PETSc's cg -ksp_cg_single_reduction): one sum of two dot
products an iteration. It is not the flow's default (BENCHMARKS.md,
"The whole step on the GPU", has why).

Any Mat and PC work, through PETSc where they are not the project's (then
without graphs). On several ranks the dot products are summed over them
(two sums an iteration, as cg's): by an NCCL all-reduce on the device
between GPUs (-ksp_graphcg_transport), so that the blocks are still
captured, where the product and the preconditioner exchange their halos by
NCCL too (gpusell, gpuamg); else on the host by MPI, and launched. The
loop the device ends is one rank's.
"""

import math

import numpy
from petsc4py import PETSc

from gpu_mats.backend import address, to_host
from gpu_mats.device_cg import NORMS, DeviceCG
from gpu_mats.exchange import TRANSPORTS, summed_over
from gpu_mats.previous_solutions import PreviousSolutions
from gpu_mats.kernels import conditional_loops, keyed_graphs
from gpu_mats.kernels.pcg import DIVERGENCE, FLAG, INDEFINITE_OPERATOR, TARGET

from .array_operators import matrix_product, preconditioner
from .arrays import get_array, module_for_vec_type, restore_array, vec_over
from .options import Option, OptionError
from .python_type import PythonKSP

Reason = PETSc.KSP.ConvergedReason
_NORM_COLUMNS = {PETSc.KSP.NormType.UNPRECONDITIONED: NORMS.index("unpreconditioned"),
                 PETSc.KSP.NormType.PRECONDITIONED: NORMS.index("preconditioned")}
_UNPRECONDITIONED = _NORM_COLUMNS[PETSc.KSP.NormType.UNPRECONDITIONED]
_LONGEST = 1000  # the longest block
_LOOP_ROWS = 128  # the most iterations of one loop: the host reads after each
_RECORDS = 8  # the most solves queued between two settles


class _Workspace:
    """DeviceCG's vectors for one local size and backend, PETSc vectors over
    them (for a Mat or PC that runs through PETSc), and the block graphs."""

    def __init__(self, xp, A, capacity):
        self.n, self.xp = A.getLocalSize()[0], xp
        self.cg = DeviceCG(xp, self.n, capacity)
        comm, size = A.getComm(), A.getSize()[0]
        self.records = xp.zeros((_RECORDS, self.cg.store.size))  # the stores of the solves queued in a step
        self.record_views = {}  # count -> records[:count]
        self.diagonal = xp.zeros(self.n)  # a Jacobi preconditioner's
        arrays = (self.cg.x, self.cg.r, self.cg.z, self.cg.p, self.cg.w, self.diagonal)
        self._vecs = {id(array): vec_over(array, comm, size) for array in arrays}
        self.graphs = keyed_graphs() if xp is not numpy else None
        self.previous = None  # Fischer's basis of a KSPGuess, made by the first solve queued with one

    def vec(self, array):
        return self._vecs[id(array)]

    def destroy(self):
        for vec in self._vecs.values():
            vec.destroy()


class GraphCG(PythonKSP):
    """The context of a KSP of type graphcg (petsc4py's Python KSP protocol)."""

    TYPE, TITLE, EVENTS = "graphcg", "CG in blocks replayed as CUDA graphs (graphcg)", ("Block",)
    OPTIONS = (
        Option("ksp_graphcg_block", "block", 0, "iterations the GPU runs between the host's checks of the residual "
               "norm (0: the first block as long as the last solve needed, then one at a time)", low=0, high=_LONGEST,
               view="block {}"),
        Option("ksp_graphcg_graph", "use_graphs", True, "replay each block as one CUDA graph where the matrix and "
               "preconditioner allow it (gpusell; gpuamg, ainv fsai/spai, boxfft on periodic axes, jacobi, none; "
               "on several ranks with NCCL's halos and sums)"),
        Option("ksp_graphcg_loop", "loop", False, "in those graphs, iterate in a loop that the device ends by "
               "PETSc's default convergence test (a conditional WHILE node: CUDA 12.4 and NVIDIA's cuda-bindings) in "
               "place of blocks the host checks; the host still judges every norm (blocks replay faster where a run "
               "of solves takes steady counts; a step's graph always loops; one rank)"),
        Option("ksp_graphcg_single_reduction", "single_reduction", False, "Chronopoulos and Gear's iteration, as "
               "cg's -ksp_cg_single_reduction: r . z and z . A z in one sum (one all-reduce an iteration on several "
               "ranks; on one GPU the step and the update fuse into fewer launches); needs -ksp_norm_type "
               "unpreconditioned", view="single reduction {}"),
        Option("ksp_graphcg_transport", "transport", "auto", "in parallel, how the dot products are summed over "
               "the ranks: nccl (an all-reduce between GPUs, which the blocks' graphs hold), mpi (through host "
               "memory: the blocks are launched), auto (NCCL for GPU vectors where CuPy has it)", choices=TRANSPORTS),
    )

    def __init__(self):
        super().__init__()
        self._work, self.runs = None, "not run yet"
        # the last solve's iterations, and the first of them whose norm passed the convergence test
        self.last_iterations, self.last_needed, self.blocks_run = 0, 0, 0
        self.generation = 0  # of the workspace: a graph of queued solves is keyed by it
        self.guess = None  # (type, model, size) of the KSP's KSPGuess from the options (None: none)
        self._sums = {}  # (communicator, transport, array module) -> how the dot products are summed over its ranks

    def setFromOptions(self, ksp):
        super().setFromOptions(ksp)
        self.guess = _guess_options(ksp.getOptionsPrefix())

    def build(self, ksp):
        if self.single_reduction and ksp.getNormType() != PETSc.KSP.NormType.UNPRECONDITIONED:
            raise OptionError(f"{ksp.getOptionsPrefix() or ''}ksp_graphcg_single_reduction takes the "
                              "unpreconditioned norm (-ksp_norm_type unpreconditioned), which tests each residual "
                              "before it is preconditioned")

    def release(self):
        if self._work is not None:
            self._work.destroy()
        self._work = None

    def _workspace(self, A, capacity):
        work = self._work
        if work is None or work.n != A.getLocalSize()[0] or work.xp is not self.xp or work.cg.capacity < capacity:
            self.release()
            self._work = _Workspace(self.xp, A, capacity)
            self.generation += 1  # graphs that hold the old one's addresses (a caller's) must go
        return self._work

    def _block_length(self, its, max_it):
        """The next block's length: -ksp_graphcg_block, or what the last solve needed first and then 1."""
        if self.block:
            length = self.block
        else:
            length = max(self.last_needed, 1) if its == 0 else 1
        return max(1, min(length, max_it - its))

    def solve(self, ksp, b, x):
        A, _ = ksp.getOperators()
        rtol, atol, dtol, max_it = ksp.getTolerances()
        longest = max(self.block, self.last_needed, _LOOP_ROWS if self.loop else 1)
        work = self._workspace(A, 1 << (longest - 1).bit_length())  # room to grow: a new one drops the graphs
        cg, n, xp = work.cg, work.n, self.xp
        multiply, precondition = self._operators(ksp, work)
        reduce = self._summed_over(ksp.getComm().tompi4py())
        capturable = (self.use_graphs and work.graphs is not None and (reduce is None or reduce.on_device)
                      and multiply.graph_key is not None and precondition.graph_key is not None)
        graph_key = (multiply.graph_key, precondition.graph_key, reduce, self.single_reduction) if capturable else None
        looping = capturable and reduce is None and self.loop and not self.block and conditional_loops() is None
        column = _NORM_COLUMNS[ksp.getNormType()]  # PETSc refuses the others at set-up (KSPSetUpNorms)
        test = (column, rtol, atol, dtol) if looping else None  # the device's convergence test
        nonzero = ksp.getInitialGuessNonzero()
        length = self._next_length(0, max_it, looping)
        guess = get_array(x, "r", n) if nonzero else None  # PETSc's copies happen here, not under a capture
        barray = get_array(b, "r", n)
        try:
            self._run(work, graph_key, ("start", looping, length, address(barray),
                                        None if guess is None else address(guess)),
                      lambda: self._start(cg, barray, guess, length, multiply, precondition, reduce, test,
                                          column == _UNPRECONDITIONED, self.single_reduction))
        finally:
            restore_array(b, "r")
            if nonzero:
                restore_array(x, "r")
        its, reason, self.blocks_run, first, needed, rnorm = 0, Reason.ITERATING, 1, True, None, None
        while True:
            rows, flag = cg.read()
            count = len(rows) - 1
            norms = numpy.sqrt(numpy.maximum(rows[:, column], 0.0))
            finite = numpy.isfinite(rows).all(axis=1)
            for j in range(0 if first else 1, count + 1):
                if not finite[j]:
                    reason = Reason.DIVERGED_NANORINF
                    break
                reason, rnorm = self._record(ksp, its + j, norms[j]), norms[j]
                if needed is None and reason > 0:
                    needed = its + j
                if j < count:
                    reason = Reason.ITERATING  # the iterate is the block's end: only its own verdict counts
            first = False
            its += count
            if reason == Reason.ITERATING and flag:
                reason = _flag_reason(flag)
            elif reason == Reason.ITERATING and its >= max_it:
                reason = Reason.DIVERGED_MAX_IT
            if reason != Reason.ITERATING:
                break
            looping = looping and count == length  # the device's test passed where the host's did not: blocks
            length = self._next_length(its, max_it, looping)
            if looping:
                self._run(work, graph_key, ("loop", length),
                          lambda: cg.loop(length, test, multiply, precondition, reduce))
            else:
                self._run(work, graph_key, ("block", length),
                          lambda: cg.iterate(length, multiply, precondition, reduce))
            self.blocks_run += 1
        self.last_iterations, self.last_needed = its, its if needed is None else needed
        xa = get_array(x, "w", n)
        xa[...] = cg.x
        restore_array(x, "w")
        ksp.setIterationNumber(its)
        if rnorm is not None:
            ksp.setResidualNorm(rnorm)
        ksp.setConvergedReason(reason)
        self.runs = "CUDA graph replays" if capturable else "kernel launches" if xp is not numpy else "NumPy"
        if capturable and work.graphs.refused is not None:
            self.runs = f"kernel launches: {work.graphs.refused}"
        elif test is not None:
            self.runs += " of loops the device ends"

    # --- solves queued into a CUDA graph that holds more than the solve (the flow's step) ---

    def queue_refusal(self, ksp):
        """Why this KSP's solves cannot be queued into a captured graph (None: they can)."""
        A, _ = ksp.getOperators()
        nullspace = A.getTransposeNullSpace()
        if ksp.getComm().getSize() > 1:
            return ("graphcg queues solves into a larger graph on one rank only: their loop the device ends "
                    "would hold NCCL's sums, which conditional graph nodes do not take")
        if ksp.getConvergenceTest() is not None:
            return "a convergence test of the user's: only PETSc's default runs on the device"
        if nullspace and (nullspace.getVecs() or not nullspace.hasConstant()):  # a NULL one is false
            return "a null space other than the constants"
        if self.guess is not None and self.guess[:2] != ("fischer", 2):
            kind, model, _ = self.guess
            return (f"a KSPGuess {kind}" + (f" of model {model}" if kind == "fischer" else "") +
                    ": a step's graph holds Fischer's model 2 only (-ksp_guess_fischer_model 2,SIZE)")
        if module_for_vec_type(A.getVecType()) is numpy:
            return None  # queued solves run at once (tests hold them to solve())
        return conditional_loops()  # the operators' part: queue() refuses a capture of work through PETSc

    def queue(self, ksp, b, x, slot):
        """Queue a solve of A x = b on the arrays b and x (x the guess where
        the KSP takes a nonzero one): CG's start and a loop that the device
        ends by PETSc's default test, then x = the iterate, and the solve's
        norms into record ``slot`` for settle(). Nothing is read back, so a
        CUDA graph being captured can hold it (queue_refusal says where
        not); outside a capture it runs at once."""
        A, _ = ksp.getOperators()
        rtol, atol, dtol, max_it = ksp.getTolerances()
        ksp.setUp()  # the PC of changed operators (a new dt's momentum matrix) is set up before a capture
        work, xp = self._workspace(A, _LOOP_ROWS), self.xp
        cg = work.cg
        multiply, precondition = self._operators(ksp, work)
        if xp is not numpy and xp.cuda.get_current_stream().is_capturing() and (
                multiply.graph_key is None or precondition.graph_key is None):
            from gpu_mats.kernels.cuda_graphs import CaptureError

            raise CaptureError(f"{A.getType()} with {ksp.getPC().getType()}: a product or preconditioner that a "
                               "graph captured on another stream cannot hold (it works through PETSc's kernels, or "
                               "reads values back to the host between its launches)")
        column = _NORM_COLUMNS[ksp.getNormType()]
        nonzero = ksp.getInitialGuessNonzero()
        previous = self._previous_solutions(work, A)
        if previous is not None:  # as KSPSolve's KSPGuess: the guess replaces x
            previous.guess(b, cg.x)
            nonzero = True
        elif nonzero:
            cg.blas.copy(cg.x, x)
        cg.start(b, nonzero, multiply, precondition, reference=column, mean_free=bool(A.getTransposeNullSpace()),
                 unpreconditioned=column == _UNPRECONDITIONED, single_reduction=self.single_reduction)
        cg.loop(min(max_it, _LOOP_ROWS), (column, rtol, atol, dtol), multiply, precondition, start=True)
        cg.blas.copy(x, cg.x)
        if previous is not None:  # CG's direction and its product are free once it has stopped
            previous.update(cg.x, multiply, cg.p, cg.w)
        cg.blas.copy(work.records[slot], cg.store)

    def _previous_solutions(self, work, A):
        """The workspace's Fischer basis where the KSP's KSPGuess is Fischer's model 2 (else None): KSPSolve
        applies the KSPGuess itself, a queued solve here; its increments mean-free where A's null space is the
        constants (PETSc's KSPGuess leaves them be)."""
        if self.guess is None:
            return None
        if work.previous is None:
            work.previous = PreviousSolutions(self.xp, work.n, self.guess[2], mean_free=bool(A.getTransposeNullSpace()))
        return work.previous

    def records(self, count):
        """The records of the first ``count`` solves queued (device memory), for a caller that copies them itself
        (the same view each step: a new one costs the host more than the step's other reads)."""
        work = self._work
        if count not in work.record_views:
            work.record_views[count] = work.records[:count]
        return work.record_views[count]

    def settle(self, ksp, count, copied=None):
        """Judge the ``count`` solves last queued (records 0 .. count - 1; one
        read, or ``copied``, the caller's host copy of records(count)): the
        monitors see each norm, the KSP's iteration number, norm and reason
        become the last solve's. Returns each solve's (iterations, reason);
        ITERATING where a loop stopped at its limit short of max_it (the
        solve is unfinished: its caller must solve again)."""
        judge = Verdicts(ksp)
        results = judge(to_host(self.xp, self.records(count)) if copied is None else copied)
        self.conclude(ksp, judge)
        return results

    def conclude(self, ksp, judge):
        """The KSP's iteration number, norm and reason: those of the last solve ``judge`` (Verdicts) saw."""
        its, reason, rnorm = judge.last
        ksp.setIterationNumber(its)
        ksp.setResidualNorm(rnorm)
        ksp.setConvergedReason(reason)
        self.last_iterations, self.blocks_run, self.runs = its, 1, "a CUDA graph of the caller's"

    def _summed_over(self, comm):
        """How the dot products are summed over ``comm``'s ranks (None on one rank), one for each
        communicator and transport, so that a graph that holds it is replayed with it."""
        if comm.Get_size() == 1:
            return None
        key = (comm.py2f(), self.transport, self.xp)
        if key not in self._sums:
            self._sums[key] = summed_over(comm, self.xp, self.transport, PETSc.Sys.Print)
        return self._sums[key]

    def _operators(self, ksp, work):
        """The KSP's matrix product and preconditioner on the workspace's arrays."""
        A, _ = ksp.getOperators()
        return (matrix_product(A, self.xp, work.vec),
                preconditioner(ksp.getPC(), self.xp, work.vec, work.diagonal))

    def _next_length(self, its, max_it, looping):
        """The next loop's limit, or the next block's length (0 at max_it)."""
        if its >= max_it:
            return 0
        return min(_LOOP_ROWS, max_it - its) if looping else self._block_length(its, max_it)

    @staticmethod
    def _start(cg, b, guess, length, multiply, precondition, reduce, test, unpreconditioned, single_reduction):
        """x = the guess (or 0), CG's start from b, and its first ``length``
        iterations (a loop of at most ``length`` under the device's ``test``);
        ``unpreconditioned``: each residual tested before it is preconditioned,
        ``single_reduction``: Chronopoulos and Gear's iterations (DeviceCG)."""
        if guess is not None:
            cg.blas.copy(cg.x, guess)
        cg.start(b, guess is not None, multiply, precondition, reduce, reference=None if test is None else test[0],
                 unpreconditioned=unpreconditioned, single_reduction=single_reduction)
        if test is None:
            cg.iterate(length, multiply, precondition, reduce)
        else:
            cg.loop(length, test, multiply, precondition, reduce, start=True)

    def _run(self, work, graph_key, arrangement, fn):
        """fn's work, as a CUDA graph of ``arrangement`` where the operators'
        ``graph_key`` is not None (the graphs of another key are dropped)."""
        self.events["Block"].begin()
        if graph_key is not None:
            work.graphs.run(graph_key, arrangement, fn)
        else:
            fn()
        self.events["Block"].end()

    @staticmethod
    def _record(ksp, its, rnorm):
        """Monitor iteration ``its`` and return its convergence test's verdict
        (the KSP's own iteration number and norm are set once, at the end)."""
        ksp.logConvergenceHistory(rnorm)
        ksp.monitor(its, rnorm)
        return ksp.callConvergenceTest(its, rnorm)

    def describe(self, ksp):
        lines = [f"  last solve: {self.last_iterations} iterations in {self.blocks_run} blocks, run by {self.runs}"]
        reduce = self._summed_over(ksp.getComm().tompi4py())
        if reduce is not None:
            how = "an NCCL all-reduce on the device" if reduce.on_device else "MPI through host memory"
            lines.append(f"  dot products summed over {ksp.getComm().getSize()} ranks by {how}")
        if self.guess is not None and self._work is not None and self._work.previous is not None:
            lines.append(f"  queued solves' initial guess: Fischer's projection on {self._work.previous.count} of "
                         f"at most {self.guess[2]} earlier solutions (model 2)")
        return lines


def _guess_options(prefix):
    """(type, model, size) of the KSPGuess the options give the KSP of ``prefix`` (PETSc's defaults for
    Fischer's: model 1, 10 vectors), or None (none, or Fischer's turned off by a model other than 1 to 3)."""
    options = PETSc.Options(prefix)

    def integers(name):
        return list(options.getIntArray(name)) if options.hasName(name) else None

    kind = options.getString("ksp_guess_type") if options.hasName("ksp_guess_type") else None
    legacy = integers("ksp_fischer_guess")  # KSPSetUseFischerGuess's option
    if kind is None and legacy is None:
        return None
    if kind not in (None, "fischer"):
        return kind, None, None
    model, size = ((integers("ksp_guess_fischer_model") or legacy or [1, 10]) + [10])[:2]
    return ("fischer", int(model), int(size)) if model in (1, 2, 3) else None  # another model turns it off


def _flag_reason(flag):
    """PETSc's reason for the device's FLAG (not 0): which of A and the preconditioner was indefinite."""
    return Reason.DIVERGED_INDEFINITE_MAT if flag == INDEFINITE_OPERATOR else Reason.DIVERGED_INDEFINITE_PC


class Verdicts:
    """Verdicts on a KSP's queued solves from their records (GraphCG.queue),
    its tolerances, norm and monitors read once, so that the solves of
    several time steps (the steps of one CUDA graph) are judged with one
    read of them."""

    def __init__(self, ksp):
        _, self.atol, _, self.max_it = ksp.getTolerances()
        self.column = _NORM_COLUMNS[ksp.getNormType()]
        self.log, self.monitor = ksp.logConvergenceHistory, ksp.monitor
        self.last = None  # (iterations, reason, norm) of the last solve judged

    def __call__(self, records):
        """Each record's (iterations, reason), ITERATING where a loop stopped
        at its limit short of max_it; the monitors see each norm, in order."""
        column, log, monitor, sqrt = self.column, self.log, self.monitor, math.sqrt  # a step's hot loop
        results = []
        for record in records:
            rows, s = DeviceCG.unpack_floats(record)
            for its, norm in enumerate(rows[column::3]):
                rnorm = sqrt(0.0 if norm < 0.0 else norm)  # NaN stays NaN
                log(rnorm)
                monitor(its, rnorm)
            results.append((its, _verdict(rows[-3:], rnorm, s, self.atol, its >= self.max_it)))
        self.last = (*results[-1], rnorm)
        return results


def _verdict(row, rnorm, s, atol, at_max_it):
    """PETSc's reason for a loop's last norm, from the device's own test
    (its TARGET and DIVERGENCE, which KSPConvergedDefault would compute)."""
    if not all(map(math.isfinite, row)):
        return Reason.DIVERGED_NANORINF
    if s[FLAG]:
        return _flag_reason(s[FLAG])
    if rnorm <= s[TARGET]:
        return Reason.CONVERGED_ATOL if rnorm < atol else Reason.CONVERGED_RTOL
    if rnorm >= s[DIVERGENCE]:
        return Reason.DIVERGED_DTOL
    return Reason.DIVERGED_MAX_IT if at_max_it else Reason.ITERATING

