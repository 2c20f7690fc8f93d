"""The hierarchies: by aggregation (AggregationAMG), and of levels given
from outside (GeometricMultigrid, a box's grids)."""

import numpy

from ..backend import sparse_module
from ..stencil import TensorTransfer
from .aggregation import AGGREGATIONS, THRESHOLD, matched_matrix, mis2_aggregates, pairwise_aggregates
from .checks import positive_diagonal, same_pattern
from .cycle import DEGREE, PHASES, Multigrid
from .galerkin import SPARSIFY, galerkin_product, reached_null_space, sparsified
from .prolongation import piecewise_constant, smoothed_prolongation


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
                P = (smoothed_prolongation(self.xp, matrix, d, aggregates, count, level.lambda_max)
                     if self.smoothed else piecewise_constant(self.xp, aggregates, count))
            self._connect(level, P)
            with self._phase("galerkin"):
                coarse = self._coarse(galerkin_product(level.galerkin_R, matrix, P))
            if reached_null_space(coarse, P, d):
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
                if k == 0 or same_pattern(level.A, matrix.indptr, matrix.indices):
                    level.A.refresh_values(matrix.data)
                else:
                    level.A = self._sell(matrix)
                level.A_cycle = self._cycled(matrix)
            positive_diagonal(matrix, k)
            if level.inverse is not None:
                break
            with self._phase("smoother"):
                self._smoother(level, matrix)
            with self._phase("galerkin"):
                matrix = self._coarse(galerkin_product(level.galerkin_R, matrix, level.galerkin_R.T))
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
            current = matched_matrix(xp, matrix, aggregates, count) if rounds else None
        else:
            aggregates, rounds, current = xp.arange(matrix.shape[0], dtype=xp.int64), self.passes, matrix
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
        positive_diagonal(matrix, 0)
        with self._phase("smoother"):
            self._smoother(level, matrix)
        self.generation += 1
