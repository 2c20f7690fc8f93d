"""SpMV of CSR matrices with long rows, a warp per row: for the restrictions
R = P^T of gpu_mats.amg, whose few coarse rows gather hundreds of entries
each (SELL gives a row one thread, which leaves those rows to a handful of
threads)."""


def spmv(indptr, indices, data, x, y):
    """y = A x for the CSR arrays of A (indptr int64, indices int32, data float64 or float32; x, y float64)."""
