"""What the hierarchy refuses, with where and why: a nonsymmetric matrix,
a diagonal that is not positive; and whether new values keep a pattern."""

from ..backend import array_module


SYMMETRY_TOLERANCE = 1e-10  # ||A - A^T||_F / ||A||_F: rounding, not a nonsymmetric discretization


class AMGError(ValueError):
    """A matrix the aggregation multigrid cannot take, with where it failed."""


def check_symmetric(matrix):
    """An AMGError with the measured asymmetry ||A - A^T||_F / ||A||_F where it is above SYMMETRY_TOLERANCE:
    the V-cycle and the Galerkin products R A P with R = P^T are made for symmetric matrices."""
    xp = array_module(matrix.data)
    size = float(xp.linalg.norm(matrix.data))
    if size == 0.0:
        return
    refuse_asymmetry(float(xp.linalg.norm((matrix - matrix.T).tocsr().data)) / size)


def refuse_asymmetry(measured):
    """An AMGError where the ``measured`` ||A - A^T||_F / ||A||_F is above SYMMETRY_TOLERANCE."""
    if measured > SYMMETRY_TOLERANCE:
        raise AMGError(f"gpuamg needs a symmetric matrix: ||A - A^T||_F / ||A||_F = {measured:.3g} (at most "
                       f"{SYMMETRY_TOLERANCE:g}); use a preconditioner for nonsymmetric matrices (gamg under gmres, "
                       "wbilu, ainv spai)")


def positive_diagonal(matrix, level):
    """The diagonal of ``matrix``, or an AMGError naming the first row where it is not positive."""
    d = matrix.diagonal()
    bad = d <= 0
    if bool(bad.any()):
        row = int(array_module(d).flatnonzero(bad)[0])
        raise AMGError(f"gpuamg needs a positive diagonal: row {row} of level {level} has {float(d[row]):.3g}")
    return d


def same_pattern(sell, indptr, indices):
    """Whether the CSR pattern (``indptr``, ``indices``) is the one ``sell`` was built from."""
    return (sell.nnz == indices.size and sell.indptr.size == indptr.size and bool((sell.indptr == indptr).all())
            and bool((sell.cols[sell.val_map] == indices).all()))
