"""Products of CSR matrices with several threads per row on the GPU (4 to
32, from the mean row length): for the restrictions R = P^T of
gpu_mats.amg, whose few coarse rows gather hundreds of entries each, and for
the coarse levels of its cycle, too few rows to fill the GPU with SELL's
thread per row."""


def spmv(indptr, indices, data, x, y, z=None, alpha=1.0, beta=0.0):
    """y = alpha A x + beta z for the CSR arrays of A (indptr int64, indices int32, data float64 or float32;
    x, y, z float64; z defaults to y; beta = 0 never reads it)."""


def chebyshev_step(indptr, indices, data, d, d_next, r, z, scaling, x, a, c):
    """One smoothing step fused into the product: r = z - A d; d_next = a d + c scaling r; x += d_next
    (d_next is not d; z may be r)."""
