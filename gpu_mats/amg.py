"""Algebraic multigrid by aggregation, set up and cycled where the matrix
lives (NumPy on the host, CuPy on the GPU: the same array code for both).

Set-up, level by level, for a symmetric positive (semi)definite matrix:
strength of connection |a_ij| >= threshold sqrt(a_ii a_jj); aggregates
around the roots of a distance-2 maximal independent set (``mis2``, the
default; with ``mis2_pairs`` the finest level's aggregates then paired that
many times, for a smaller first coarse level), or from ``passes`` rounds of pairwise matching by handshakes
(``pairwise``: each free node points at its strongest free neighbour, mutual
pointers pair up; Notay, "An aggregation-based algebraic multigrid method",
ETNA 37, 2010, pairs twice for aggregates of about 4), each round on the
Galerkin matrix of the last; piecewise-constant tentative prolongation (it carries the constant
null space of an all-Neumann matrix to every level), smoothed by one damped
Jacobi step where ``smoothed`` (Vanek, Mandel and Brezina, "Algebraic
multigrid by smoothed aggregation", Computing 56, 1996); Galerkin coarse
matrices R A P by sparse products (scipy, or cuSPARSE through cupyx),
sparsified where ``sparsify`` > 0 (``sparsified``: their weak entries moved
to the diagonal); a dense pseudo-inverse on the coarsest level.

Cycle: a V-cycle with Chebyshev-Jacobi smoothing (Adams, Brezina, Hu and
Tuminaro, "Parallel multigrid smoothing: polynomial versus Gauss-Seidel",
JCP 188, 2003) on the interval [0.2, 1.1] x the largest eigenvalue of
D^-1 A (Lanczos), or l1-Jacobi smoothing, the same steps before and after
the coarse correction: the cycle is a symmetric operator, fit for CG. Or a
K-cycle (``cycle="k"``), whose coarse corrections are two flexible CG steps
each: a nonlinear preconditioner, for flexible Krylov methods (fcg, fgmres).
Every level's operator and prolongation is a SellMatrix, its restriction
CSR multiplied a warp per row, as are the operators of small levels; a box's
geometric levels are applied from their grids (gpu_mats.stencil), where the
cycle's vectors may be float32 (``vector_dtype``: half the bytes of every
pass; the Krylov vectors outside stay float64). The cycle
launches kernels only (no temporaries, no copies to the host), so that a
CUDA graph can hold it.
"""


import numpy

from .approximate_inverse import lanczos_extremes
from .backend import array_module, hashed_bits, scatter_max, scatter_min, sparse_module, timed
from .kernels import family
from .ops import diagonal
from .sell import SellMatrix, entry_rows
from .stencil import StencilMatrix, TensorTransfer

# The Chebyshev interval's lower end: with degree 3, 0.1 did best of 0.1, 0.2, 0.3 (BENCHMARKS.md); with the
# default degree 2, 0.2 saved an iteration at 96^3 and on the 27-point test problem, and cost none with degree 3.
CHEBYSHEV_FRACTION, CHEBYSHEV_SAFETY = 0.2, 1.1
LANCZOS_STEPS = 10
# Smoothing steps before and after the coarse correction: 2 cost one more CG iteration than 3 and less time
# at every size measured (BENCHMARKS.md).
DEGREE = 2
# Strength threshold: 0.02 keeps the distance-2 sets of the Galerkin levels (long stencils of weak
# entries) from coarsening 70-fold, which grew the iterations with the levels (BENCHMARKS.md).
THRESHOLD = 0.02
# Coarse operators sparsified: off-diagonal entries below this fraction of the smaller of their row's and
# column's largest go to the diagonal. 0.2 kept the CG iterations and lowered the operator complexity below
# 1.5 on the box and the tetrahedral sphere; 0.3 cost the sphere iterations (BENCHMARKS.md).
SPARSIFY = 0.2
AGGREGATIONS = ("mis2", "pairwise")
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
GALERKIN_PRODUCTS = 2**26  # multiply-adds of R A per block of a Galerkin product (_galerkin)
SYMMETRY_TOLERANCE = 1e-10  # ||A - A^T||_F / ||A||_F: rounding, not a nonsymmetric discretization
PHASES = ("symmetry", "aggregation", "smoother", "prolongation", "galerkin", "operators", "coarsest")


class AMGError(ValueError):
    """A matrix the aggregation multigrid cannot take, with where it failed."""


def pairwise_aggregates(matrix, threshold, rounds=8):
    """(aggregate of each row, number of aggregates) of the scipy/cupyx CSR
    ``matrix``: up to ``rounds`` handshakes pair free rows along locally
    dominant edges (each free row points at its strongest free neighbour, ties
    broken by a hash of the edge, the same from both ends, so that the
    heaviest edge around is always mutual: Preis's matching, in rounds); a
    row left alone joins its strongest neighbour's aggregate (rows with no
    strong neighbour stay alone)."""
    xp = array_module(matrix.data)
    n = matrix.shape[0]
    rows, cols, strength = _strengths(matrix, threshold)
    low, high = xp.minimum(rows, cols).astype(xp.uint64), xp.maximum(rows, cols).astype(xp.uint64)
    tie = ((low * xp.uint64(0x9E3779B97F4A7C15)) ^ (high * xp.uint64(0xC2B2AE3D27D4EB4F))) >> xp.uint64(11)
    order = xp.lexsort(xp.stack([-tie.astype(float), -strength, rows.astype(float)]))
    rows, cols = rows[order], cols[order]  # by row, strongest first, ties by the edge's hash
    position = xp.arange(rows.size, dtype=xp.int64)
    partner = xp.full(n, -1, dtype=xp.int64)
    for _ in range(rounds):
        free = partner < 0
        best = _first(xp, n, rows, cols, position, free[rows] & free[cols])
        pointing = xp.flatnonzero(best >= 0)
        mutual = pointing[best[best[pointing]] == pointing]
        if mutual.size == 0:
            break
        partner[mutual] = best[mutual]
    nodes = xp.arange(n, dtype=xp.int64)
    leader = xp.where(partner >= 0, xp.minimum(nodes, partner), nodes)
    alone = partner < 0
    best = _first(xp, n, rows, cols, position, alone[rows] & ~alone[cols])
    joining = xp.flatnonzero(best >= 0)
    leader[joining] = leader[best[joining]]
    marked = xp.zeros(n, dtype=bool)
    marked[leader] = True
    number = xp.cumsum(marked) - 1
    return number[leader], int(marked.sum())


def mis2_aggregates(matrix, threshold, seed=0):
    """(aggregate of each row, number of aggregates) of the scipy/cupyx CSR
    ``matrix``: the roots are a maximal independent set of distance 2 in the
    strength graph (Luby's rounds on keys (state, random, row): Bell, Dalton
    and Olson, "Exposing fine-grained parallelism in algebraic multigrid
    methods", SIAM J. Sci. Comput. 34, 2012); each other row joins a
    neighbouring root's aggregate, and a row two steps from every root the
    aggregate of a neighbour that joined one: compact aggregates of a root
    and its neighbours."""
    xp = array_module(matrix.data)
    n = matrix.shape[0]
    rows, cols, _ = _strengths(matrix, threshold)
    index = xp.arange(n, dtype=xp.int64)
    random = (hashed_bits(xp, n, seed) >> xp.uint64(40)).astype(xp.int64)  # 24 random bits
    low = (random << 36) | index  # a key per row, distinct; the state goes on top
    state = xp.ones(n, dtype=xp.int64)  # 0 out, 1 undecided, 2 in the set
    while True:
        undecided = state == 1
        if not bool(undecided.any()):
            break
        own = (state << 60) | low
        key = own
        for _ in range(2):  # the largest key within distance 2
            key = _neighbour_max(xp, key, rows, cols)
        winner = undecided & (key == own)  # the largest undecided row around, no root near: a root
        beaten = undecided & (key >> 60 == 2)  # a root within distance 2
        state[winner], state[beaten] = 2, 0
    roots = state == 2
    aggregates = xp.where(roots, xp.cumsum(roots) - 1, -1)
    count = int(roots.sum())
    for _ in range(2):  # rows next to a root, then rows next to those
        joined = _neighbour_max(xp, aggregates, rows, cols, self_first=False)
        aggregates = xp.where(aggregates >= 0, aggregates, joined)
    alone = aggregates < 0  # rows with no strong neighbour at all (none when the roots are a MIS-2)
    aggregates[alone] = count + xp.arange(int(alone.sum()))
    return aggregates, count + int(alone.sum())


def _neighbour_max(xp, values, rows, cols, self_first=True):
    """Per row, the largest of ``values`` over its neighbours (and itself with ``self_first``)."""
    out = values.copy() if self_first else xp.full_like(values, -1)
    scatter_max(xp, out, rows, values[cols])
    return out


def _strengths(matrix, threshold):
    """Off-diagonal entries (rows, cols, |a_ij| / sqrt(a_ii a_jj)) at or above ``threshold``."""
    xp = array_module(matrix.data)
    rows = entry_rows(xp, matrix.indptr)
    cols, values = matrix.indices.astype(xp.int64), matrix.data
    d = xp.abs(matrix.diagonal())
    strength = xp.abs(values) / xp.sqrt(d[rows] * d[cols])
    keep = (rows != cols) & (strength >= threshold) & (strength > 0)
    return rows[keep], cols[keep], strength[keep]


def _first(xp, n, rows, cols, position, valid):
    """Per row, the column of its first ``valid`` entry in ``position`` order (-1: none)."""
    first = xp.full(n, position.size, dtype=xp.int64)
    scatter_min(xp, first, rows[valid], position[valid])
    found = first < position.size
    best = xp.full(n, -1, dtype=xp.int64)
    best[found] = cols[first[found]]
    return best


def _coarse_matrix(xp, matrix, aggregates, count):
    """T^T A T for the piecewise-constant T of ``aggregates``: the matrix the next matching runs on."""
    T = _piecewise_constant(xp, aggregates, count)
    return (T.T.tocsr() @ matrix @ T).tocsr()


def _piecewise_constant(xp, aggregates, count):
    n = aggregates.size
    return sparse_module(xp).csr_matrix((xp.ones(n), aggregates, xp.arange(n + 1, dtype=xp.int64)), shape=(n, count))


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
        # in parallel: the blocks on other ranks' columns (row_blocks.HaloColumns), and on the coarsest level
        # the vector gathered from every rank (row_blocks.WholeVector) that its rows of the inverse multiply
        self.A_halo = self.P_halo = self.R_halo = self.whole = None
        n = A.shape[0] if rows is None else rows
        self.b, self.x, self.r, self.d, self.d_next = (xp.empty(n, dtype=dtype) for _ in range(5))


class Multigrid:
    """Levels and their cycle ``apply(b, x)``: x = M^-1 b, in ``xp``'s memory.
    What the aggregation hierarchy (AggregationAMG) and a geometric one given
    level by level (GeometricMultigrid) share: the levels' SELL copies, the
    smoothing, the coarsest solve, the V- or K-cycle and what they cost."""

    def __init__(self, xp, degree=DEGREE, slice_height=32, value_dtype=numpy.float64, cycle="v", smoother="chebyshev",
                 comm=None, vector_dtype=numpy.float64):
        for name, value, choices in (("cycle", cycle, CYCLES), ("smoother", smoother, SMOOTHERS)):
            if value not in choices:
                raise ValueError(f"{name} must be one of {choices}, not {value!r}")
        self.xp, self.degree, self.cycle, self.smoother = xp, degree, cycle, smoother
        self.comm = comm  # mpi4py, where the levels are split over ranks (DistributedAggregationAMG)
        self._slice_height, self._value_dtype = slice_height, value_dtype
        self.vector_dtype = numpy.dtype(vector_dtype)
        self._kernels = family("krylov", xp)
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
            _check_symmetric(matrix)
        return matrix

    def _add_level(self, matrix, grid=None):
        """A new coarsest level of ``matrix`` (on ``grid``, a box's (shape, periodic), where known), and its
        (positive) diagonal."""
        with self._phase("operators"):
            level = Level(self._sell(matrix), self.xp, dtype=self.vector_dtype)
            level.grid = grid
            level.A_cycle = self._cycled(matrix, grid)
        self.levels.append(level)
        return level, _positive_diagonal(matrix, len(self.levels) - 1)

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

    def _finish(self, matrix):
        """The coarsest level's inverse of ``matrix``, and the K-cycle's vectors."""
        with self._phase("coarsest"):
            self._coarsest(self.levels[-1], matrix)
        self._check_vector_dtype()
        if self.cycle == "k":  # the K-cycle's vectors and coefficients on the levels it solves by flexible CG
            for level in self.levels[1:-1]:
                n = level.A.shape[0]
                level.c1, level.c2, level.v1, level.v2, level.rt = (self.xp.empty(n) for _ in range(5))
                level.s = self.xp.zeros(5)

    def _check_vector_dtype(self):
        """An AMGError where float32 vectors meet a kernel that takes float64
        ones only: the stencil and tensor-transfer kernels and the smoothing
        updates take both; the SELL and CSR products, the K-cycle's and the
        halo exchanges only float64."""
        if self.vector_dtype == numpy.float64:
            return
        if self.comm is not None or self.cycle != "v":
            raise AMGError(f"{self.vector_dtype} cycle vectors are for a V-cycle on one rank")
        for k, level in enumerate(self.levels[:-1]):
            if not (isinstance(level.A_cycle, StencilMatrix) and isinstance(level.P, TensorTransfer)):
                raise AMGError(f"{self.vector_dtype} cycle vectors need every level cycled from its grid (a "
                               f"stencil, and tensor-product transfers): level {k} is not (an aggregation, or a "
                               "geometric level that is not a constant-coefficient stencil)")

    def _phase(self, name):
        """Time a set-up phase into ``phases[name]``, the GPU's work included."""
        return timed(self.xp, self.phases, name)

    def has_pattern(self, indptr, indices):
        """Whether the finest matrix had the CSR pattern (``indptr``, ``indices``):
        a refresh can take its new values."""
        xp = self.xp
        return _same_pattern(self.levels[0].A, xp.asarray(indptr), xp.asarray(indices))

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
        low, high = level.interval
        theta, delta = (high + low) / 2, (high - low) / 2
        sigma = theta / delta
        rho = 1.0 / sigma
        level.steps = [(0.0, 1.0 / theta)]
        for _ in range(self.degree - 1):
            rho_next = 1.0 / (2.0 * sigma - rho)
            level.steps.append((rho_next * rho, 2.0 * rho_next / delta))
            rho = rho_next

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
        self._cycle(0, finest.b, finest.x)
        x[...] = finest.x

    def _cycle(self, k, b, x):
        level = self.levels[k]
        if level.inverse is not None:  # a kernel, no temporary: capturable in a CUDA graph
            self._kernels.matvec(x, level.inverse, b if level.whole is None else level.whole.gather(b))
            return
        self._smooth(level, b, x, zero=True)
        r = level.r
        self._product(_operator(level), level.A_halo, x, r, alpha=-1.0, beta=1.0, z=b)  # r = b - A x
        coarse = self.levels[k + 1]
        if level.R_halo is not None:
            level.R_halo.start(r)
        level.R.multiply(r, coarse.b)
        if level.R_halo is not None:
            level.R_halo.finish(coarse.b)
        if self.cycle == "k" and coarse.inverse is None:
            self._krylov_correction(k + 1)
        else:
            self._cycle(k + 1, coarse.b, coarse.x)
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

    def _smooth(self, level, b, x, zero=False):
        """The level's smoothing steps on A x = b from x (x = 0 with ``zero``).
        The first step is an update (the krylov family's chebyshev_step, or
        from x = 0 its chebyshev_start, which writes x without reading it);
        each later one, on one rank, a single kernel: r -= A d with the update
        fused in (the chebyshev_step of the level's operator: SELL, or its
        stencil or warp-row copy A_cycle; alternating d between two arrays);
        in parallel an SpMV with its halo, then the update."""
        r = level.r
        if zero:
            r = b
        else:
            self._product(_operator(level), level.A_halo, x, r, alpha=-1.0, beta=1.0, z=b)
        d, d_next = level.d, level.d_next
        for step, (a, c) in enumerate(level.steps):
            if step == 0:  # a = 0: d is written, not read; from zero, x too
                if zero:
                    self._kernels.chebyshev_start(x, d, r, level.scaling, c)
                else:
                    self._kernels.chebyshev_step(x, d, r, level.scaling, a, c)
                continue
            z = b if zero and step == 1 else level.r
            if level.A_cycle is not None or level.A_halo is None:
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


class AggregationAMG(Multigrid):
    """The aggregation hierarchy of the CSR matrix (indptr, indices, data) of
    ``n`` rows in ``xp``'s memory, and its cycle."""

    def __init__(self, indptr, indices, data, n, xp, threshold=THRESHOLD, aggregation="mis2", passes=2, smoothed=True,
                 degree=DEGREE, max_levels=25, coarse_size=1000, slice_height=32, value_dtype=numpy.float64, cycle="v",
                 smoother="chebyshev", mis2_pairs=0, vector_dtype=numpy.float64, sparsify=SPARSIFY):
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, not {aggregation!r}")
        super().__init__(xp, degree, slice_height, value_dtype, cycle, smoother, vector_dtype=vector_dtype)
        self.aggregation, self.passes, self.smoothed, self.mis2_pairs = aggregation, passes, smoothed, mis2_pairs
        self.sparsify = sparsify
        matrix = self._csr(indptr, indices, data, (n, n))
        while True:
            level, d = self._add_level(matrix)
            rows = matrix.shape[0]
            if rows <= coarse_size or len(self.levels) == max_levels:
                break
            with self._phase("aggregation"):
                aggregates, count = self._aggregate(matrix, threshold)
            if count > 0.9 * rows:  # coarsening stalled: this level is the coarsest
                break
            with self._phase("smoother"):
                self._smoother(level, matrix)
            with self._phase("prolongation"):
                P = self._prolongation(matrix, d, aggregates, count, level.lambda_max)
            self._connect(level, P)
            with self._phase("galerkin"):
                coarse = self._coarse(_galerkin(level.galerkin_R, matrix, P))
            if _reached_null_space(coarse, P, d):
                level.P = level.R = level.galerkin_R = None  # this level is the coarsest
                break
            matrix = coarse
        self._finish(matrix)

    def _coarse(self, galerkin):
        """The next level's operator: the Galerkin product, where ``sparsify`` > 0
        made exactly symmetric (rounding leaves R A P symmetric to 1e-16 only,
        and an entry at the threshold must go from both sides) and sparsified."""
        if not self.sparsify:
            return galerkin
        symmetric = ((galerkin + galerkin.T) * 0.5).tocsr()
        symmetric.sort_indices()
        return sparsified(symmetric, self.sparsify, lambda v: v[symmetric.indices])

    def refresh(self, data):
        """New values of the finest matrix on the pattern it was built with
        (``data`` in its CSR order): the aggregates and prolongations stay, the
        Galerkin products, smoother data and coarsest inverse are recomputed
        (a coarse level whose product drops or gains entries, as scipy's drop
        exact zeros, gets a new SellMatrix); ``generation`` counts refreshes."""
        self.phases = dict.fromkeys(PHASES, 0.0)
        matrix = self._finest(data)
        for k, level in enumerate(self.levels):
            with self._phase("operators"):
                if k == 0 or _same_pattern(level.A, matrix.indptr, matrix.indices):
                    level.A.refresh_values(matrix.data)
                else:
                    level.A = self._sell(matrix)
                level.A_cycle = self._cycled(matrix)
            _positive_diagonal(matrix, k)
            if level.inverse is not None:
                break
            with self._phase("smoother"):
                self._smoother(level, matrix)
            with self._phase("galerkin"):
                matrix = self._coarse(_galerkin(level.galerkin_R, matrix, level.galerkin_R.T))
        with self._phase("coarsest"):
            self._coarsest(self.levels[-1], matrix)
        self.generation += 1

    def _aggregate(self, matrix, threshold):
        """Aggregates: of a MIS-2 (``mis2``; on the finest level then paired ``mis2_pairs`` times), or of
        ``passes`` pairwise matchings (``pairwise``), each matching on the Galerkin matrix of the last."""
        xp = self.xp
        if self.aggregation == "mis2":
            aggregates, count = mis2_aggregates(matrix, threshold)
            rounds = self.mis2_pairs if len(self.levels) == 1 else 0
            current = _coarse_matrix(xp, matrix, aggregates, count) if rounds else None
        else:
            aggregates, rounds, current = xp.arange(matrix.shape[0], dtype=xp.int64), self.passes, matrix
        for round_ in range(rounds):
            pairs, count = pairwise_aggregates(current, threshold)
            aggregates = pairs[aggregates]
            if round_ + 1 < rounds:
                current = _coarse_matrix(xp, current, pairs, count)
        return aggregates, count

    def _prolongation(self, matrix, d, aggregates, count, rho):
        """Tentative P (piecewise constant), smoothed by (I - omega D^-1 A) with
        omega = 4 / (3 rho), rho the Lanczos estimate of rho(D^-1 A), where
        ``smoothed``; ``d``: the matrix's (positive) diagonal. Gershgorin's
        bound, used before, is 2.04 where rho is 1.24 on the second level of
        a 3D Laplacian: the damping it gave cost 2 of 12 iterations at 96^3."""
        xp = self.xp
        T = _piecewise_constant(xp, aggregates, count)
        if not self.smoothed:
            return T
        scaled = sparse_module(xp).diags(1.0 / d) @ matrix
        P = (T - (4.0 / (3.0 * rho)) * (scaled @ T)).tocsr()
        P.sort_indices()
        return P


class GeometricMultigrid(Multigrid):
    """The cycle on levels given from outside: the finest the CSR matrix
    (indptr, indices, data) of ``n`` rows, the coarser ones
    ``coarse_operators`` (scipy CSR, each rediscretized on its grid) with the
    ``prolongations`` (scipy CSR, level k+1 to level k) between them, as a
    box's geometric multigrid gives them (plugin.flow.pressure_multigrid).
    With ``grids``, each level's (shape, periodic) finest first, a level
    whose operator is a constant-coefficient stencil on its grid is cycled
    as one (StencilMatrix: no matrix read per product), and a prolongation
    that is a tensor product of per-axis ones, and its restriction, are
    applied from their tables (TensorTransfer)."""

    def __init__(self, indptr, indices, data, n, xp, coarse_operators, prolongations, degree=DEGREE, slice_height=32,
                 value_dtype=numpy.float64, cycle="v", smoother="chebyshev", grids=None, vector_dtype=numpy.float64):
        if len(coarse_operators) != len(prolongations) or not prolongations:
            raise ValueError(f"a geometric hierarchy needs one prolongation per coarse operator and at least one: "
                             f"got {len(prolongations)} and {len(coarse_operators)}")
        if grids is not None and len(grids) != len(prolongations) + 1:
            raise ValueError(f"{len(prolongations) + 1} levels need as many grids, got {len(grids)}")
        super().__init__(xp, degree, slice_height, value_dtype, cycle, smoother, vector_dtype=vector_dtype)
        grids = [None] * (len(prolongations) + 1) if grids is None else grids
        matrix = self._csr(indptr, indices, data, (n, n))
        for P, coarse, grid in zip(prolongations, coarse_operators, grids):
            if P.shape != (matrix.shape[0], coarse.shape[0]):
                raise ValueError(f"a prolongation of shape {P.shape} between levels of {matrix.shape[0]} and "
                                 f"{coarse.shape[0]} rows")
            level, _ = self._add_level(matrix, grid)
            with self._phase("smoother"):
                self._smoother(level, matrix)
            transfers, coarse_grid = None, grids[len(self.levels)]
            if grid is not None and coarse_grid is not None:
                with self._phase("operators"):
                    transfers = TensorTransfer.between(P, grid[0], coarse_grid[0], xp)
            if transfers is None:
                self._connect(level, sparse_module(xp).csr_matrix(P))
            else:  # from per-axis tables: no SELL P, CSR R or float64 R kept beside them
                level.P, level.R = transfers
            matrix = self._csr(coarse.indptr, coarse.indices, coarse.data, coarse.shape)
        self._add_level(matrix, grids[-1])
        self._finish(matrix)

    def refresh(self, data):
        """New values of the finest matrix on its pattern: its SELL copy and
        smoothing; the coarse levels, rediscretized on their grids, stay."""
        self.phases = dict.fromkeys(PHASES, 0.0)
        matrix = self._finest(data)
        level = self.levels[0]
        with self._phase("operators"):
            level.A.refresh_values(matrix.data)
            level.A_cycle = self._cycled(matrix, level.grid)
        _positive_diagonal(matrix, 0)
        with self._phase("smoother"):
            self._smoother(level, matrix)
        self.generation += 1


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


def _galerkin(R, A, P, products=GALERKIN_PRODUCTS):
    """R A P, sorted and summed, over blocks of R's rows of at most about
    ``products`` multiply-adds in R A each (the block's (R A) P takes a few
    times more): cuSPARSE's SpGEMM buffers grow with them, and the 256^3 flow
    driver's first Galerkin product in one piece did not fit on an 80 GB H100."""
    xp = array_module(A.data)
    rows = R.shape[0]
    done = xp.zeros(R.nnz + 1, dtype=xp.int64)  # multiply-adds of R A before each entry of R
    xp.cumsum(xp.diff(A.indptr).astype(xp.int64)[R.indices], out=done[1:])
    at_row_ends = done[xp.asarray(R.indptr[1:], dtype=xp.int64)]
    total = int(done[-1])
    blocks = max(1, -(-total // products))
    targets = xp.arange(1, blocks, dtype=xp.int64) * total // blocks
    cuts = xp.searchsorted(at_row_ends, targets).tolist() if blocks > 1 else []
    bounds = sorted({0, rows, *cuts})
    parts = [(R[start:end] @ A) @ P for start, end in zip(bounds[:-1], bounds[1:])]
    coarse = (parts[0] if len(parts) == 1 else sparse_module(xp).vstack(parts)).tocsr()
    coarse.sum_duplicates()
    coarse.sort_indices()
    return coarse


def sparsified(matrix, theta, at_columns, first_row=0):
    """A non-Galerkin coarse operator (Falgout and Schroder, "Non-Galerkin
    coarse grids for algebraic multigrid", SIAM J. Sci. Comput. 36, 2014):
    the rank's rows ``matrix`` of an exactly symmetric matrix (CSR, global
    columns; ``first_row``: the first row's number) without the off-diagonal
    entries below ``theta`` times the smaller of their row's and their
    column's largest off-diagonal magnitude, each dropped entry added to its
    row's diagonal. Row sums stay (and the constants of an all-Neumann matrix
    in its null space); the test is symmetric, so symmetry stays; each row's
    a_ii - sum_j |a_ij| can only grow (a dropped a_ij adds a_ij + |a_ij| >= 0),
    so Gershgorin's lower bound never falls. A row whose diagonal would fall
    below half keeps its entries, and so do their partners in other rows.
    ``at_columns(v)``: the values of a per-row vector v at each entry's
    column (on one rank v[indices]; in parallel other ranks' values come by
    exchange)."""
    xp = array_module(matrix.data)
    n = matrix.shape[0]
    rows = entry_rows(xp, matrix.indptr)
    data = matrix.data
    diagonal = matrix.indices.astype(xp.int64) == rows + first_row
    size = xp.where(diagonal, 0.0, xp.abs(data))
    largest = xp.zeros(n)
    scatter_max(xp, largest, rows, size)
    drop = ~diagonal & (size < theta * xp.minimum(largest[rows], at_columns(largest)))
    d = xp.zeros(n)
    d[rows[diagonal]] = data[diagonal]
    steady = d + xp.bincount(rows[drop], weights=data[drop], minlength=n) >= 0.5 * d  # rows that may drop
    drop &= steady[rows] & (at_columns(steady.astype(xp.float64)) > 0.5)
    lumped = xp.where(diagonal, xp.bincount(rows[drop], weights=data[drop], minlength=n)[rows], 0.0)
    keep = ~drop
    counts = xp.bincount(rows[keep], minlength=n)
    indptr = xp.concatenate((xp.zeros(1, dtype=xp.int64), xp.cumsum(counts)))
    return sparse_module(xp).csr_matrix(((data + lumped)[keep], matrix.indices[keep], indptr), shape=matrix.shape)


def _same_pattern(sell, indptr, indices):
    """Whether the CSR pattern (``indptr``, ``indices``) is the one ``sell`` was built from."""
    return (sell.nnz == indices.size and sell.indptr.size == indptr.size and bool((sell.indptr == indptr).all())
            and bool((sell.cols[sell.val_map] == indices).all()))


def _check_symmetric(matrix):
    """An AMGError with the measured asymmetry ||A - A^T||_F / ||A||_F where it is above SYMMETRY_TOLERANCE:
    the V-cycle and the Galerkin products R A P with R = P^T are made for symmetric matrices."""
    xp = array_module(matrix.data)
    size = float(xp.linalg.norm(matrix.data))
    if size == 0.0:
        return
    refuse_asymmetry(float(xp.linalg.norm((matrix - matrix.T).tocsr().data)) / size)


# A coarse diagonal entry p^T A p below this fraction of p^T D p (D the finer
# level's diagonal) is rounding: the coarse vector p lies in the null space.
NULL_SPACE_DIAGONAL = 1e-10


def _reached_null_space(coarse, P, d):
    """Whether a column p of P is in the null space of the finer matrix (a
    singular matrix coarsened until an aggregate holds a whole Neumann
    component): its Galerkin diagonal entry is rounding, which no smoother
    can divide by and a pseudo-inverse would scale by 1e14; the finer level
    is then the coarsest."""
    scale = P.multiply(P).T @ d
    return bool((coarse.diagonal() <= NULL_SPACE_DIAGONAL * scale).any())


def refuse_asymmetry(measured):
    """An AMGError where the ``measured`` ||A - A^T||_F / ||A||_F is above SYMMETRY_TOLERANCE."""
    if measured > SYMMETRY_TOLERANCE:
        raise AMGError(f"gpuamg needs a symmetric matrix: ||A - A^T||_F / ||A||_F = {measured:.3g} (at most "
                       f"{SYMMETRY_TOLERANCE:g}); use a preconditioner for nonsymmetric matrices (gamg under gmres, "
                       "wbilu, ainv spai)")


def _positive_diagonal(matrix, level):
    """The diagonal of ``matrix``, or an AMGError naming the first row where it is not positive."""
    d = matrix.diagonal()
    bad = d <= 0
    if bool(bad.any()):
        row = int(array_module(d).flatnonzero(bad)[0])
        raise AMGError(f"gpuamg needs a positive diagonal: row {row} of level {level} has {float(d[row]):.3g}")
    return d
