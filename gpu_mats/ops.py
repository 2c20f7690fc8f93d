"""Operations on SELL matrices: checks arguments once, then runs the CUDA or the
NumPy kernel according to where the matrix lives."""

import numpy

from .kernels import family
from .sell import SellMatrix


def _check_block(A, name, v, length):
    """A float64 vector (1-D) or block of vectors (2-D, each row contiguous) in A's memory."""
    if type(v) is not type(A.vals):
        raise TypeError(f"{name} is a {type(v).__module__}.{type(v).__name__} but the matrix lives in "
                        f"{type(A.vals).__module__} memory: move the vector, or the matrix, so both are on the same device")
    if v.dtype != numpy.float64:
        raise TypeError(f"{name} must be float64, got {v.dtype}")
    if v.ndim not in (1, 2) or v.shape[-1] != length or (length > 1 and v.strides[-1] != 8):
        raise ValueError(f"{name} must hold contiguous vectors of length {length}, got shape {v.shape}")
    if A.xp is not numpy and v.data.device_id != A.vals.data.device_id:
        raise ValueError(f"{name} is on GPU {v.data.device_id} but the matrix is on GPU {A.vals.data.device_id}")


def spmv(A: SellMatrix, x, y, *, alpha=1.0, beta=0.0, z=None):
    """y = alpha A x + beta z (z defaults to y; beta = 0 never reads it).

    x, y, z are vectors, or (k, n) blocks of k vectors that share one pass over
    the matrix (the generalized SpMV of Oyarzún 2015, section 1.2).
    """
    z = y if z is None else z
    check_product(A, x, y, z)
    family("sell", A.xp).spmv(A, x, y, z, alpha, beta)
    return y


def check_product(A: SellMatrix, x, y, z):
    """The checks of ``spmv``: x, y, z float64 vectors or blocks of A's sizes,
    in A's memory. A caller whose arrays are checked already (PETSc vectors of
    the matrix's sizes) runs the family's kernel directly."""
    nrows, ncols = A.shape
    _check_block(A, "x", x, ncols)
    _check_block(A, "y", y, nrows)
    _check_block(A, "z", z, nrows)
    if not (x.ndim == y.ndim == z.ndim and x.shape[:-1] == y.shape[:-1] == z.shape[:-1]):
        raise ValueError(f"x, y, z must hold the same number of vectors, got shapes {x.shape}, {y.shape}, {z.shape}")


def diagonal(A: SellMatrix, out=None):
    """The main diagonal as a vector of one entry per row (0 past min(rows, cols))."""
    if out is None:
        out = A.xp.empty(A.shape[0], dtype=numpy.float64)
    _check_block(A, "out", out, A.shape[0])
    if out.ndim != 1:
        raise ValueError(f"out must be a vector, got shape {out.shape}")
    family("sell", A.xp).diagonal(A, out)
    return out


def forget(A: SellMatrix):
    """Drop what the CUDA kernels cached about A (launch arguments hold its
    arrays): needed after A's arrays are replaced."""
    family("sell", A.xp).forget(A)
