"""``-ksp_type cacg``: communication-avoiding (s-step) conjugate gradients.

P-CBCG of Tsuji, Idomura et al. (docs/references.md: Algorithm 2, line 14 with
the corrected minus sign): every
outer iteration advances s CG iterations with exactly two global reductions,
one for Q^T A Q, Q^T r and ||r||^2, one for Q^T A S and r^T M^-1 r, where CG
needs two or three per iteration. The preconditioner enters through the basis
(z~_j = M^-1 z_j), so any PC works: jacobi, bjacobi, ainv, ...

The iterate, the residual, the basis and its A-products are (s, n) blocks in
the vectors' memory (CuPy on the GPU, NumPy on the host), and the Gram
products and block updates are GEMMs; only the small matrices cross to the
host. A gpusell matrix and a jacobi or ainv preconditioner work on the rows
directly (jacobi fused into the basis recurrence), any other Mat or PC
through PETSc on vectors wrapped over the rows (petsc_ext.array_operators).

Eigenvalue bounds of M^-1 A, which the Newton and Chebyshev bases need, come
at set-up from petsc_ext.eigenvalue_bounds and are reused by every solve
with the same operators, until their values change (their PETSc object
state). Against the drift of the recursively updated residual, a solve that
looks converged replaces r by b - A x and checks again (one extra
reduction). A block whose basis vectors lose their independence before
its end (the Krylov space exhausted, or rounding) advances by its leading
independent ones and replaces r by b - A x; where the two residuals agree
the next block is conjugated against those vectors, else (an operator not
exactly linear, such as a finite-difference Jacobian) it starts anew from
the true residual. Where the true residual stalls above the tolerance
after the recurrence converged (that operator's own accuracy) the solve
stops as CG would, and -ksp_view says so. An operator whose products are
not linear to rounding (that Jacobian) gets blocks shorter than s, in
proportion to the digits its products carry beyond the tolerance's, in
the monomial basis (petsc_ext.linearity), measured at set-up. -ksp_cacg_replace k also
replaces r every k outer iterations (no extra reduction).
"""

import functools

import numpy
from mpi4py import MPI
from petsc4py import PETSc

from gpu_mats.backend import address
from gpu_mats.kernels import keyed_graphs
from gpu_mats.krylov import (BASES, GramBreakdown, SStepBlocks, basis_recurrence, distinct_rows, leading_solutions,
                             leading_solve)

from .array_operators import matrix_product, preconditioner
from .arrays import get_array, restore_array, vec_over
from .eigenvalue_bounds import eigenvalue_bounds
from .linearity import EXACT_BLOCK, block_length, linear_to_rounding, linearity_defect
from .options import Option
from .python_type import PythonKSP

EIG_METHODS = ("cg", "power")
EIG_STEPS = {"cg": 20, "power": 100}  # default iterations of each eigenvalue estimate
# A change of these makes the eigenvalue bounds and the basis stale.
_BASIS_OPTIONS = {"s", "basis", "eig_method", "eig_steps", "safety"}
Reason = PETSc.KSP.ConvergedReason
DRIFT = 0.1  # relative departure of the true residual norm from the recurrence's after a short block
_BREAKDOWN_REASONS = {"nonfinite": Reason.DIVERGED_NANORINF, "indefinite": Reason.DIVERGED_INDEFINITE_MAT}


class _Workspace:
    """The blocks of one local size and backend, and PETSc vectors over their rows."""

    def __init__(self, xp, s, template):
        self.n, size, comm = template.getLocalSize(), template.getSize(), template.getComm()
        self.xp, self.blocks = xp, SStepBlocks(xp, s, self.n)
        self.diagonal = distinct_rows(xp, 1, self.n)[0]  # a Jacobi preconditioner's
        # the basis build as CUDA graphs, one per buffer arrangement: s SpMVs (with their NCCL halo exchanges),
        # preconditioner applications and recurrences replayed by one launch, where launching them from Python
        # costs more host time than the GPU spends on them at 64^3
        self.graphs = keyed_graphs() if xp is not numpy else None
        self._vecs = {address(array): vec_over(array, comm, size) for array in (*self.blocks.rows, self.diagonal)}

    def vec(self, array):
        return self._vecs[address(array)]

    def destroy(self):
        for vec in self._vecs.values():
            vec.destroy()


def _operator_states(ksp):
    """What the eigenvalue bounds were computed for: the operators and their
    PETSc object states (raised by every change of values)."""
    return tuple((M.handle, M.stateGet()) for M in ksp.getOperators())


class CommunicationAvoidingCG(PythonKSP):
    """The context of a KSP of type cacg (petsc4py's Python KSP protocol)."""

    TYPE, TITLE, EVENTS = "cacg", "Communication-avoiding CG (cacg)", ("Basis", "Gram", "Eigen")
    OPTIONS = (
        Option("ksp_cacg_s", "s", EXACT_BLOCK, "CG iterations per block of two global reductions (fewer where "
               "the products of M^-1 A are not linear to rounding: -ksp_view says)", low=1, high=16,
               view="s = {}"),
        Option("ksp_cacg_basis", "basis", "chebyshev", "polynomial basis of the s-step block (newton: "
               "Leja-ordered shifts)", choices=BASES, view="basis {}"),
        Option("ksp_cacg_eig_method", "eig_method", "cg", "eigenvalue bounds of M^-1 A at set-up, from CG "
               "(Ritz values) or a power method; reused by every solve with the same operators",
               choices=EIG_METHODS),
        Option("ksp_cacg_eig_steps", "eig_steps", EIG_STEPS["cg"], "iterations of the eigenvalue estimate "
               f"(default {EIG_STEPS['power']} with power)", low=2, high=1000),
        Option("ksp_cacg_eig_safety", "safety", 1.0, "widening factor of the eigenvalue interval", low=1.0,
               high=10.0),
        Option("ksp_cacg_replace", "replace_every", 0, "replace r by b - Ax every k blocks (0: only to confirm "
               "convergence, which is always done)", low=0, high=10**6),
        Option("ksp_cacg_graph", "use_graphs", True, "replay the basis build of each block (s SpMVs with their "
               "halo exchanges, preconditioner, recurrence) as a CUDA graph where its operators allow: gpusell, "
               "jacobi/none or ainv fsai/spai; NCCL halos"),
    )

    def __init__(self):
        super().__init__()
        self.bounds, self.coefficients, self._built_for = None, None, None
        # The block length and basis used: s and the chosen basis unless the products are not linear to rounding.
        self.block, self.block_basis, self.defect = None, None, 0.0
        self.reductions, self.total_reductions, self.blocks_done, self.failure = 0, 0, 0, ""
        self._work, self.basis_runs = None, "not built yet"

    def create(self, ksp):
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)

    def option_default(self, option, chosen):
        if option.attr == "eig_steps" and chosen["eig_method"] != self.eig_method:
            return EIG_STEPS[chosen["eig_method"]]  # a new method brings its own default
        return super().option_default(option, chosen)

    def options_changed(self, ksp, changed):
        if changed & _BASIS_OPTIONS:
            self.release()

    def build(self, ksp):
        self._built_for = _operator_states(ksp)
        A, _ = ksp.getOperators()
        self.defect = linearity_defect(A, ksp.getPC())
        self.block_basis = self.basis if linear_to_rounding(self.defect) else "monomial"
        if self.block_basis == "monomial":
            self.bounds = None
        else:
            self.events["Eigen"].begin()
            try:
                self.bounds = eigenvalue_bounds(ksp, self.eig_method, self.eig_steps, self.safety)
            finally:
                self.events["Eigen"].end()

    def release(self):
        if self._work is not None:
            self._work.destroy()
        self._work, self.bounds, self.coefficients, self._built_for = None, None, None, None
        self.block, self.block_basis = None, None

    def getReductionCount(self):
        """MPI_Allreduce calls of the last solve."""
        return self.reductions

    # --- the solve -------------------------------------------------------------

    def _workspace(self, b):
        n = b.getLocalSize()
        work = self._work
        if work is None or work.n != n or work.xp is not self.xp or work.blocks.s != self.block:
            if work is not None:
                work.destroy()
            self._work = _Workspace(self.xp, self.block, b)
        return self._work

    def _communicator(self, ksp):
        return ksp.getComm().tompi4py()

    def _allreduce(self, comm, local):
        comm.Allreduce(MPI.IN_PLACE, local, op=MPI.SUM)
        self.reductions += 1
        return local

    def _build_basis(self, work, multiply, precondition):
        self.events["Basis"].begin()
        capturable = multiply.graph_key is not None and precondition.graph_key is not None
        if self.use_graphs and work.graphs is not None and capturable:
            blocks, coefficients = work.blocks, self.coefficients
            work.graphs.run((multiply.graph_key, precondition.graph_key, tuple(coefficients)), blocks.arrangement,
                            lambda: blocks.build_basis(multiply, precondition, coefficients))
            self.basis_runs = "CUDA graph replays"
        else:
            work.blocks.build_basis(multiply, precondition, self.coefficients)
            self.basis_runs = "kernel launches" if capturable else "PETSc MatMult/PCApply calls"
        self.events["Basis"].end()

    def _record(self, ksp, its, rnorm, blocks, x):
        """Monitors see the iterate in x, as in PETSc's own CG."""
        xa = get_array(x, "w", blocks.x.size)
        xa[...] = blocks.x
        restore_array(x, "w")
        ksp.setIterationNumber(its)
        ksp.setResidualNorm(rnorm)
        ksp.logConvergenceHistory(rnorm)
        ksp.monitor(its, rnorm)

    def solve(self, ksp, b, x):
        if _operator_states(ksp) != self._built_for:
            self.build(ksp)  # new values or new operators since the set-up: the bounds are stale
        A, _ = ksp.getOperators()
        self.block = block_length(self.s, self.defect, ksp.getTolerances()[0])
        self.coefficients = basis_recurrence(self.block_basis, self.block, *(self.bounds or (0.0, 1.0)))
        work = self._workspace(b)
        blocks, n, xp = work.blocks, work.n, self.xp
        multiply = matrix_product(A, xp, work.vec)
        precondition = preconditioner(ksp.getPC(), xp, work.vec, work.diagonal)
        self.reductions, self.blocks_done, self.failure = 0, 0, ""
        barray = get_array(b, "r", n)
        try:
            true_residual = functools.partial(self._true_residual, blocks, multiply, barray)
            if ksp.getInitialGuessNonzero():
                blocks.x[...] = get_array(x, "r", n)
                restore_array(x, "r")
                true_residual()
            else:
                blocks.x[...] = 0.0
                blocks.r[...] = barray
            reason = self._iterate(ksp, work, multiply, precondition, true_residual, x)
        finally:
            restore_array(b, "r")
        self.total_reductions += self.reductions
        ksp.setConvergedReason(reason)

    @staticmethod
    def _true_residual(blocks, multiply, barray):
        """r = b - A x."""
        multiply(blocks.x, blocks.r)
        blocks.xp.subtract(barray, blocks.r, out=blocks.r)

    def _iterate(self, ksp, work, multiply, precondition, true_residual, x):
        s, comm, max_it, blocks = self.block, self._communicator(ksp), ksp.getTolerances()[3], work.blocks
        self._build_basis(work, multiply, precondition)
        blocks.adopt_basis()
        its, confirmed, recurrence_reason = 0, None, None  # after a failed confirmation: its true residual norm
        while True:
            self.events["Gram"].begin()
            G, g, H, h, rr = blocks.unpack_gram(self._allreduce(comm, blocks.gram()))
            self.events["Gram"].end()
            if not numpy.isfinite(rr):
                self.failure = "r^T r is Inf or NaN (in the right-hand side, the operator or the preconditioner)"
                return Reason.DIVERGED_NANORINF
            rnorm = float(numpy.sqrt(max(rr, 0.0)))
            reason = ksp.callConvergenceTest(its, rnorm)
            self._record(ksp, its, rnorm, blocks, x)
            if reason != Reason.ITERATING:
                return reason
            if its >= max_it:
                return Reason.DIVERGED_MAX_IT
            try:
                leading = leading_solutions(G, g, H, h, rr)
            except GramBreakdown as exc:
                self.failure = str(exc)
                return _BREAKDOWN_REASONS[exc.kind]
            # The first CG-equivalent iterate inside the block that meets the test.
            hit = next((j for j, (_, norm) in enumerate(leading, 1) if ksp.callConvergenceTest(its + j, norm) > 0), 0)
            taken = hit or len(leading)
            blocks.step(leading[taken - 1][0])
            its += taken
            if hit or confirmed is not None or taken < s:  # the true residual (one more reduction)
                true_residual()
                true = float(numpy.sqrt(self._allreduce(comm, blocks.residual())[0]))
            if hit or confirmed is not None:
                reason = ksp.callConvergenceTest(its, true)
                if reason != Reason.ITERATING:
                    self._record(ksp, its, true, blocks, x)
                    return reason
                if confirmed is not None and true > 0.5 * confirmed:
                    # Since the recurrence converged, the true residual no longer falls: the attainable
                    # accuracy of the operator (a finite-difference matrix-free Jacobian), where CG stops too.
                    self.failure = (f"the true residual {true:.3e} stalled above the tolerance after the CG "
                                    "recurrence converged: the operator's own accuracy")
                    self._record(ksp, its, true, blocks, x)
                    return recurrence_reason
                if hit:  # the recursive residual drifted from the true one: start anew from the true one,
                    confirmed, recurrence_reason = true, ksp.callConvergenceTest(its, leading[hit - 1][1])
                    self._build_basis(work, multiply, precondition)  # checking it after each block from now
                    blocks.adopt_basis()
                    continue
                confirmed = true
            if taken < s and abs(true - leading[taken - 1][1]) > DRIFT * true:
                # A block cut short whose true residual departs from the recurrence's: an operator that is
                # not exactly linear (a finite-difference Jacobian) made A S and the combined products
                # disagree, so start anew from the true residual rather than conjugate against the block.
                self._build_basis(work, multiply, precondition)
                blocks.adopt_basis()
                continue
            self.blocks_done += 1
            if self.replace_every and self.blocks_done % self.replace_every == 0:
                true_residual()
            self._build_basis(work, multiply, precondition)
            self.events["Gram"].begin()
            C, rz = blocks.unpack_cross(self._allreduce(comm, blocks.cross()))
            self.events["Gram"].end()
            if not rz > 0:
                self.failure = f"r^T M^-1 r = {rz:g}: the preconditioner is not positive definite"
                return Reason.DIVERGED_INDEFINITE_PC
            # Where the block's vectors after the first `taken` lost their independence (their Gram pivots
            # vanished: the Krylov space exhausted, or rounding) and the recurrence still holds, they span
            # nothing new: the next block is conjugated against the first `taken` alone (CG's short recurrence).
            B = numpy.zeros((s, s))
            try:
                B[:taken] = leading_solve(G, C, taken)
            except GramBreakdown as exc:
                self.failure = str(exc)
                return _BREAKDOWN_REASONS[exc.kind]
            blocks.conjugate(B)

    # --- viewing -----------------------------------------------------------------

    def describe(self, ksp):
        lines = ["  global reductions: 2 per block of s iterations"]
        if self.block is not None and not linear_to_rounding(self.defect):
            lines.append(f"  the products of M^-1 A depart from linearity by {self.defect:.1e} (a finite-difference "
                         f"Jacobian, a Krylov preconditioner): blocks of {self.block} iterations (s = {self.s}) in the "
                         "monomial basis, the longest that error leaves at the relative tolerance")
        if (self.block_basis or self.basis) != "monomial":
            bounds = ("not computed yet" if self.bounds is None else
                      f"[{self.bounds[0]:.6g}, {self.bounds[1]:.6g}]")
            lines.append(f"  eigenvalue interval of M^-1 A: {bounds} from {self.eig_steps} "
                         f"{'CG (Ritz values)' if self.eig_method == 'cg' else 'power'} steps, "
                         f"safety factor {self.safety:g}")
        lines.append(f"  last solve: {self.blocks_done} blocks, {self.reductions} MPI_Allreduce calls "
                     f"({self.total_reductions} in all solves); basis built by {self.basis_runs}")
        if self.failure:
            lines.append(f"  stopped: {self.failure}")
        return lines
