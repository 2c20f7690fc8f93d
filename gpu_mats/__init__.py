"""Sparse formats and kernels for the GPU, with NumPy twins; no PETSc here."""

from .backend import BACKENDS, BackendError, array_module, resolve
from .ops import check_product, diagonal, forget, spmv
from .sell import DEFAULT_SIGMA, DEFAULT_SLICE_HEIGHT, VALUE_DTYPES, SellMatrix

__all__ = ["BACKENDS", "BackendError", "DEFAULT_SIGMA", "DEFAULT_SLICE_HEIGHT", "SellMatrix",
           "VALUE_DTYPES", "array_module", "check_product", "diagonal", "forget", "resolve", "spmv"]
