"""Aggregates of a level's rows on its strength graph (|a_ij| >= threshold
sqrt(a_ii a_jj)): around the roots of a distance-2 maximal independent set
(``mis2_aggregates``), or by rounds of pairwise matching
(``pairwise_aggregates``, Notay, "An aggregation-based algebraic multigrid
method", ETNA 37, 2010)."""

from ..backend import array_module, hashed_bits, scatter_max, scatter_min
from ..sell import entry_rows
from .prolongation import piecewise_constant


# Strength threshold: 0.02 keeps the distance-2 sets of the Galerkin levels (long stencils of weak
# entries) from coarsening 70-fold, which grew the iterations with the levels (BENCHMARKS.md).
THRESHOLD = 0.02
AGGREGATIONS = ("mis2", "pairwise")


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


def matched_matrix(xp, matrix, aggregates, count):
    """T^T A T for the piecewise-constant T of ``aggregates``: the matrix the next matching runs on."""
    T = piecewise_constant(xp, aggregates, count)
    return (T.T.tocsr() @ matrix @ T).tocsr()
