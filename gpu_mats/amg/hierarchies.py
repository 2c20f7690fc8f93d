"""The hierarchies: by aggregation (AggregationAMG), and of levels given
from outside (GeometricMultigrid, a box's grids)."""

from dataclasses import replace

from ..backend import sparse_module
from ..stencil import TensorTransfer
from .aggregation import AGGREGATIONS, matched_matrix, mis2_aggregates, pairwise_aggregates
from .checks import positive_diagonal, same_pattern
from .cycle import PHASES, Multigrid
from .galerkin import galerkin_product, reached_null_space, sparsified
from .prolongation import piecewise_constant, smoothed_prolongation
from .settings import AMGSettings


class AggregationAMG(Multigrid):
    """The aggregation hierarchy of the CSR matrix (indptr, indices, data) of
    ``n`` rows in ``xp``'s memory, and its cycle; ``settings`` (AMGSettings,
    with any of its fields given as keywords instead).

    The level loop and the refresh are written once, here; what they do to a
    level's rows goes through the hooks below (``_first`` .. ``_refresh_level``),
    which DistributedAggregationAMG replaces with their row-split versions."""

    def __init__(self, indptr, indices, data, n, xp, settings=None, comm=None, **fields):
        settings = replace(settings or AMGSettings(), **fields)
        if settings.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, not {settings.aggregation!r}")
        super().__init__(xp, settings, comm=comm)
        self._build(self._first(indptr, indices, data, n), n)

    def _build(self, matrix, rows):
        """The levels from ``matrix`` (of ``rows``: a count, or in parallel the ranks' row ranges) down."""
        s = self.settings
        while True:
            level, d = self._new_level(matrix, rows)
            if self._total(rows) <= s.coarse_size or len(self.levels) == s.max_levels:
                break
            with self._phase("aggregation"):
                aggregates, coarse_rows = self._aggregates(level, matrix)
            if self._total(coarse_rows) > 0.9 * self._total(rows):  # coarsening stalled: this level is the coarsest
                break
            with self._phase("smoother"):
                self._smoother(level, matrix)
            with self._phase("prolongation"):
                P = self._prolongation(level, matrix, d, aggregates, coarse_rows)
            self._link(level, P, rows, coarse_rows)
            with self._phase("galerkin"):
                coarse = self._coarse_operator(level, matrix, P)
            if self._in_null_space(coarse, P, d, coarse_rows):
                self._unlink(level)  # this level is the coarsest
                break
            self._fuse_correction(level, matrix, P)
            matrix, rows = coarse, coarse_rows
        self._finish(matrix)

    def refresh(self, data):
        """New values of the finest matrix on the pattern it was built with
        (``data`` in its CSR order): the aggregates and prolongations stay, the
        Galerkin products, smoother data and coarsest inverse are recomputed
        (a coarse level whose product drops or gains entries, as scipy's drop
        exact zeros, gets a new SellMatrix); ``generation`` counts refreshes."""
        self.phases = dict.fromkeys(PHASES, 0.0)
        matrix = self._refreshed_finest(data)
        for k, level in enumerate(self.levels):
            self._refresh_level(level, matrix, k)
            if level.inverse is not None:
                break
            self._fuse_correction(level, matrix, self._kept_prolongation(level))
            with self._phase("smoother"):
                self._smoother(level, matrix)
            with self._phase("galerkin"):
                matrix = self._coarse_operator(level, matrix, self._kept_prolongation(level))
        self._solve_coarsest(matrix)
        self.generation += 1

    # --- the hooks: one rank's rows -----------------------------------------------------

    def _first(self, indptr, indices, data, n):
        return self._csr(indptr, indices, data, (n, n))

    @staticmethod
    def _total(rows):
        """The rows of a level over all ranks."""
        return rows

    def _new_level(self, matrix, rows):
        return self._add_level(matrix)

    def _aggregates(self, level, matrix):
        """(each row's aggregate, the coarse level's rows)."""
        return self._aggregate(matrix, self.settings.threshold)

    def _prolongation(self, level, matrix, d, aggregates, count):
        if not self.settings.smoothed:
            return piecewise_constant(self.xp, aggregates, count)
        return smoothed_prolongation(self.xp, matrix, d, aggregates, count, level.lambda_max)

    def _link(self, level, P, rows, coarse_rows):
        self._connect(level, P)

    def _unlink(self, level):
        level.P = level.R = level.galerkin_R = None

    def _kept_prolongation(self, level):
        """The P a refresh multiplies with (kept as R = P^T, the restriction's float64 CSR)."""
        return level.galerkin_R.T

    def _coarse_operator(self, level, matrix, P):
        """The next level's operator: the Galerkin product, where ``sparsify`` > 0
        made exactly symmetric (rounding leaves R A P symmetric to 1e-16 only,
        and an entry at the threshold must go from both sides) and sparsified."""
        galerkin = galerkin_product(level.galerkin_R, matrix, P)
        if not self.settings.sparsify:
            return galerkin
        symmetric = ((galerkin + galerkin.T) * 0.5).tocsr()
        symmetric.sort_indices()
        return sparsified(symmetric, self.settings.sparsify, lambda v: v[symmetric.indices])

    @staticmethod
    def _in_null_space(coarse, P, d, coarse_rows):
        return reached_null_space(coarse, P, d)

    def _refreshed_finest(self, data):
        return self._finest(data)

    def _refresh_level(self, level, matrix, k):
        """Level ``k``'s operators from ``matrix``, its new values."""
        with self._phase("operators"):
            if k == 0 or same_pattern(level.A, matrix.indptr, matrix.indices):
                level.A.refresh_values(matrix.data)
            else:
                level.A = self._sell(matrix)
            level.A_cycle = self._cycled(matrix)
        positive_diagonal(matrix, k)

    def _aggregate(self, matrix, threshold):
        """Aggregates: of a MIS-2 (``mis2``; on the finest level then paired ``mis2_pairs`` times), or of
        ``passes`` pairwise matchings (``pairwise``), each matching on the Galerkin matrix of the last."""
        xp = self.xp
        if self.settings.aggregation == "mis2":
            aggregates, count = mis2_aggregates(matrix, threshold)
            rounds = self.settings.mis2_pairs if len(self.levels) == 1 else 0
            current = matched_matrix(xp, matrix, aggregates, count) if rounds else None
        else:
            aggregates, rounds, current = xp.arange(matrix.shape[0], dtype=xp.int64), self.settings.passes, matrix
        for round_ in range(rounds):
            pairs, count = pairwise_aggregates(current, threshold)
            aggregates = pairs[aggregates]
            if round_ + 1 < rounds:
                current = matched_matrix(xp, current, pairs, count)
        return aggregates, count


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

    def __init__(self, indptr, indices, data, n, xp, coarse_operators, prolongations, settings=None, grids=None,
                 **fields):
        if len(coarse_operators) != len(prolongations) or not prolongations:
            raise ValueError(f"a geometric hierarchy needs one prolongation per coarse operator and at least one: "
                             f"got {len(prolongations)} and {len(coarse_operators)}")
        if grids is not None and len(grids) != len(prolongations) + 1:
            raise ValueError(f"{len(prolongations) + 1} levels need as many grids, got {len(grids)}")
        super().__init__(xp, replace(settings or AMGSettings(), **fields))
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
        positive_diagonal(matrix, 0)
        with self._phase("smoother"):
            self._smoother(level, matrix)
        self.generation += 1
