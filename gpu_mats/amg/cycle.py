"""The levels and their cycle: each level's operators as the GPU multiplies
them, the Chebyshev-Jacobi or l1-Jacobi smoothing, the coarsest level's
dense pseudo-inverse, and the V- or K-cycle, launching kernels only so that
a CUDA graph can hold it."""

import numpy

from ..approximate_inverse import lanczos_extremes
from ..backend import sparse_module, timed
from ..kernels import family
from ..ops import diagonal
from ..sell import SellMatrix
from ..stencil import StencilMatrix
from .checks import AMGError, check_symmetric, positive_diagonal, same_pattern


# The Chebyshev interval's lower end: with degree 3, 0.1 did best of 0.1, 0.2, 0.3 (BENCHMARKS.md); with the
# default degree 2, 0.2 saved an iteration at 96^3 and on the 27-point test problem, and cost none with degree 3.
CHEBYSHEV_FRACTION, CHEBYSHEV_SAFETY = 0.2, 1.1
LANCZOS_STEPS = 10
# Smoothing steps before and after the coarse correction: 2 cost one more CG iteration than 3 and less time
# at every size measured (BENCHMARKS.md).
DEGREE = 2
CYCLES = ("v", "k")
SMOOTHERS = ("chebyshev", "l1jacobi")
DENSE_LIMIT = 5000  # rows of the largest coarsest level solved densely
# Singular values of the coarsest matrix below this (relative to its largest) are its null space: the Galerkin
# matrix of an all-Neumann problem has one at the rounding of its products, which pinv's default cut-off of
# 1e-15 sometimes inverted; a coarsest level of a few thousand rows of a nonsingular problem keeps its
# smallest far above.
COARSEST_RCOND = 1e-10
# Levels of fewer rows have their operator multiplied a warp per row in the cycle (WarpRows): a thread per
# row fills a Hopper GPU's SMs only from about 270k rows, and small coarse levels have long rows.
WARP_ROWS = 2**18
PHASES = ("symmetry", "aggregation", "smoother", "prolongation", "galerkin", "operators", "coarsest")


class WarpRows:
    """A CSR matrix, values in the hierarchy's type, multiplied by a warp or
    part of one per row (the csr kernel family): the restrictions R = P^T, whose coarse rows
    gather an aggregate and its neighbours, hundreds of entries that SELL's
    thread per row leaves to a few threads, and the operators of levels too
    small to fill the GPU a thread per row (WARP_ROWS)."""

    def __init__(self, M, value_dtype, xp):
        self.shape = M.shape
        self.indptr = xp.asarray(M.indptr, dtype=xp.int64)
        self.indices = xp.asarray(M.indices, dtype=xp.int32)
        self.data = xp.asarray(M.data, dtype=value_dtype)
        self.nnz = int(self.data.size)
        self.nbytes = self.indptr.nbytes + self.indices.nbytes + self.data.nbytes
        self._kernels = family("csr", xp)

    def multiply(self, x, y, alpha=1.0, beta=0.0, z=None):
        """y = alpha M x + beta z (z defaults to y)."""
        self._kernels.spmv(self.indptr, self.indices, self.data, x, y, z, alpha, beta)

    def chebyshev_step(self, d, d_next, r, z, scaling, x, a, c):
        """r = z - M d; d_next = a d + c scaling r; x += d_next, in one kernel."""
        self._kernels.chebyshev_step(self.indptr, self.indices, self.data, d, d_next, r, z, scaling, x, a, c)

    def chebyshev_first(self, b, scaling, d_next, r, x, c0, a, c):
        """The first two smoothing steps from x = 0 in one kernel (d0 = c0 scaling b; r = b - M d0;
        d_next = a d0 + c scaling r; x = d0 + d_next)."""
        self._kernels.chebyshev_first(self.indptr, self.indices, self.data, b, scaling, d_next, r, x, c0, a, c)


class CoarseCorrection:
    """A level's restricted residual and its coarse correction with the
    first smoothing step, each as one pass (the csr family's
    restrict_residual and residual_correction), on one rank where the level
    is multiplied a warp per row: R's and (R A)'s values on the pattern of
    R A, P's and (A P)'s on the pattern of A P (each holds the other's: A's
    diagonal is positive), and A's own rows (``A_rows``, the level's
    WarpRows). The residual b - A y of the smoothed iterate y is never
    stored: the pass that restricts it and the pass that corrects each take
    it in their sums, so y is kept apart from the corrected x. Two launches
    of a level's five become one each, on levels whose products cost their
    launch more than their bytes (BENCHMARKS.md: the flows' steps on
    triangles and tetrahedra are faster so, a 7-point Laplacian's cycle
    slower)."""

    def __init__(self, A, P, R, A_rows, value_dtype, xp):
        self.A_rows = A_rows
        (self.indptr, self.indices), (self.p_data, self.ap_data) = _on_one_pattern(P, (A @ P).tocsr(), value_dtype, xp)
        (self.r_indptr, self.r_indices), (self.r_data, self.ra_data) = _on_one_pattern(R, (R @ A).tocsr(),
                                                                                       value_dtype, xp)
        self._kernels = family("csr", xp)

    def restrict(self, b, y, bc):
        """bc = R (b - A y)."""
        self._kernels.restrict_residual(self.r_indptr, self.r_indices, self.r_data, self.ra_data, b, y, bc)

    def apply(self, xc, b, y, x, r, d, scaling, c):
        """r = b - A (y + P xc); d = c scaling r; x = y + P xc + d (x is not y)."""
        rows = self.A_rows
        self._kernels.residual_correction(self.indptr, self.indices, self.p_data, self.ap_data, rows.indptr,
                                          rows.indices, rows.data, xc, b, y, x, r, d, scaling, c)


def _on_one_pattern(M, N, value_dtype, xp):
    """((indptr, indices), (M's values, N's values)) on the union of the patterns of M and N (sorted CSR in
    ``xp``'s memory): a product's exact zeros are dropped (a null space's rows), so the union, not N's alone."""
    M = M.tocsr()
    pattern = (abs(N) + abs(M)).tocsr()
    pattern.sum_duplicates()
    pattern.sort_indices()
    arrays = (xp.asarray(pattern.indptr, dtype=xp.int64), xp.asarray(pattern.indices, dtype=xp.int32))
    return arrays, tuple(values_on_pattern(pattern, X, value_dtype, xp) for X in (M, N))


def values_on_pattern(pattern, M, value_dtype, xp):
    """M's values on ``pattern`` (sorted CSR holding M's entries), zero elsewhere."""
    M = M.tocsr()
    M.sum_duplicates()
    M = M.tocoo()
    columns = pattern.shape[1]
    keys = pattern.tocoo().row.astype(xp.int64) * columns + pattern.indices  # ascending: rows, sorted columns
    values = xp.zeros(pattern.nnz, dtype=value_dtype)
    values[xp.searchsorted(keys, M.row.astype(xp.int64) * columns + M.col)] = M.data
    return values


class Level:
    """One level: ``A`` (SellMatrix), and where it is not the coarsest the
    transfers ``P`` (SellMatrix) and ``R`` = P^T (WarpRows; ``galerkin_R``, the
    same in float64 CSR for the Galerkin products of a refresh), the largest
    eigenvalue of D^-1 A, the Chebyshev interval, the smoother's ``scaling``
    and ``steps``, and under a K-cycle its vectors (c1, c2, v1, v2, rt) and
    coefficients ``s``; on the coarsest ``inverse``, a dense pseudo-inverse."""

    def __init__(self, A, xp, rows=None, dtype=numpy.float64):
        """``rows``: of a level whose ``A`` is set later (DistributedAggregationAMG); ``dtype``: its vectors'."""
        self.A = A
        # on one rank, A as the cycle multiplies it where SELL is slower: a box's stencil (StencilMatrix) on a
        # geometric level, a CSR copy multiplied a warp per row (WarpRows) on a level below WARP_ROWS rows
        self.A_cycle = None
        self.grid = None  # a box's (shape, periodic), where the application gave it (GeometricMultigrid)
        self.P = self.R = self.inverse = None
        # a CoarseCorrection where the cycle fuses the residual into its restriction and into the correction
        # with the first smoothing step; the smoothed iterate y before the correction is then its own vector
        self.correction = None
        # in parallel: the blocks on other ranks' columns (row_blocks.HaloColumns), and on the coarsest level
        # the vector gathered from every rank (row_blocks.WholeVector) that its rows of the inverse multiply
        self.A_halo = self.P_halo = self.R_halo = self.whole = None
        n = A.shape[0] if rows is None else rows
        self.b, self.x, self.y, self.r, self.d, self.d_next = (xp.empty(n, dtype=dtype) for _ in range(6))


class Multigrid:
    """Levels and their cycle ``apply(b, x)``: x = M^-1 b, in ``xp``'s memory.
    What the aggregation hierarchy (AggregationAMG) and a geometric one given
    level by level (GeometricMultigrid) share: the levels' SELL copies, the
    smoothing, the coarsest solve, the V- or K-cycle and what they cost."""

    def __init__(self, xp, settings, comm=None):
        for name, value, choices in (("cycle", settings.cycle, CYCLES), ("smoother", settings.smoother, SMOOTHERS)):
            if value not in choices:
                raise ValueError(f"{name} must be one of {choices}, not {value!r}")
        self.xp, self.settings = xp, settings
        self.degree, self.cycle, self.smoother = settings.degree, settings.cycle, settings.smoother
        self.comm = comm  # mpi4py, where the levels are split over ranks (DistributedAggregationAMG)
        self._slice_height, self._value_dtype = settings.slice_height, numpy.dtype(settings.value_dtype)
        self.vector_dtype = numpy.dtype(settings.vector_dtype)
        self._kernels = family("multigrid", xp)
        self.phases = dict.fromkeys(PHASES, 0.0)
        self.generation = 0  # counts refreshes: a CUDA graph of the cycle holds its arrays and scalars
        self.levels = []

    def _sell(self, M):
        """M in SELL, values in the hierarchy's type (float32: less to read per SpMV); vectors stay float64."""
        return SellMatrix.from_csr(M.indptr, M.indices, M.data, M.shape, slice_height=self._slice_height,
                                   value_dtype=self._value_dtype, xp=self.xp)

    def _csr(self, indptr, indices, data, shape):
        """A float64 CSR matrix in ``xp``'s memory, checked symmetric."""
        xp = self.xp
        with self._phase("operators"):
            matrix = sparse_module(xp).csr_matrix((xp.asarray(data, dtype=xp.float64), xp.asarray(indices),
                                                   xp.asarray(indptr)), shape=shape)
        with self._phase("symmetry"):
            check_symmetric(matrix)
        return matrix

    def _add_level(self, matrix, grid=None):
        """A new coarsest level of ``matrix`` (on ``grid``, a box's (shape, periodic), where known), and its
        (positive) diagonal."""
        with self._phase("operators"):
            level = Level(self._sell(matrix), self.xp, dtype=self.vector_dtype)
            level.grid = grid
            level.A_cycle = self._cycled(matrix, grid)
        self.levels.append(level)
        return level, positive_diagonal(matrix, len(self.levels) - 1)

    def _cycled(self, matrix, grid=None):
        """What the cycle multiplies instead of a level's SELL operator
        ``matrix``, on one rank: its stencil on ``grid`` where it is one
        (StencilMatrix), else a warp-per-row copy on a level of fewer than
        WARP_ROWS rows; None: SELL."""
        if self.comm is not None:
            return None
        if grid is not None:
            stencil = StencilMatrix.from_csr(matrix.indptr, matrix.indices, matrix.data, *grid, self._value_dtype)
            if stencil is not None:
                return stencil
        return WarpRows(matrix, self._value_dtype, self.xp) if matrix.shape[0] < WARP_ROWS else None

    def _connect(self, level, P):
        """The transfers of ``level`` to the next: P, and R = P^T (kept in float64 CSR as ``galerkin_R``)."""
        with self._phase("operators"):
            level.galerkin_R = R = P.T.tocsr()
            level.P, level.R = self._sell(P), WarpRows(R, self._value_dtype, self.xp)

    def _fuse_correction(self, level, matrix, P):
        """The level's CoarseCorrection of ``matrix`` (float64 CSR), its P and
        R, where the cycle multiplies the level a warp per row on one rank
        (WarpRows: a level small enough that its launches, not its bytes,
        cost); else None."""
        level.correction = None
        if self.comm is None and isinstance(level.A_cycle, WarpRows) and level.R is not None:
            with self._phase("operators"):
                level.correction = CoarseCorrection(matrix, P, level.galerkin_R, level.A_cycle, self._value_dtype,
                                                    self.xp)

    def _finish(self, matrix):
        """The coarsest level's inverse of ``matrix``, and the K-cycle's vectors."""
        self._solve_coarsest(matrix)
        self._check_vector_dtype()
        if self.cycle == "k":  # the K-cycle's vectors and coefficients on the levels it solves by flexible CG
            for level in self.levels[1:-1]:
                n = level.A.shape[0]
                level.c1, level.c2, level.v1, level.v2, level.rt = (self.xp.empty(n) for _ in range(5))
                level.s = self.xp.zeros(5)

    def _check_vector_dtype(self):
        """An AMGError where float32 vectors meet a part that takes float64
        ones only: the K-cycle's kernels and the halo exchanges. On one rank
        every level's products and smoothing (SELL, warp-per-row CSR,
        stencils, tensor transfers) and the coarsest solve take both."""
        if self.vector_dtype != numpy.float64 and (self.comm is not None or self.cycle != "v"):
            raise AMGError(f"{self.vector_dtype} cycle vectors are for a V-cycle on one rank")

    def _phase(self, name):
        """Time a set-up phase into ``phases[name]``, the GPU's work included."""
        return timed(self.xp, self.phases, name)

    def has_pattern(self, indptr, indices):
        """Whether the finest matrix had the CSR pattern (``indptr``, ``indices``):
        a refresh can take its new values."""
        xp = self.xp
        return same_pattern(self.levels[0].A, xp.asarray(indptr), xp.asarray(indices))

    def _finest(self, data):
        """The finest matrix with new values ``data`` on its pattern (float64 CSR), checked symmetric."""
        first = self.levels[0].A
        return self._csr(first.indptr, first.cols[first.val_map], data, first.shape)

    def _smoother(self, level, matrix):
        """The largest eigenvalue of D^-1 A (Lanczos), and the smoothing: ``scaling``
        and the coefficients (a, c) of each step d = a d + c scaling r, x += d.
        Chebyshev-Jacobi: D^-1 and the three-term recurrence of the Chebyshev
        polynomial on ``interval`` (Saad, "Iterative methods for sparse linear
        systems", 2003, algorithm 12.1); l1-Jacobi: 1 / sum_j |a_ij| and plain
        steps, convergent with no eigenvalue bound (Baker, Falgout, Kolev and
        Yang, "Multigrid smoothers for ultraparallel computing", SIAM J. Sci.
        Comput. 33, 2011)."""
        xp = self.xp
        inv_diag = 1.0 / diagonal(level.A).astype(xp.float64)  # positive: checked when the level was made
        _, level.lambda_max = lanczos_extremes(
            level.A, inv_diag, LANCZOS_STEPS, seed=0 if self.comm is None else self.comm.Get_rank(),
            product=None if level.A_halo is None else lambda x, y: self._product(level.A, level.A_halo, x, y),
            comm=self.comm)
        level.interval = (CHEBYSHEV_FRACTION * level.lambda_max, CHEBYSHEV_SAFETY * level.lambda_max)
        if self.smoother == "l1jacobi":
            level.scaling = (1.0 / xp.asarray(abs(matrix).sum(axis=1)).ravel()).astype(self.vector_dtype)
            level.steps = [(0.0, 1.0)] * self.degree
            return
        level.scaling = inv_diag.astype(self.vector_dtype, copy=False)
        level.steps = chebyshev_steps(*level.interval, self.degree)

    def _solve_coarsest(self, matrix):
        """The coarsest level's inverse of ``matrix`` (in parallel: gathered on every rank)."""
        with self._phase("coarsest"):
            self._coarsest(self.levels[-1], matrix)

    def _coarsest(self, level, matrix):
        rows = matrix.shape[0]
        if rows > DENSE_LIMIT:
            raise AMGError(f"the coarsest level has {rows} rows (coarsening stalled): more than the "
                           f"{DENSE_LIMIT} a dense solve takes; lower the threshold (or, with pairwise aggregation, "
                           "raise the passes)")
        level.inverse = self.xp.ascontiguousarray(coarsest_inverse(self.xp, matrix.toarray()))
        level.A_cycle = None  # the cycle applies the inverse; it never multiplies this level's operator

    # --- the cycle -------------------------------------------------------------------

    def apply(self, b, x):
        """x = M^-1 b, one cycle (V or K) from x = 0; with float32 cycle
        vectors b is rounded into the finest level's and x read back."""
        if b.dtype == self.vector_dtype:
            self._cycle(0, b, x)
            return
        finest = self.levels[0]
        finest.b[...] = b
        self.apply_rounded()
        x[...] = finest.x

    def rounded_vectors(self):
        """(b, x), the finest level's own vectors, where the cycle's are
        float32 (else None): a caller that rounds its right-hand side into b
        in a kernel of its own and reads M^-1 b from x calls apply_rounded(),
        which leaves out apply()'s two roundings, each a launch and a pass."""
        if self.vector_dtype != numpy.float32:
            return None
        finest = self.levels[0]
        return finest.b, finest.x

    def apply_rounded(self):
        """x = M^-1 b on the finest level's own vectors (rounded_vectors)."""
        finest = self.levels[0]
        self._cycle(0, finest.b, finest.x)

    def _cycle(self, k, b, x):
        level = self.levels[k]
        if level.inverse is not None:  # a kernel, no temporary: capturable in a CUDA graph
            self._kernels.matvec(x, level.inverse, b if level.whole is None else level.whole.gather(b))
            return
        coarse, fused = self.levels[k + 1], level.correction
        if fused is not None:  # smoothed into y, which the correction below takes; R (b - A y) in one pass
            self._smooth(level, b, level.y, zero=True)
            fused.restrict(b, level.y, coarse.b)
        else:
            self._smooth(level, b, x, zero=True)
            r = level.r
            self._product(_operator(level), level.A_halo, x, r, alpha=-1.0, beta=1.0, z=b)  # r = b - A x
            if level.R_halo is not None:
                level.R_halo.start(r)
            level.R.multiply(r, coarse.b)
            if level.R_halo is not None:
                level.R_halo.finish(coarse.b)
        if self.cycle == "k" and coarse.inverse is None:
            self._krylov_correction(k + 1)
        else:
            self._cycle(k + 1, coarse.b, coarse.x)
        if fused is not None:  # x = y + P x_c and the first smoothing step, its residual in level.r
            fused.apply(coarse.x, b, level.y, x, level.r, level.d, level.scaling, level.steps[0][1])
            self._smooth(level, b, x, first_done=True)
            return
        self._product(level.P, level.P_halo, coarse.x, x, beta=1.0)  # x += P x_c
        self._smooth(level, b, x)

    @staticmethod
    def _product(A, halo, x, y, alpha=1.0, beta=0.0, z=None):
        """y = alpha A x + beta z for a level's operator or prolongation: in
        parallel its block on other ranks' columns is added once their values
        have arrived, the exchange overlapped with the owned block's SpMV."""
        if halo is not None:
            halo.start(x)
        A.multiply(x, y, alpha, beta, z)  # SellMatrix, WarpRows, StencilMatrix, TensorTransfer
        if halo is not None:
            halo.finish(y, alpha)

    def _krylov_correction(self, k):
        """x from A x = b on level k by two flexible CG steps preconditioned by
        the level's own cycle (the K-cycle of Notay and Vassilevski, "Recursive
        Krylov-based multigrid cycles", Numer. Linear Algebra Appl. 15, 2008),
        with the inner products left on the device."""
        level, kernels = self.levels[k], self._kernels
        self._cycle(k, level.b, level.c1)
        self._product(_operator(level), None, level.c1, level.v1)
        kernels.dot_pairs(level.s[:2], (level.c1, level.c1), (level.v1, level.b))  # rho1, alpha1
        kernels.kcycle_residual(level.rt, level.s, level.b, level.v1)
        self._cycle(k, level.rt, level.c2)
        self._product(_operator(level), None, level.c2, level.v2)
        kernels.dot_pairs(level.s[2:], (level.c2, level.c2, level.c2), (level.v1, level.v2, level.rt))
        kernels.kcycle_combine(level.x, level.s, level.c1, level.c2)

    def _smooth(self, level, b, x, zero=False, first_done=False):
        """The level's smoothing steps on A x = b from x (x = 0 with ``zero``;
        ``first_done``: the first step taken, its residual in level.r and its
        d in level.d, by the level's CoarseCorrection).
        The first step is an update (the multigrid family's chebyshev_step, or
        from x = 0 its chebyshev_start, which writes x without reading it);
        each later one, on one rank, a single kernel: r -= A d with the update
        fused in (the chebyshev_step of the level's operator: SELL, or its
        stencil or warp-row copy A_cycle; alternating d between two arrays);
        in parallel an SpMV with its halo, then the update. From x = 0 on one
        rank the first two steps are one kernel (the operator's chebyshev_first)."""
        fused = level.A_cycle is not None or level.A_halo is None  # a step's product needs no halo
        r = level.r
        if zero:
            r = b
        elif not first_done:
            self._product(_operator(level), level.A_halo, x, r, alpha=-1.0, beta=1.0, z=b)
        d, d_next = level.d, level.d_next
        steps = list(enumerate(level.steps))
        if first_done:
            steps = steps[1:]
        elif zero and fused and len(steps) > 1:
            (_, (_, c0)), (_, (a1, c1)) = steps[:2]
            _operator(level).chebyshev_first(b, level.scaling, d_next, level.r, x, c0, a1, c1)
            d, d_next = d_next, d
            steps = steps[2:]
        for step, (a, c) in steps:
            if step == 0:  # a = 0: d is written, not read; from zero, x too
                if zero:
                    self._kernels.chebyshev_start(x, d, r, level.scaling, c)
                else:
                    self._kernels.chebyshev_step(x, d, r, level.scaling, a, c)
                continue
            z = b if zero and step == 1 else level.r
            if fused:
                _operator(level).chebyshev_step(d, d_next, level.r, z, level.scaling, x, a, c)
                d, d_next = d_next, d
            else:
                self._product(level.A, level.A_halo, d, level.r, alpha=-1.0, beta=1.0, z=z)
                self._kernels.chebyshev_step(x, d, level.r, level.scaling, a, c)

    # --- what the hierarchy costs -----------------------------------------------------

    def sizes(self):
        """Per level (rows, nonzeros), over all ranks where the levels are split over ranks."""
        sizes = numpy.array([(level.A.shape[0], level.A.nnz + (0 if level.A_halo is None else level.A_halo.block.nnz))
                             for level in self.levels], dtype=numpy.int64)
        return sizes if self.comm is None else self.comm.allreduce(sizes)

    def complexities(self):
        """(operator complexity, grid complexity): sums of nonzeros and of rows over the finest's."""
        rows, nnz = self.sizes().T
        return int(nnz.sum()) / max(int(nnz[0]), 1), int(rows.sum()) / max(int(rows[0]), 1)


def chebyshev_steps(low, high, degree):
    """The coefficients (a, c) of ``degree`` Chebyshev-Jacobi steps d = a d + c D^-1 r, x += d, r -= A d,
    for the spectrum of D^-1 A in [low, high] (Saad, "Iterative methods for sparse linear systems", 2003,
    algorithm 12.1)."""
    theta, delta = (high + low) / 2, (high - low) / 2
    sigma = theta / delta
    rho = 1.0 / sigma
    steps = [(0.0, 1.0 / theta)]
    for _ in range(degree - 1):
        rho_next = 1.0 / (2.0 * sigma - rho)
        steps.append((rho_next * rho, 2.0 * rho_next / delta))
        rho = rho_next
    return steps


def coarsest_inverse(xp, dense):
    """The pseudo-inverse of the coarsest level's ``dense`` matrix, its null
    space cut at COARSEST_RCOND: an inverted rounding error along the
    constant vector would scale that vector by 1e15 in every cycle, and the
    rounding of float32 operators (A 1 of order 1e-7 instead of 0) then made
    the cycle indefinite at 256^3."""
    return xp.linalg.pinv(dense, rcond=COARSEST_RCOND)


def _operator(level):
    """The level's operator as the cycle multiplies it: its A_cycle (stencil or warp-per-row copy) where it has
    one, else SELL."""
    return level.A if level.A_cycle is None else level.A_cycle
