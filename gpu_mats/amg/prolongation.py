"""The prolongation from a level's aggregates: piecewise constant (it
carries the constant null space of an all-Neumann matrix to every level),
smoothed by one damped Jacobi step (Vanek, Mandel and Brezina, "Algebraic
multigrid by smoothed aggregation", Computing 56, 1996)."""

from ..backend import sparse_module


def piecewise_constant(xp, aggregates, count):
    """The tentative prolongation: a 1 in each row at its aggregate's column."""
    n = aggregates.size
    return sparse_module(xp).csr_matrix((xp.ones(n), aggregates, xp.arange(n + 1, dtype=xp.int64)), shape=(n, count))


def smoothed_prolongation(xp, matrix, d, aggregates, count, rho):
    """Tentative P (piecewise constant), smoothed by (I - omega D^-1 A) with
    omega = 4 / (3 rho), rho the Lanczos estimate of rho(D^-1 A); ``d``: the
    matrix's (positive) diagonal. Gershgorin's bound, used before, is 2.04
    where rho is 1.24 on the second level of a 3D Laplacian: the damping it
    gave cost 2 of 12 iterations at 96^3."""
    T = piecewise_constant(xp, aggregates, count)
    scaled = sparse_module(xp).diags(1.0 / d) @ matrix
    P = (T - (4.0 / (3.0 * rho)) * (scaled @ T)).tocsr()
    P.sort_indices()
    return P
