"""The coarse operators: Galerkin products R A P over blocks of rows, their
sparsification (a non-Galerkin coarse level), and the test for a coarse
space that reached a singular matrix's null space."""

from ..backend import array_module, scatter_max, sparse_module
from ..sell import entry_rows


GALERKIN_PRODUCTS = 2**26  # multiply-adds of R A per block of a Galerkin product (galerkin_product)
# Coarse operators sparsified: off-diagonal entries below this fraction of the smaller of their row's and
# column's largest go to the diagonal; 0, the default, keeps the Galerkin products. Sparsifying speeds the
# near-isotropic Laplacians' cycles, but on stretched cells it costs iterations and can make a smoothed
# aggregation level indefinite (sparsified; BENCHMARKS.md, "Sparsified or Galerkin coarse levels").
SPARSIFY = 0.0


def galerkin_product(R, A, P, products=GALERKIN_PRODUCTS):
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
    A dropped negative a_ij subtracts the semidefinite |a_ij| (e_i - e_j)(e_i -
    e_j)^T: where rows are far from diagonally dominant (smoothed aggregation
    on stretched cells) the result can be indefinite. ``at_columns(v)``: the
    values of a per-row vector v at each entry's column (on one rank
    v[indices]; in parallel other ranks' values come by exchange)."""
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


# A coarse diagonal entry p^T A p below this fraction of p^T D p (D the finer
# level's diagonal) is rounding: the coarse vector p lies in the null space.
NULL_SPACE_DIAGONAL = 1e-10


def reached_null_space(coarse, P, d):
    """Whether a column p of P is in the null space of the finer matrix (a
    singular matrix coarsened until an aggregate holds a whole Neumann
    component): its Galerkin diagonal entry is rounding, which no smoother
    can divide by and a pseudo-inverse would scale by 1e14; the finer level
    is then the coarsest."""
    scale = P.multiply(P).T @ d
    return bool((coarse.diagonal() <= NULL_SPACE_DIAGONAL * scale).any())
