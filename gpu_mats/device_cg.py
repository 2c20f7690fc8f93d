"""Preconditioned CG whose scalars never leave the device.

PETSc's CG reads every dot product on the host, so each iteration waits for
the GPU twice and pays the launches of its vector operations from Python:
on a mesh of tens of thousands of cells that host time, not the GPU's
work, sets the pace. Here alpha, beta and the residual norms stay in a
small array in the vectors' memory (kernel family ``pcg``), so that a block
of iterations is queued at once, and captured as one CUDA graph, replays
at the cost of one launch; the host reads the block's residual norms once
at its end. A loop goes further: a device-side convergence test decides
after each iteration whether another follows (under a capture, a
conditional WHILE node), so the host reads once per solve. Ranks sum their
dot products through ``reduce`` (None on one rank), which the caller gives.

A solve judged by the unpreconditioned norm alone (``unpreconditioned``)
takes its steps in another order, as PETSc's KSPCG does for that norm: each
residual's norm is recorded, and tested, before the preconditioner is
applied to it, so that the residual a solve stops at is never
preconditioned: one application fewer a solve, and an exact
preconditioner's solve (boxfft, layerfft) applies it once. Such a solve may
also take Chronopoulos and Gear's iteration (``single_reduction``, as
PETSc's -ksp_cg_single_reduction): A z in place of A p, so that r . z and
z . A z are one sum, and the new direction, w = A p by its recurrence, the
iterate and the residual one pass; three launches an iteration besides
the product and the preconditioner, where CG's order takes five (four
with a float32 cycle, whose z is copied into float64 for the product).

Works the same on NumPy arrays (the family's host twins).
"""

import numpy

from .backend import to_host
from .kernels import family
from .kernels.pcg import FLAG, GO, REFERENCE, RESUME, ROW, SLOTS, START

NORMS = ("natural", "unpreconditioned", "preconditioned")  # the columns of ``history``: r.z, r.r, z.z


class DeviceCG:
    """The vectors (x, r, z, p, w = A p) and scalars of CG on ``n`` rows in
    ``xp``'s memory, for blocks of at most ``capacity`` iterations."""

    def __init__(self, xp, n, capacity):
        self.xp, self.n, self.capacity = xp, n, capacity
        self.k, self.blas = family("pcg", xp), family("blas", xp)  # copies and fills as kernels (graphs)
        self.x, self.r, self.z, self.p, self.w = (xp.zeros(n) for _ in range(5))
        self.az = None  # A z, for Chronopoulos and Gear's iteration (made at its first start)
        self.unpreconditioned = self.single_reduction = False  # the order of the steps: see start()
        self.ones = xp.ones(n)
        self.sums, self.partials = xp.zeros(3), xp.zeros((3, self.k.partial_count(n)))
        self.arrivals = xp.zeros(1, dtype=numpy.uint32)  # a step that sums its own dot products counts blocks here
        # the scalars, then the norms squared: row 0 the start's, row j iteration j's of a block or loop;
        # one array, so that they are read back in one copy
        self.store = xp.zeros(SLOTS + 3 * (capacity + 1))
        self.s, self.history = self.store[:SLOTS], self.store[SLOTS:].reshape(capacity + 1, 3)

    def start(self, b, nonzero_guess, multiply, precondition, reduce=None, reference=None, mean_free=False,
              unpreconditioned=False, single_reduction=False):
        """r = b - A x (x as it is; b where ``nonzero_guess`` is false, x then
        set to 0), z = M^-1 r, p = z; history[0] the start's norms squared
        (with ``unpreconditioned``, r . r alone, z and p left to the first
        iteration; so too for the iterations that follow, up to the next start).
        ``reference``, a column of history: after a nonzero guess, b's own
        norm squared in that column's norm (b.b, or b.Bb and Bb.Bb with B
        the preconditioner) goes to REFERENCE, where a loop's test measures
        from it as PETSc's default test does. ``mean_free`` (one rank): r
        projected onto zero mean, as KSPSolve projects b where the matrix's
        null space is the constants. ``single_reduction`` (with
        ``unpreconditioned`` only): the iterations up to the next start are
        Chronopoulos and Gear's."""
        xp = self.xp
        if single_reduction and not unpreconditioned:
            raise ValueError("Chronopoulos and Gear's iteration is taken in the unpreconditioned order only")
        if single_reduction and self.az is None:
            self.az = xp.zeros(self.n)
        self.blas.fill(self.s, 0.0)
        self.unpreconditioned, self.single_reduction = unpreconditioned, single_reduction
        if nonzero_guess and reference is not None:
            if NORMS[reference] == "unpreconditioned":
                self._dots(reduce, b, b)
            else:
                precondition(b, self.z)
                self._dots(reduce, b if NORMS[reference] == "natural" else self.z, self.z)
            self.blas.copy(self.s[REFERENCE:REFERENCE + 1], self.sums[:1])
        if nonzero_guess:
            multiply(self.x, self.r)
            xp.subtract(b, self.r, out=self.r)
        else:
            self.blas.fill(self.x, 0.0)
            self.blas.copy(self.r, b)
        if mean_free:
            if reduce is not None:
                raise ValueError("the mean's removal here is one rank's")
            self._dots(None, self.r, self.ones)
            self.k.remove_mean(self.r, self.sums)
        if unpreconditioned:
            rounded = self._rounded(precondition, reduce)
            if rounded is not None:  # the first iteration's preconditioner input; each update rounds the next
                xp.copyto(rounded[0], self.r)
            self._record(reduce, start=True)
        else:
            self._new_residual(precondition, reduce, start=True)

    def iterate(self, count, multiply, precondition, reduce=None):
        """Queue ``count`` iterations (history[j], j = 1 .. count, their norms
        squared); nothing is read back to the host unless ``reduce`` does."""
        if count > self.capacity:
            raise ValueError(f"a block of {count} iterations exceeds this workspace's {self.capacity}")
        self.blas.fill(self.s[ROW:ROW + 1], 0.0)
        for _ in range(count):
            self._iteration(multiply, precondition, reduce)

    def loop(self, limit, test, multiply, precondition, reduce=None, start=False):
        """Queue iterations for as long as the device-side test passes
        (pcg.loop_test: ``test`` its column, rtol, atol and dtol; at most
        ``limit`` iterations, history[1 .. limit]); ``start``: right after
        start(), whose norm the test measures against, else after a loop
        that stopped at its limit. Under a CUDA-graph capture one
        conditional WHILE node (cuda_graphs.while_loop), else a host loop
        that reads the test's verdict after every iteration."""
        if limit > self.capacity:
            raise ValueError(f"a loop of up to {limit} iterations exceeds this workspace's {self.capacity}")
        first = START if start else RESUME
        self.blas.fill(self.s[ROW:ROW + 1], 0.0)

        def enter(handle=0):
            self.k.loop_test(self.s, self.history, *test, limit, first, handle)

        def body(handle=0):  # the test in the iteration's last step (pcg.beta_step's)
            self._iteration(multiply, precondition, reduce, (*test, limit, handle))

        if self.xp is not numpy and self.xp.cuda.get_current_stream().is_capturing():
            from .kernels.cuda_graphs import while_loop

            while_loop(enter, body)
            return
        enter()
        while to_host(self.xp, self.s[GO:GO + 1])[0]:
            body()

    def _iteration(self, multiply, precondition, reduce, test=None):
        """One iteration; ``test``: the loop's (pcg.beta_step's, or record_step's), after it."""
        if self.single_reduction:
            self._single_iteration(multiply, precondition, reduce, test)
            return
        k = self.k
        rounded = self._rounded(precondition, reduce)
        if self.unpreconditioned:  # z and the direction first: the last residual was tested unpreconditioned
            z = self.z
            if rounded is None:
                precondition(self.r, z)
            else:
                _, z, apply = rounded
                apply()
            if reduce is not None:
                self._dots(reduce, self.r, z)
            k.direction_step(self.s, self.sums, self._step_dots(reduce, self.r, z))
            k.update_direction(self.s, self.p, z)
        multiply(self.p, self.w)
        if reduce is not None:
            self._dots(reduce, self.p, self.w)
        k.alpha_step(self.s, self.sums, self._step_dots(reduce, self.p, self.w))
        if self.unpreconditioned and reduce is None:  # the update and the new residual's record in one launch
            k.update_record_step(self.s, self.sums, self.history, self.x, self.r, self.p, self.w, self.partials,
                                 self.arrivals, test, None if rounded is None else rounded[0])
            return
        k.update_iterate(self.s, self.x, self.r, self.p, self.w)
        if self.unpreconditioned:
            self._record(reduce, test=test)
        else:
            self._new_residual(precondition, reduce, test=test)

    def _single_iteration(self, multiply, precondition, reduce, test):
        """Chronopoulos and Gear's iteration (D'Azevedo, Eijkhout and Romine,
        "Conjugate gradient algorithms with reduced synchronization overhead
        on distributed memory multiprocessors", 1993, method 1): z = M^-1 r,
        A z, one sum of r . z and z . A z (pcg.single_step), then the
        direction, A p, x and r in one pass and r's record (one launch on
        one rank). A float32 cycle's z is read as it is (exact in float64)
        into z, which the product takes."""
        k, z = self.k, self.z
        rounded = self._rounded(precondition, reduce)
        if rounded is None:
            precondition(self.r, z)
        else:
            rounded[2]()
            self.xp.copyto(z, rounded[1])
        multiply(z, self.az)
        if reduce is None:
            k.single_step(self.s, self.sums, (self.partials, self.arrivals, self.r, z, self.az))
            k.update_record_step(self.s, self.sums, self.history, self.x, self.r, self.p, self.w, self.partials,
                                 self.arrivals, test, None if rounded is None else rounded[0], z, self.az)
            return
        self._dots(reduce, self.r, z, self.az, z)
        k.single_step(self.s, self.sums)
        k.single_update(self.s, self.x, self.r, self.p, self.w, z, self.az)
        self._record(reduce, test=test)

    def _rounded(self, precondition, reduce):
        """The preconditioner's float32 hand-off (ArrayOperator.rounded: its
        own b, z and apply), taken on one rank in the unpreconditioned order,
        where r is written by start() and update_record_step alone, which
        round it into b as they write it; z is then exactly the float32
        cycle's output, so the bits are those of its apply(). Else None."""
        if not self.unpreconditioned or reduce is not None:
            return None
        return getattr(precondition, "rounded", None)

    def _record(self, reduce, start=False, test=None):
        """The residual's norm squared into history, before any preconditioner (pcg.record_step)."""
        if reduce is not None:
            self._dots(reduce, self.r, self.r)
        self.k.record_step(self.s, self.sums, self.history, start,
                           None if reduce is not None else (self.partials, self.arrivals, self.r), test)

    def _new_residual(self, precondition, reduce, start=False, test=None):
        precondition(self.r, self.z)
        if reduce is not None:
            self._dots(reduce, self.r, self.z, self.r, self.r, self.z, self.z)
        self.k.beta_step(self.s, self.sums, self.history, start, self._step_dots(reduce, self.r, self.z), test)
        self.k.update_direction(self.s, self.p, self.z)

    def _dots(self, reduce, *pairs):
        """sums = the pairs' dot products (over the ranks with ``reduce``)."""
        self.k.partial_dots(self.partials, *pairs)
        self.k.sum_partials(self.sums, self.partials)
        if reduce is not None:
            reduce(self.sums)

    def _step_dots(self, reduce, x, y):
        """What a step takes to compute its dot products of x and y in its own
        launch (alpha_step, beta_step): on one rank; else None, the caller
        having left them in sums, reduced over the ranks."""
        return (self.partials, self.arrivals, x, y) if reduce is None else None

    def read(self):
        """(history rows 0 .. ROW, the flag) on the host, ROW the iterations of
        the last block or loop: the one wait for the device per block."""
        rows, s = self.unpack(to_host(self.xp, self.store))
        return rows, float(s[FLAG])

    @staticmethod
    def unpack(store):
        """(history rows 0 .. ROW, the scalars) of a host copy of ``store``."""
        count = int(store[ROW])
        return store[SLOTS:SLOTS + 3 * (count + 1)].reshape(count + 1, 3), store[:SLOTS]

    @staticmethod
    def unpack_floats(store):
        """unpack as Python floats, the rows one after another in one list
        (a step's few norms, where NumPy's calls cost more than its math)."""
        scalars = store[:SLOTS].tolist()
        return store[SLOTS:SLOTS + 3 * int(scalars[ROW]) + 3].tolist(), scalars
