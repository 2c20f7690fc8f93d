"""Preconditioned CG whose scalars never leave the device.

PETSc's CG reads every dot product on the host, so each iteration waits for
the GPU twice and pays the launches of its vector operations from Python:
on a mesh of tens of thousands of cells that host time, not the GPU's
work, sets the pace. Here alpha, beta and the residual norms stay in a
small array in the vectors' memory (kernel family ``pcg``), so that a block
of iterations is queued at once, and captured as one CUDA graph, replays
at the cost of one launch; the host reads the block's residual norms once
at its end. Ranks sum their dot products through ``reduce`` (None on one
rank), which the caller gives.

Works the same on NumPy arrays (the family's host twins).
"""

from .backend import to_host
from .kernels import family
from .kernels.pcg import FLAG, SLOTS

NORMS = ("natural", "unpreconditioned", "preconditioned")  # the columns of ``history``: r.z, r.r, z.z


class DeviceCG:
    """The vectors (x, r, z, p, w = A p) and scalars of CG on ``n`` rows in
    ``xp``'s memory, for blocks of at most ``capacity`` iterations."""

    def __init__(self, xp, n, capacity):
        self.xp, self.n, self.capacity = xp, n, capacity
        self.k = family("pcg", xp)
        self.x, self.r, self.z, self.p, self.w = (xp.zeros(n) for _ in range(5))
        self.sums, self.partials = xp.zeros(3), xp.zeros((3, self.k.partial_count(n)))
        # the scalars, then the norms squared: row 0 the start's, row j iteration j's of a block; one array,
        # so that a block's are read back in one copy
        self._store = xp.zeros(SLOTS + 3 * (capacity + 1))
        self.s, self.history = self._store[:SLOTS], self._store[SLOTS:].reshape(capacity + 1, 3)

    def start(self, b, nonzero_guess, multiply, precondition, reduce=None):
        """r = b - A x (x as it is; b where ``nonzero_guess`` is false, x then
        set to 0), z = M^-1 r, p = z; history[0] the start's norms squared."""
        xp = self.xp
        if nonzero_guess:
            multiply(self.x, self.r)
            xp.subtract(b, self.r, out=self.r)
        else:
            self.x.fill(0.0)
            xp.copyto(self.r, b)
        self.s.fill(0.0)
        self._new_residual(precondition, reduce, row=0, start=True)

    def iterate(self, count, multiply, precondition, reduce=None):
        """Queue ``count`` iterations (history[j], j = 1 .. count, their norms
        squared); nothing is read back to the host unless ``reduce`` does."""
        k = self.k
        if count > self.capacity:
            raise ValueError(f"a block of {count} iterations exceeds this workspace's {self.capacity}")
        for row in range(1, count + 1):
            multiply(self.p, self.w)
            self._dots(reduce, self.p, self.w)
            k.alpha_step(self.s, self.sums)
            k.update_iterate(self.s, self.x, self.r, self.p, self.w)
            self._new_residual(precondition, reduce, row)

    def _new_residual(self, precondition, reduce, row, start=False):
        precondition(self.r, self.z)
        self._dots(reduce, self.r, self.z, self.r, self.r, self.z, self.z)
        self.k.beta_step(self.s, self.sums, self.history, row, start)
        self.k.update_direction(self.s, self.p, self.z)

    def _dots(self, reduce, *pairs):
        self.k.partial_dots(self.partials, *pairs)
        self.k.sum_partials(self.sums, self.partials)
        if reduce is not None:
            reduce(self.sums)

    def read(self, count):
        """(history rows 0 .. count, the flag) on the host: the one wait for the device per block."""
        values = to_host(self.xp, self._store[:SLOTS + 3 * (count + 1)])
        return values[SLOTS:].reshape(count + 1, 3), float(values[FLAG])
