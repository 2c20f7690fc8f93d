"""Block ILU(0) run level by level: the wavefront preconditioner of
Luo et al. 2015 (docs/references.md).

The arithmetic is the ILU(0) of the natural ordering (zero fill, L unit
lower, the diagonal blocks of U stored as their inverses). Level scheduling
only changes the order of execution: a row's level is one more than the
highest level among the rows its strictly lower blocks refer to, so the rows
of one level are independent in the factorization and in both sweeps.

The factors are stored with the rows regrouped by level (a level's blocks are
contiguous, for coalesced reads) and the vectors stay in the natural order.
The work itself is in the kernel family gpu_mats.kernels.block_ilu (one
CUDA thread per row in the factorization, one per row component in the
sweeps; the same operations vectorised across the rows of a level with
NumPy).
"""

import numpy

from .backend import to_host
from .kernels import family

PIVOT_TOLERANCE = 1e-14  # a pivot below this times its block's largest entry: singular
PERSISTENT_MAX_BLOCK_SIZE = 32  # the persistent sweeps put each row's bs lanes in one warp


class SingularBlockError(ValueError):
    """A diagonal block of the factorization is singular."""

    def __init__(self, row, pivot):
        self.row, self.pivot = row, pivot
        super().__init__(f"the diagonal block of block row {row} is singular in the factorization "
                         f"(zero pivot in its column {pivot})")


def graph_levels(indptr, indices):
    """Level of each row from the dependency graph of the strictly lower
    blocks: Kahn's layers, a frontier at a time (work proportional to nnz)."""
    nb = indptr.size - 1
    rows = numpy.repeat(numpy.arange(nb), numpy.diff(indptr))
    lower = indices < rows
    waiting = numpy.bincount(rows[lower], minlength=nb)  # unfinished dependencies per row
    order = numpy.argsort(indices[lower], kind="stable")  # dependents grouped by the row they wait on
    dependents, starts = rows[lower][order], numpy.searchsorted(indices[lower][order], numpy.arange(nb + 1))
    levels = numpy.empty(nb, dtype=numpy.int64)
    frontier, level = numpy.flatnonzero(waiting == 0), 0
    while frontier.size:
        levels[frontier] = level
        counts = starts[frontier + 1] - starts[frontier]
        released = dependents[concatenated_ranges(starts[frontier], counts)]
        numpy.subtract.at(waiting, released, 1)
        frontier = numpy.unique(released[waiting[released] == 0])
        level += 1
    return levels


def grid_levels(shape):
    """Levels i + j + k of the cells of a structured grid numbered with i
    fastest: the hyperplanes of Luo et al. 2015, valid for star stencils."""
    grids = numpy.meshgrid(*(numpy.arange(n) for n in shape), indexing="ij")
    return sum(grids).ravel(order="F")


def concatenated_ranges(starts, counts):
    """Concatenated aranges starts[i] .. starts[i] + counts[i]."""
    total = int(counts.sum())
    offsets = numpy.repeat(starts - numpy.cumsum(counts) + counts, counts)
    return offsets + numpy.arange(total)


class BlockILU:
    """ILU(0) of a square block sparse matrix, set up and applied in ``xp``'s memory.

    ``indptr``, ``indices``: the block pattern (NumPy, ascending columns per
    row, every diagonal block present); ``blocks``: (nnzb, bs, bs) values,
    row-major blocks; ``levels``: a level per block row (from
    ``graph_levels`` or ``grid_levels``), checked against the pattern.
    """

    def __init__(self, indptr, indices, blocks, levels, xp=numpy, schedule="launch"):
        indptr, indices = numpy.asarray(indptr, dtype=numpy.int64), numpy.asarray(indices, dtype=numpy.int64)
        levels = numpy.asarray(levels, dtype=numpy.int64)
        self.xp, self.block_size = xp, blocks.shape[1]
        self.num_rows = indptr.size - 1
        self._structure(indptr, indices, levels)
        self.kernels = family("block_ilu", xp)
        self.schedule = schedule
        self.factor(blocks)

    @property
    def num_levels(self):
        return self.level_ptr.size - 1

    def _structure(self, indptr, indices, levels):
        nb, xp = self.num_rows, self.xp
        rows = numpy.repeat(numpy.arange(nb), numpy.diff(indptr))
        diagonal_count = numpy.bincount(rows[indices == rows], minlength=nb)
        if (diagonal_count != 1).any():
            raise ValueError(f"block row {int(numpy.flatnonzero(diagonal_count != 1)[0])} has no diagonal block: "
                             "ILU(0) needs every diagonal block in the pattern")
        lower = indices < rows
        early = levels[indices[lower]] >= levels[rows[lower]]
        if early.any():
            row = int(rows[lower][early][0])
            raise ValueError(f"the levels do not fit the pattern: block row {row} depends on a row of its own "
                             "or a later level (grid levels need a star stencil; use the graph levels)")
        order = numpy.argsort(levels, kind="stable")  # level order: r-th row is order[r]
        rank = numpy.empty(nb, dtype=numpy.int64)
        rank[order] = numpy.arange(nb)
        counts = numpy.diff(indptr)[order]
        ptr = numpy.concatenate(([0], numpy.cumsum(counts)))
        src = concatenated_ranges(indptr[order], counts)  # the input block of each stored one
        cols = indices[src]
        row_r = numpy.repeat(numpy.arange(nb), counts)
        e = numpy.flatnonzero(cols < order[row_r])  # the lower blocks
        lower_count = numpy.bincount(row_r[e], minlength=nb)
        diag = ptr[:-1] + lower_count
        # ILU(0) updates: for each lower block (r, k), each upper block (k, j) of
        # row k whose column j is in row r's pattern gives a_rj -= l_rk u_kj.
        k = rank[cols[e]]
        n_up = ptr[k + 1] - diag[k] - 1
        tri_e = numpy.repeat(e, n_up)
        tri_f = concatenated_ranges(diag[k] + 1, n_up)
        keys = row_r * nb + cols
        wanted = row_r[tri_e] * nb + cols[tri_f]
        at = numpy.minimum(numpy.searchsorted(keys, wanted), keys.size - 1)
        kept = keys[at] == wanted
        tri_e, tri_f, tri_t = tri_e[kept], tri_f[kept], at[kept]
        level_ptr = numpy.searchsorted(levels[order], numpy.arange(levels.max() + 2 if nb else 1))

        def device(a, dtype=numpy.int64):
            return xp.asarray(a, dtype=dtype)

        self.level_ptr = level_ptr  # host: the sweeps loop over it
        self.order = order
        self.rows = device(order)
        self.src = device(src)
        self.ptr, self.diag, self.col_rank = device(ptr), device(diag), device(rank[cols])
        self.tri_ptr = device(numpy.concatenate(([0], numpy.cumsum(numpy.bincount(tri_e, minlength=cols.size)))))
        self.tri_target, self.tri_source = device(tri_t), device(tri_f)
        upper_pos = numpy.flatnonzero(cols > order[row_r])
        self.lower_pos, self.upper_pos = device(e), device(upper_pos)
        self.lower_ptr = device(numpy.concatenate(([0], numpy.cumsum(lower_count))))
        self.upper_ptr = device(numpy.concatenate(([0], numpy.cumsum(numpy.diff(ptr) - lower_count - 1))))
        self.lower_cols, self.upper_cols = device(cols[e]), device(cols[upper_pos])
        self.nnzb = cols.size

    def factor(self, blocks):
        """Numeric factorization of new values on the same pattern."""
        xp = self.xp
        blocks = xp.asarray(blocks, dtype=numpy.float64)
        vals = xp.ascontiguousarray(blocks[self.src])
        dinv = xp.empty((self.num_rows, self.block_size, self.block_size))
        info = to_host(xp, self.kernels.factor(self, vals, dinv))
        failed = numpy.flatnonzero(info)
        if failed.size:  # the first row in the natural order
            r = failed[numpy.argmin(self.order[failed])]
            raise SingularBlockError(int(self.order[r]), int(info[r]) - 1)
        self.kernels.forget(self)
        self.dinv = dinv
        self.lower_vals = xp.ascontiguousarray(vals[self.lower_pos])
        self.upper_vals = xp.ascontiguousarray(vals[self.upper_pos])

    def apply(self, b, x):
        """x = (LU)^-1 b; flat arrays of num_rows * block_size entries (x may be b)."""
        self.kernels.solve(self, b, x, self.schedule)
        return x
