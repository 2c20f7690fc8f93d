"""The pressure solve's start by Fischer's projection on the flow's earlier
solutions (Fischer, "Projection techniques for iterative solution of Ax = b
with successive right-hand sides", Comput. Methods Appl. Mech. Engrg. 163,
1998; PETSc's KSPGuess fischer, model 2: gpu_mats.previous_solutions).

The flow keeps the basis itself, not its KSP's KSPGuess, because the basis
is part of the run's state: a checkpoint holds it, so that a restart goes on
bit for bit; and a step that is taken but dropped (a step launched ahead of
the host for a dt that changed, or a captured step taken again as launched)
is undone from it, so that a run's fields do not depend on how its steps
were launched. Only each step's main solve is projected and joins the basis:
the deferred correctors start from the solution they correct.
"""

from petsc4py import PETSc

from gpu_mats.exchange import summed_over
from gpu_mats.previous_solutions import PreviousSolutions
from petsc_ext.array_operators import matrix_product

FISCHER_SIZE = 16  # the earlier solutions the guess projects on (BENCHMARKS.md: 8 and 16 measured)
EXACT_PCS = ("boxfft", "layerfft")  # pressure preconditioners that solve exactly: no guess to improve


class FischerGuess:
    """Fischer's basis of ``size`` earlier solutions of the pressure matrix of
    ``matrices`` (FlowMatrices), over the ranks of its communicator; its
    increments mean-free where the matrix's null space is the constants."""

    def __init__(self, matrices, size):
        xp, A = matrices.xp, matrices.poisson
        n, total = A.getSizes()[0]
        comm = A.getComm().tompi4py()
        reduce = None if comm.Get_size() == 1 else summed_over(comm, xp, notify=PETSc.Sys.Print)
        nullspace = A.getNullSpace()
        self.basis = PreviousSolutions(xp, n, size, mean_free=bool(nullspace) and nullspace.hasConstant(),
                                       reduce=reduce, total=total)
        self.multiply = matrix_product(A, xp, matrices.vecs)
        self.w, self.aw = xp.zeros(n), xp.zeros(n)  # the update's scratch
        self.comm = comm
        self._saved = {}  # keep's copies, by the key of the step that made them

    def guess(self, b, q):
        """q = the guess for the pressure system A q = b."""
        self.basis.guess(b, q)

    def reserve(self, keys):
        """Room for the saves of the steps under ``keys`` (update's), made
        now: a graph captured at its first run, a loop of steps whose
        pressure takes every buffer of its pool, cannot allocate it."""
        for key in keys:
            if key not in self._saved:
                self._saved[key] = self.basis.saved()

    def update(self, q, key=None):
        """Add the solution q of the last guessed system; ``key``: the step's,
        under which what it changes is kept first, for undo(key)."""
        if key is not None:
            self.reserve((key,))  # on a run before a capture: a graph cannot allocate
            self.basis.keep(self._saved[key])
        self.basis.update(q, self.multiply, self.w, self.aw)

    def undo(self, key):
        """The basis as it was before the update kept under ``key`` (the last one kept under it)."""
        self.basis.restore(self._saved[key])

    @property
    def count(self):
        return self.basis.count

    def vectors(self):
        """(count, n): this rank's rows of the vectors in use (a checkpoint's cell field)."""
        return self.basis.vectors()

    def load(self, vectors):
        """The basis of a checkpoint's vectors (this rank's rows), the same count on every rank."""
        counts = self.comm.allgather(len(vectors))
        if len(set(counts)) != 1:
            raise ValueError(f"the ranks hold Fischer bases of {counts} vectors")
        self.basis.load(vectors)
