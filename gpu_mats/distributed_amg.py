"""The aggregation multigrid of gpu_mats.amg for a matrix split by rows over
MPI ranks: the hierarchy a single rank would build, save that aggregates
stay inside a rank.

Each rank aggregates the rows it owns (on the strength graph of its
diagonal block) and numbers its aggregates after those of the ranks before
it; the smoothed prolongation (I - omega D^-1 A) T reaches the aggregates of
neighbouring ranks through A's columns there, whose aggregate numbers come
over the level's halo exchange; the Galerkin product P^T A P is distributed
(gpu_mats.row_blocks: the rows of P that A reaches are fetched, P^T's
contributions are summed by the owners of their coarse rows), as are the
smoothers' eigenvalue estimates. Every level keeps its rows on their rank,
each operator split into the block on owned columns and the block on the
others' (HaloColumns), multiplied while the halo arrives; the coarsest
level is gathered on every rank, which keeps its rows of the dense
pseudo-inverse and gathers the whole right-hand side per cycle. The
coupling between ranks is thus in every level, as in the serial hierarchy,
not left to the Krylov method as a block Jacobi of rank-local hierarchies
leaves it (3 to 4 times the serial CG iterations on 2 and 3 ranks).
"""

from dataclasses import replace

import numpy
from mpi4py import MPI

from .amg import (DENSE_LIMIT, AggregationAMG, AMGError, AMGSettings, Level, WarpRows, coarsest_inverse,
                  refuse_asymmetry, sparsified)
from .amg.galerkin import NULL_SPACE_DIAGONAL
from .backend import sparse_module, to_host
from .exchange import NcclTransport, halo_plan, transport
from .halo import split_rows
from .row_blocks import HaloColumns, WholeVector, asymmetry, galerkin, ownership, transpose
from .sell import entry_rows


class DistributedAggregationAMG(AggregationAMG):
    """The aggregation hierarchy of the matrix whose rows ``starts[rank]`` ..
    ``starts[rank + 1] - 1`` this rank holds as CSR (indptr, indices, data)
    with global column numbers, over the ranks of ``comm`` (mpi4py), and its
    V-cycle; ``settings`` as AggregationAMG's, its ``halo_transport``
    carrying the halos (gpu_mats.exchange). AggregationAMG's level loop and
    refresh run it, through the hooks below on the rank's rows; a level's
    rows are its ranks' row ranges (``starts``)."""

    def __init__(self, indptr, indices, data, starts, comm, xp, settings=None, **fields):
        settings = replace(settings or AMGSettings(), **fields)
        if settings.cycle != "v":
            raise ValueError("gpuamg's K-cycle runs on one rank only (its inner products are not summed over "
                             "ranks): use the V-cycle in parallel")
        super().__init__(indptr, indices, data, numpy.asarray(starts, dtype=numpy.int64), xp, settings, comm=comm)

    @property
    def exchanges_on_device(self):
        """Whether every halo the cycle exchanges travels by NCCL: then nothing in
        a cycle waits for the host, and a CUDA graph can hold it."""
        return all(isinstance(halo.exchange, NcclTransport) for level in self.levels
                   for halo in (level.A_halo, level.P_halo, level.R_halo, level.whole) if halo is not None)

    # --- the hooks: the rank's rows ---------------------------------------------------

    def _first(self, indptr, indices, data, starts):
        return self._rows(indptr, indices, data, starts)

    @staticmethod
    def _total(starts):
        return int(starts[-1])

    def _new_level(self, matrix, starts):
        return self._add_rows(matrix, starts)

    def _aggregates(self, level, matrix):
        """(each owned row's aggregate, numbered globally; the coarse level's row ranges)."""
        aggregates, count = self._aggregate(level.own, self.settings.threshold)
        coarse_starts = ownership(count, self.comm)
        return aggregates + int(coarse_starts[self.comm.Get_rank()]), coarse_starts

    def _prolongation(self, level, matrix, d, aggregates, coarse_starts):
        return self._prolongation_rows(level, matrix, d, aggregates, int(coarse_starts[-1]))

    def _link(self, level, P, starts, coarse_starts):
        self._connect_rows(level, P, starts, coarse_starts)

    def _unlink(self, level):
        level.P = level.R = level.P_halo = level.R_halo = level.galerkin_P = level.coarse_starts = None

    def _kept_prolongation(self, level):
        return level.galerkin_P

    def _coarse_operator(self, level, matrix, P):
        return self._coarse_rows(galerkin(P, matrix, level.starts, level.coarse_starts, self.comm),
                                 level.coarse_starts)

    def _in_null_space(self, coarse, P, d, coarse_starts):
        """reached_null_space over the ranks: each coarse row's p^T D p summed
        over the ranks' fine rows, tested on the coarse rows' owners."""
        xp, rank = self.xp, self.comm.Get_rank()
        scale = numpy.empty(int(coarse_starts[-1]))
        self.comm.Allreduce(to_host(xp, P.multiply(P).T @ d), scale, op=MPI.SUM)
        start, end = int(coarse_starts[rank]), int(coarse_starts[rank + 1])
        rows = entry_rows(xp, coarse.indptr)
        on_diagonal = coarse.indices.astype(xp.int64) == rows + start
        diagonal = numpy.zeros(end - start)
        diagonal[to_host(xp, rows[on_diagonal])] = to_host(xp, coarse.data[on_diagonal])
        return self.comm.allreduce(bool((diagonal <= NULL_SPACE_DIAGONAL * scale[start:end]).any()), op=MPI.LOR)

    def _solve_coarsest(self, matrix):
        self._gather_coarsest(matrix, self.levels[-1].starts)

    def _refreshed_finest(self, data):
        first = self.levels[0]
        return self._rows(*first.pattern, data, first.starts)

    def _refresh_level(self, level, matrix, k):
        if self._same_everywhere(level.pattern, matrix.indptr, matrix.indices):
            with self._phase("operators"):
                own, offd = level.split.split_values(matrix.data)
                level.own.data[...] = own
                level.A.refresh_values(own)
                level.A_halo.block.refresh_values(offd)
            self._positive_diagonal(level.own, int(level.starts[self.comm.Get_rank()]))
        else:
            self._level_rows(level, matrix, level.starts)

    # --- set-up -----------------------------------------------------------------------

    def _rows(self, indptr, indices, data, starts):
        """The rank's rows (CSR, global columns, float64, in xp's memory), the whole matrix checked symmetric."""
        xp = self.xp
        with self._phase("operators"):
            matrix = sparse_module(xp).csr_matrix(
                (xp.asarray(data, dtype=xp.float64), xp.asarray(indices), xp.asarray(indptr)),
                shape=(int(starts[self.comm.Get_rank() + 1] - starts[self.comm.Get_rank()]), int(starts[-1])))
        with self._phase("symmetry"):
            refuse_asymmetry(asymmetry(matrix, starts, self.comm))
        return matrix

    def _add_rows(self, matrix, starts):
        """A new coarsest level of the rank's rows ``matrix``, and its (positive) diagonal."""
        rank = self.comm.Get_rank()
        level = Level(None, self.xp, rows=int(starts[rank + 1] - starts[rank]))
        self.levels.append(level)
        return level, self._level_rows(level, matrix, starts)

    def _level_rows(self, level, matrix, starts):
        """The operator of ``level`` from the rank's rows ``matrix``: its owned
        block (``A``; ``own`` in CSR for the aggregation), the block on other
        ranks' columns (``A_halo``); returns the (positive) diagonal."""
        rank = self.comm.Get_rank()
        start, end = int(starts[rank]), int(starts[rank + 1])
        with self._phase("operators"):
            level.starts, level.pattern = starts, (matrix.indptr.copy(), matrix.indices.copy())
            level.split = split = split_rows(matrix.indptr, matrix.indices, matrix.data, start, end)
            level.own = self._csr_block(split.diag, end - start)
            level.A = self._sell(level.own)
            level.A_halo = self._halo(split.offd, split.halo, starts)
        return self._positive_diagonal(level.own, start)

    def _coarse_rows(self, matrix, starts):
        """The next level's rows: the Galerkin product's ``matrix``, where
        ``sparsify`` > 0 made exactly symmetric (as AggregationAMG._coarse) and
        sparsified, its columns on other ranks read by a halo exchange
        (collective)."""
        if not self.settings.sparsify:
            return matrix
        matrix = ((matrix + transpose(matrix, starts, starts, self.comm)) * 0.5).tocsr()
        matrix.sort_indices()
        xp, rank = self.xp, self.comm.Get_rank()
        start, end = int(starts[rank]), int(starts[rank + 1])
        cols = matrix.indices.astype(xp.int64)
        outside = (cols < start) | (cols >= end)
        halo = xp.unique(cols[outside])
        exchange = transport(halo_plan(to_host(xp, halo), starts, self.comm), self.comm, xp,
                             self.settings.halo_transport)

        def at_columns(v):
            values = xp.zeros(halo.size)
            exchange.forward_begin(v, values)
            exchange.forward_end()
            out = v[xp.clip(cols - start, 0, max(end - start - 1, 0))]
            out[outside] = values[xp.searchsorted(halo, cols[outside])]
            return out

        return sparsified(matrix, self.settings.sparsify, at_columns, first_row=start)

    def _csr_block(self, csr, ncols):
        indptr, indices, data = csr
        return sparse_module(self.xp).csr_matrix((data, indices, indptr), shape=(indptr.size - 1, ncols))

    def _halo(self, offd, halo, col_starts):
        """The block on other ranks' columns (CSR ``offd`` on the ``halo`` columns) with its exchange."""
        block = self._sell(self._csr_block(offd, halo.size))
        return HaloColumns(block, halo, col_starts, self.comm, self.xp, self.settings.halo_transport)

    def _positive_diagonal(self, own, start):
        """The owned block's diagonal, or on every rank an AMGError naming the
        first row (globally numbered) where it is not positive."""
        d = own.diagonal()
        bad = d <= 0
        first = int(self.xp.flatnonzero(bad)[0]) if bool(bad.any()) else -1
        found = self.comm.allgather((first + start, float(d[first])) if first >= 0 else None)
        for rank, row in enumerate(found):
            if row is not None:
                raise AMGError(f"gpuamg needs a positive diagonal: row {row[0]} (on rank {rank}) of level "
                               f"{len(self.levels) - 1} has {row[1]:.3g}")
        return d

    def _prolongation_rows(self, level, matrix, d, aggregate, ncoarse):
        """The rank's rows of P: the tentative T (row i in its rank's aggregate
        ``aggregate[i]``, globally numbered), smoothed as in AggregationAMG:
        T - omega D^-1 A T, where A T sums each row's entries by the aggregate
        of their column, those of other ranks' columns brought by the halo
        exchange."""
        xp, sparse = self.xp, sparse_module(self.xp)
        n = aggregate.size
        T = sparse.csr_matrix((xp.ones(n), aggregate, xp.arange(n + 1, dtype=xp.int64)), shape=(n, ncoarse))
        if not self.settings.smoothed:
            return T
        halo = level.A_halo
        halo.exchange.forward_begin(aggregate.astype(xp.float64), halo.values)  # exact: fewer than 2^53 aggregates
        halo.exchange.forward_end()
        column_aggregate = xp.empty(matrix.nnz, dtype=xp.int64)
        column_aggregate[level.split.owned] = aggregate[level.split.diag[1]]
        column_aggregate[~level.split.owned] = halo.values[level.split.offd[1]].astype(xp.int64)
        AT = sparse.csr_matrix((matrix.data, column_aggregate, matrix.indptr), shape=(n, ncoarse)).tocoo().tocsr()
        AT.sum_duplicates()
        P = (T - sparse.diags(4.0 / (3.0 * level.lambda_max) / d) @ AT).tocsr()
        P.sort_indices()
        return P

    def _connect_rows(self, level, P, starts, coarse_starts):
        """The transfers of ``level``: P (the rank's fine rows) and R = P^T (its
        coarse rows), each split into owned and halo blocks."""
        rank = self.comm.Get_rank()
        with self._phase("operators"):
            level.galerkin_P, level.coarse_starts = P, coarse_starts
            start, end = int(coarse_starts[rank]), int(coarse_starts[rank + 1])
            split = split_rows(P.indptr, P.indices, P.data, start, end)
            level.P, level.P_halo = self._sell(self._csr_block(split.diag, end - start)), \
                self._halo(split.offd, split.halo, coarse_starts)
            R = transpose(P, starts, coarse_starts, self.comm)
            start, end = int(starts[rank]), int(starts[rank + 1])
            split = split_rows(R.indptr, R.indices, R.data, start, end)
            level.R = WarpRows(self._csr_block(split.diag, end - start), self._value_dtype, self.xp)
            level.R_halo = self._halo(split.offd, split.halo, starts)

    def _gather_coarsest(self, matrix, starts):
        """The coarsest level gathered on every rank: the pseudo-inverse of the
        whole matrix, this rank's rows of it with the columns in the order of
        the gathered right-hand side (WholeVector)."""
        xp, comm = self.xp, self.comm
        total, rank = int(starts[-1]), comm.Get_rank()
        level = self.levels[-1]
        with self._phase("coarsest"):
            if total > DENSE_LIMIT:
                raise AMGError(f"the coarsest level has {total} rows (coarsening stalled): more than the "
                               f"{DENSE_LIMIT} a dense solve takes; lower the threshold, or use fewer ranks")
            parts = comm.allgather(tuple(to_host(xp, a) for a in (xp.diff(matrix.indptr), matrix.indices,
                                                                   matrix.data)))
            lengths, indices, data = (numpy.concatenate([part[k] for part in parts]) for k in range(3))
            indptr = numpy.concatenate(([0], numpy.cumsum(lengths)))
            whole = sparse_module(numpy).csr_matrix((data, indices, indptr), shape=(total, total)).toarray()
            if level.whole is None:
                level.whole = WholeVector(starts, comm, xp, self.settings.halo_transport)
            rows = coarsest_inverse(numpy, whole)[starts[rank]:starts[rank + 1]][:, level.whole.order]
            level.inverse = xp.ascontiguousarray(xp.asarray(rows))

    # --- new values on the same pattern -------------------------------------------------

    def has_pattern(self, indptr, indices):
        """Whether every rank's rows have the CSR pattern they were built with (collective)."""
        xp = self.xp
        return self._same_everywhere(self.levels[0].pattern, xp.asarray(indptr), xp.asarray(indices))

    def _same_everywhere(self, pattern, indptr, indices):
        old_indptr, old_indices = pattern
        same = (old_indptr.size == indptr.size and old_indices.size == indices.size and
                bool((old_indptr == indptr).all()) and bool((old_indices == indices).all()))
        return all(self.comm.allgather(same))
