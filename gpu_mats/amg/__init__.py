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

One module per stage, as pyamg's aggregation package has them:
aggregation (strength and aggregates), prolongation, galerkin (the coarse
operators and their sparsification), cycle (levels, smoothing, coarsest
solve, the V- and K-cycle), hierarchies (AggregationAMG,
GeometricMultigrid), checks (what is refused), settings (AMGSettings, what
a hierarchy is built with). The distributed hierarchy is
gpu_mats.distributed_amg.
"""

from .aggregation import AGGREGATIONS, THRESHOLD, mis2_aggregates, pairwise_aggregates
from .checks import AMGError, refuse_asymmetry
from .cycle import CYCLES, DEGREE, DENSE_LIMIT, PHASES, SMOOTHERS, Level, Multigrid, WarpRows, coarsest_inverse
from .galerkin import SPARSIFY, galerkin_product, sparsified
from .hierarchies import AggregationAMG, GeometricMultigrid
from .settings import AMGSettings

__all__ = ["AGGREGATIONS", "CYCLES", "DEGREE", "DENSE_LIMIT", "PHASES", "SMOOTHERS", "SPARSIFY", "THRESHOLD",
           "AMGError", "AMGSettings", "AggregationAMG", "GeometricMultigrid", "Level", "Multigrid", "WarpRows",
           "coarsest_inverse", "galerkin_product", "mis2_aggregates", "pairwise_aggregates", "refuse_asymmetry",
           "sparsified"]
