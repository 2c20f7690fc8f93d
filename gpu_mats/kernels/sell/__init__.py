"""SELL-C-sigma products: ``y = alpha A x + beta z`` and the diagonal, on a
gpu_mats.sell.SellMatrix whose arrays are in the family's memory."""


def spmv(A, x, y, z, alpha, beta):
    """Y = alpha A X + beta Z; 1-D vectors, or 2-D (k, n) blocks of k vectors
    sharing one pass over A. Arguments are checked by the caller (gpu_mats.ops)."""


def chebyshev_step(A, d, d_next, r, z, scaling, x, a, c):
    """One smoothing step fused into the product: r = z - A d, then
    d_next = a d + c scaling r and x += d_next, row by row (z may be r; d_next
    must not be d, which other rows read)."""


def chebyshev_first(A, b, scaling, d_next, r, x, c0, a, c):
    """The first two smoothing steps from x = 0 in one pass: d0 = c0 scaling b
    (in the vectors' type); r = b - A d0; d_next = a d0 + c scaling r;
    x = d0 + d_next: chebyshev_start then chebyshev_step, bit for bit."""


def diagonal(A, d):
    """d = the main diagonal of A, one entry per row (0 past min(rows, cols))."""


def forget(A):
    """Drop what was cached about A's arrays (they were replaced)."""
