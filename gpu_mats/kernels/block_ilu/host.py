"""The block ILU family on the host: NumPy twins of ``block_ilu.cu``, the
block ILU(0) factorization and sweeps vectorised across the rows of a level."""

import weakref

import numpy

from ...block_ilu import PIVOT_TOLERANCE, concatenated_ranges

_steps_of = weakref.WeakKeyDictionary()


def invert_blocks(a):
    """Inverses of the (m, n, n) blocks by Gauss-Jordan with partial pivoting,
    and per block 0, or 1 + the column of its first pivot below tolerance."""
    m, n = a.shape[:2]
    aug = numpy.concatenate([a, numpy.broadcast_to(numpy.eye(n), a.shape)], axis=2)
    scale = numpy.abs(a).reshape(m, -1).max(axis=1) if n else numpy.zeros(m)
    info = numpy.zeros(m, dtype=numpy.int32)
    blocks = numpy.arange(m)
    for c in range(n):
        p = c + numpy.argmax(numpy.abs(aug[:, c:, c]), axis=1)
        aug[blocks, c], aug[blocks, p] = aug[blocks, p], aug[blocks, c].copy()
        pivot = aug[:, c, c].copy()
        bad = ~(numpy.abs(pivot) > PIVOT_TOLERANCE * scale)
        info[bad & (info == 0)] = c + 1
        pivot[bad] = 1.0
        aug[:, c] /= pivot[:, None]
        factor = aug[:, :, c].copy()
        factor[:, c] = 0.0
        aug -= factor[:, :, None] * aug[:, None, c]
    return aug[:, :, n:], info


def _steps(f):
    """Per level, the batches of the factorization: the m-th lower block of
    every row of the level, with the updates that block makes."""
    if f in _steps_of:
        return _steps_of[f]
    lower = f.lower_pos
    row = numpy.repeat(numpy.arange(f.num_rows), numpy.diff(f.ptr))[lower]
    level = numpy.searchsorted(f.level_ptr, row, side="right") - 1
    m = lower - f.ptr[row]
    order = numpy.lexsort((m, level))
    lower, level, m = lower[order], level[order], m[order]
    steps = [[] for _ in range(f.num_levels)]
    bounds = numpy.flatnonzero(numpy.diff(level * (m.max() + 1 if m.size else 1) + m)) + 1
    for group in numpy.split(numpy.arange(lower.size), bounds):
        if group.size == 0:
            continue
        e = lower[group]
        counts = f.tri_ptr[e + 1] - f.tri_ptr[e]
        t = concatenated_ranges(f.tri_ptr[e], counts)
        steps[level[group[0]]].append((e, f.col_rank[e], numpy.repeat(e, counts), f.tri_target[t], f.tri_source[t]))
    _steps_of[f] = steps
    return steps


def factor(f, vals, dinv):
    """Factor ``vals`` (the blocks in level order) in place; dinv gets the
    inverted diagonal blocks. Returns invert_blocks' info per row."""
    info = numpy.zeros(f.num_rows, dtype=numpy.int32)
    for level, batches in enumerate(_steps(f)):
        for e, k, te, target, source in batches:
            vals[e] = vals[e] @ dinv[k]
            vals[target] -= vals[te] @ vals[source]
        r0, r1 = f.level_ptr[level], f.level_ptr[level + 1]
        dinv[r0:r1], info[r0:r1] = invert_blocks(vals[f.diag[r0:r1]])
    return info


def forget(f):
    """Nothing cached depends on the values."""


def _row_sums(products, ptr, r0, r1):
    """Sums of the products of rows r0..r1 (their entries ptr[r0] .. ptr[r1])."""
    starts = ptr[r0:r1] - ptr[r0]
    sums = numpy.zeros((r1 - r0, products.shape[1]))
    full = ptr[r0 + 1:r1 + 1] > ptr[r0:r1]
    if products.shape[0]:
        sums[full] = numpy.add.reduceat(products, starts[full], axis=0)
    return sums


def _sweep_level(f, r0, r1, ptr, cols, vals, x):
    e0, e1 = ptr[r0], ptr[r1]
    products = (vals[e0:e1] @ x[cols[e0:e1], :, None])[..., 0]
    return _row_sums(products, ptr, r0, r1)


def solve(f, b, x, schedule):
    """x = U^-1 L^-1 b level by level (the schedule is a GPU choice)."""
    bs = f.block_size
    b, x = b.reshape(-1, bs), x.reshape(-1, bs)
    for level in range(f.num_levels):
        r0, r1 = f.level_ptr[level], f.level_ptr[level + 1]
        rows = f.rows[r0:r1]
        x[rows] = b[rows] - _sweep_level(f, r0, r1, f.lower_ptr, f.lower_cols, f.lower_vals, x)
    for level in reversed(range(f.num_levels)):
        r0, r1 = f.level_ptr[level], f.level_ptr[level + 1]
        rows = f.rows[r0:r1]
        t = x[rows] - _sweep_level(f, r0, r1, f.upper_ptr, f.upper_cols, f.upper_vals, x)
        x[rows] = (f.dinv[r0:r1] @ t[..., None])[..., 0]
