"""Products of a box's constant-coefficient operator (gpu_mats.stencil's
StencilMatrix), computed from the grid instead of read from a matrix:
y = alpha A x + beta z and the fused smoothing step; and of its grid
transfers (TensorTransfer), from per-axis tables. Vectors are float64, or
all float32 (a float32 cycle); the sums are computed in float64 either way."""


def spmv(S, x, y, z, alpha, beta):
    """y = alpha S x + beta z for vectors in S's memory (beta = 0 never reads z; z may be y)."""


def chebyshev_step(S, d, d_next, r, z, scaling, x, a, c):
    """One smoothing step fused into the product: r = z - S d, then
    d_next = a d + c scaling r and x += d_next (z may be r; d_next must not
    be d, which neighbouring cells read)."""


def chebyshev_first(S, b, scaling, d_next, r, x, c0, a, c):
    """The first two smoothing steps from x = 0 in one pass: d0 = c0 scaling b
    (in the vectors' type); r = b - S d0; d_next = a d0 + c scaling r;
    x = d0 + d_next: chebyshev_start then chebyshev_step, bit for bit."""


def transfer(T, x, y, z, alpha, beta):
    """y = alpha T x + beta z for a TensorTransfer T (beta = 0 never reads z; z may be y)."""
