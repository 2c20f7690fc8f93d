"""Fischer's initial guess for a run of solves with one symmetric positive
definite matrix A (Fischer, "Projection techniques for iterative solution of
Ax = b with successive right-hand sides", Comput. Methods Appl. Mech. Engrg.
163, 1998), as PETSc's KSPGUESSFISCHER model 2 computes it: a basis X of
earlier solutions' increments, orthonormal in A's inner product; the guess
for b is X X^T b, the A-norm's best approximation of A^-1 b in the basis's
span. After each solve the part of its solution the guess missed joins the
basis, orthogonalized against it in A's inner product (one product with A,
and one more to normalize it); a full basis starts anew from the solution.

Every step is a kernel (gpu_mats.kernels.guess) on arrays allocated here,
with the count of vectors in use in device memory: a CUDA graph holds a
solve's guess and update and replays them whatever the count (the flow's
step). The time steps of a flow solve such a run: its pressure matrix stays,
its right-hand sides change little, and the guess takes most of the solution
(BENCHMARKS.md).
"""

from .kernels import family
from .kernels.guess import COUNT, SLOTS


class PreviousSolutions:
    """The basis of at most ``size`` vectors of length ``n`` in ``xp``'s memory;
    ``mean_free`` where A's null space is the constants: each increment is
    made mean-free before it joins, since A's energy norm does not see a
    constant, which its normalization would otherwise blow up (and A x of a
    huge constant is rounding far above a small right-hand side). On several
    ranks each holds its rows of the vectors, ``reduce`` adds the ranks' sums
    (as DeviceCG's) and ``total`` is the vectors' global length."""

    def __init__(self, xp, n, size, mean_free=False, reduce=None, total=None):
        if size < 1:
            raise ValueError(f"Fischer's basis needs at least one vector, not {size}")
        self.xp, self.size, self.reduce, self.total = xp, size, reduce, total
        self.ones = xp.ones(n) if mean_free else None
        self.kernels, self.pcg, self.blas = family("guess", xp), family("pcg", xp), family("blas", xp)
        self.X = xp.zeros((size, n))
        self.state = xp.zeros(SLOTS)
        self.coeffs = xp.zeros(size)
        self.partials = xp.zeros((size, self.pcg.partial_count(n)))
        self.guessed = xp.zeros(n)  # the last guess, which the update measures the solution against
        self.norm_partials, self.norm_sums = xp.zeros((3, self.pcg.partial_count(n))), xp.zeros(3)

    @property
    def count(self):
        """The vectors in use (read from the device: for tests, views and checkpoints)."""
        return int(self.state[COUNT])

    def guess(self, b, x):
        """x = X X^T b, the guess for A x = b (0 while the basis is empty)."""
        k = self.kernels
        self._coefficients(b)
        k.combine(x, self.X, self.coeffs, self.state, None, 1.0)
        self.blas.copy(self.guessed, x)  # a kernel: a step's graph launches it for less than a memcpy

    def update(self, x, multiply, w, aw):
        """Add the solution ``x`` of the last guess's system: its part the guess
        missed, A-orthonormalized against the basis (``multiply(v, out)``: out =
        A v; ``w``, ``aw``: scratch vectors it takes)."""
        k, pcg = self.kernels, self.pcg
        k.begin_update(self.state, self.size)
        k.new_direction(w, x, self.guessed, self.state)
        if self.ones is not None:
            self._norm_sums(w, self.ones)
            pcg.remove_mean(w, self.norm_sums, self.total)
        multiply(w, aw)
        self._coefficients(aw)
        k.combine(w, self.X, self.coeffs, self.state, w, -1.0)
        multiply(w, aw)
        self._norm_sums(w, aw)
        k.append(self.X, w, self.norm_sums, self.state)
        k.count_up(self.state, self.norm_sums)

    def _coefficients(self, v):
        """coeffs = X v (over the vectors in use; zeros beyond)."""
        self.kernels.basis_partials(self.partials, self.X, self.state, v)
        self.kernels.sum_rows(self.coeffs, self.partials)
        if self.reduce is not None:
            self.reduce(self.coeffs)

    def _norm_sums(self, x, y):
        """norm_sums[0] = x . y."""
        self.pcg.partial_dots(self.norm_partials, x, y)
        self.pcg.sum_partials(self.norm_sums, self.norm_partials)
        if self.reduce is not None:
            self.reduce(self.norm_sums)

    def saved(self):
        """Room for what one update changes (keep, restore)."""
        return self.xp.zeros(self.X.shape[1]), self.xp.zeros(SLOTS)

    def keep(self, saved):
        """Copy into ``saved`` (from saved()) what the next update changes: a kernel, so that a graph holds it."""
        self.kernels.keep(*saved, self.X, self.state)

    def restore(self, saved):
        """Undo the update after keep(``saved``): the basis as it was (one read of the device)."""
        row, state = saved
        count = int(state[COUNT])
        self.xp.copyto(self.X[count if count < self.size else 0], row)
        self.xp.copyto(self.state, state)

    def vectors(self):
        """The vectors in use, (count, n): a checkpoint's."""
        return self.X[:self.count]

    def load(self, vectors):
        """The basis of the (k, n) ``vectors`` (a checkpoint's, at most ``size``), as if just appended."""
        k = len(vectors)
        if k > self.size:
            raise ValueError(f"{k} vectors for a basis of at most {self.size}")
        self.X[:k] = self.xp.asarray(vectors)
        self.X[k:] = 0.0
        self.state[...] = 0.0
        self.state[COUNT] = k
