"""Products of CSR matrices with several threads per row on the GPU (4 to
32, from the mean row length): for the restrictions R = P^T of
gpu_mats.amg, whose few coarse rows gather hundreds of entries each, for
the coarse levels of its cycle, too few rows to fill the GPU with SELL's
thread per row, and for a level's restricted residual (restrict_residual)
and its coarse correction with the first smoothing step after it
(residual_correction), each in one pass."""


def spmv(indptr, indices, data, x, y, z=None, alpha=1.0, beta=0.0):
    """y = alpha A x + beta z for the CSR arrays of A (indptr int64, indices int32, data float64 or float32;
    x, y, z float64; z defaults to y; beta = 0 never reads it)."""


def chebyshev_step(indptr, indices, data, d, d_next, r, z, scaling, x, a, c):
    """One smoothing step fused into the product: r = z - A d; d_next = a d + c scaling r; x += d_next
    (d_next is not d; z may be r)."""


def chebyshev_first(indptr, indices, data, b, scaling, d_next, r, x, c0, a, c):
    """The first two smoothing steps from x = 0 in one pass: d0 = c0 scaling b (in the vectors' type);
    r = b - A d0; d_next = a d0 + c scaling r; x = d0 + d_next (the multigrid family's chebyshev_start, then
    chebyshev_step, bit for bit)."""


def restrict_residual(indptr, indices, r_data, ra_data, b, y, bc):
    """bc = R b - R A y, from CSR arrays of one pattern with two sets of
    values, R's and (R A)'s (R's zero where R has no entry): a level's
    residual restricted in one pass, the fine residual b - A y never stored."""


def residual_correction(indptr, indices, p_data, ap_data, a_indptr, a_indices, a_data, xc, b, y, x, r, d, scaling, c):
    """The coarse correction and the first smoothing step after it in one
    pass, from CSR arrays of one pattern with P's and (A P)'s values (P's
    zero where P has no entry) and A's own CSR arrays: r = b - A y - A P xc
    (the residual of y + P xc); d = c scaling r; x = y + P xc + d (x is not y)."""
