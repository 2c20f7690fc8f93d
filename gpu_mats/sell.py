"""SELL-C-sigma, the sliced ELLPACK format of Oyarzún 2015
(section 1.3; docs/references.md).

Rows are cut into slices of C rows; each slice is padded to its longest row
and stored column-major, so entry k of the C rows of a slice is contiguous and
one GPU thread per row gives coalesced loads of values and columns. Sorting
rows by length inside windows of sigma rows lowers the padding; sigma = 1 keeps
the natural order, which for stencil matrices keeps the writes of y and the
reads of x in order. Callers always see rows and columns in their original
order: the kernels write row ``row_of[p]`` for stored row ``p``.

The construction is array code that runs on NumPy or CuPy alike, so a matrix is
built where its data lives.
"""

from dataclasses import dataclass, field

import numpy

from .backend import array_module
from .kernels import family

INT32_MAX = 2**31 - 1
DEFAULT_SLICE_HEIGHT = 32
# Chosen from benchmarks/spmv.py (BENCHMARKS.md, "Slice height and sort window"): on the
# stencil and tetrahedral matrices sorting gained nothing measurable.
DEFAULT_SIGMA = 1
VALUE_DTYPES = {"float64": numpy.float64, "float32": numpy.float32}


@dataclass(eq=False)
class SellMatrix:
    """A sparse matrix in SELL-C-sigma, arrays in one array module.

    ``slice_ptr[s]`` is the offset of slice s in ``cols``/``vals``; its width
    is ``(slice_ptr[s+1] - slice_ptr[s]) / C``. Padding entries have value 0
    and repeat the last column of their row (column 0 for an empty row), so
    every load is of a valid column. ``indptr`` and ``val_map`` (the slot of
    each CSR entry) keep the link to the CSR the matrix came from, for value
    refreshes and for building the transpose.
    """

    shape: tuple
    slice_height: int
    sigma: int
    slice_ptr: object
    cols: object
    vals: object
    row_of: object  # stored row -> original row, None for the identity
    indptr: object
    val_map: object
    xp: object = field(default=None, repr=False)  # numpy or cupy, where the arrays live
    _slot_rows: object = field(default=None, repr=False)

    def __post_init__(self):
        self.xp = array_module(self.vals)

    @property
    def nnz(self):
        return int(self.val_map.size)

    @property
    def nslots(self):
        return int(self.vals.size)

    @property
    def nslices(self):
        return int(self.slice_ptr.size) - 1

    @property
    def value_dtype(self):
        return self.vals.dtype

    @property
    def padding_ratio(self):
        """Stored entries over true nonzeros (1.0 means no padding)."""
        return self.nslots / self.nnz if self.nnz else 1.0

    @property
    def nbytes(self):
        """Bytes of the arrays the SpMV kernel reads."""
        arrays = (self.slice_ptr, self.cols, self.vals) + ((self.row_of,) if self.row_of is not None else ())
        return int(sum(a.nbytes for a in arrays))

    @classmethod
    def from_csr(cls, indptr, indices, data, shape, *, slice_height=DEFAULT_SLICE_HEIGHT,
                 sigma=DEFAULT_SIGMA, value_dtype=numpy.float64, xp=None):
        """Build from CSR arrays; ``xp`` (numpy or cupy) says where, default where ``data`` is."""
        xp = xp or array_module(data)
        nrows, ncols = (int(s) for s in shape)
        _check_sizes(nrows, ncols, slice_height, sigma)
        indptr = xp.asarray(indptr, dtype=xp.int64)
        indices = xp.asarray(indices)
        data = xp.asarray(data)
        nnz = _check_csr(xp, indptr, indices, data, nrows, ncols)

        C = slice_height
        lengths = indptr[1:] - indptr[:-1]
        order = _sort_in_windows(xp, lengths, sigma)
        nslices = -(-nrows // C)
        padded = xp.zeros(nslices * C, dtype=xp.int64)
        padded[:nrows] = lengths if order is None else lengths[order]
        widths = padded.reshape(nslices, C).max(axis=1) if nslices else padded[:0]
        slice_ptr = xp.zeros(nslices + 1, dtype=xp.int64)
        xp.cumsum(widths * C, out=slice_ptr[1:])

        # Slot of entry 0 of each original row, then of every CSR entry.
        stored = xp.arange(nrows, dtype=xp.int64)
        if order is not None:
            stored[order] = xp.arange(nrows, dtype=xp.int64)
        first_slot = slice_ptr[stored // C] + stored % C
        entry = xp.arange(nnz, dtype=xp.int64)
        entry_row = entry_rows(xp, indptr)
        val_map = first_slot[entry_row] + (entry - indptr[entry_row]) * C

        nslots = int(slice_ptr[-1])
        slot_rows = _slot_rows(xp, slice_ptr, C, nslots)
        last_col = xp.zeros(nslices * C, dtype=xp.int32)
        nonempty = lengths > 0
        row_last = xp.where(nonempty, indices[xp.maximum(indptr[1:] - 1, 0)] if nnz else 0, 0)
        last_col[:nrows] = row_last if order is None else row_last[order]
        cols = last_col[slot_rows]
        cols[val_map] = indices.astype(xp.int32)
        vals = xp.zeros(nslots, dtype=value_dtype)
        vals[val_map] = data

        row_of = None if order is None else order.astype(xp.int32)
        return cls((nrows, ncols), C, sigma, slice_ptr, cols, vals, row_of, indptr, val_map,
                   _slot_rows=slot_rows if xp is numpy else None)

    def slot_rows(self):
        """Stored row of every slot (used by the NumPy kernels)."""
        if self._slot_rows is None:
            self._slot_rows = _slot_rows(self.xp, self.slice_ptr, self.slice_height, self.nslots)
        return self._slot_rows

    def multiply(self, x, y, alpha=1.0, beta=0.0, z=None):
        """y = alpha A x + beta z (z defaults to y), unchecked: the level
        operators' one interface (gpu_mats.ops.spmv checks its arguments)."""
        family("sell", self.xp).spmv(self, x, y, y if z is None else z, alpha, beta)

    def chebyshev_step(self, d, d_next, r, z, scaling, x, a, c):
        """r = z - A d; d_next = a d + c scaling r; x += d_next, in one pass."""
        family("sell", self.xp).chebyshev_step(self, d, d_next, r, z, scaling, x, a, c)

    def chebyshev_first(self, b, scaling, d_next, r, x, c0, a, c):
        """The first two smoothing steps from x = 0 in one pass (d0 = c0 scaling b; r = b - A d0;
        d_next = a d0 + c scaling r; x = d0 + d_next)."""
        family("sell", self.xp).chebyshev_first(self, b, scaling, d_next, r, x, c0, a, c)

    def refresh_values(self, data):
        """New values on the same nonzero pattern, in the CSR order the matrix was built from."""
        data = self.xp.asarray(data)
        if data.shape != (self.nnz,):
            raise ValueError(f"value refresh needs {self.nnz} values in CSR order, got shape {data.shape}")
        self.vals[self.val_map] = data

    def to_csr(self):
        """The CSR arrays (indptr, indices, data) in the matrix's array module."""
        return self.indptr, self.cols[self.val_map], self.vals[self.val_map]

    def transpose(self):
        """A^T in SELL, with the same slice height, window and value type."""
        xp = self.xp
        nrows, ncols = self.shape
        indptr, indices, data = self.to_csr()
        rows = entry_rows(xp, indptr)
        by_col = _stable_argsort(xp, indices)
        t_indptr = xp.zeros(ncols + 1, dtype=xp.int64)
        xp.cumsum(xp.bincount(indices, minlength=ncols), out=t_indptr[1:])
        return SellMatrix.from_csr(t_indptr, rows[by_col], data[by_col], (ncols, nrows),
                                   slice_height=self.slice_height, sigma=self.sigma,
                                   value_dtype=self.value_dtype, xp=xp)


def entry_rows(xp, indptr):
    """The row of every entry of a CSR matrix (empty rows included correctly)."""
    return xp.searchsorted(indptr, xp.arange(int(indptr[-1]), dtype=xp.int64), side="right") - 1


def _check_sizes(nrows, ncols, slice_height, sigma):
    if nrows < 0 or ncols < 0:
        raise ValueError(f"matrix shape must be non-negative, got {nrows} x {ncols}")
    if nrows > INT32_MAX or ncols > INT32_MAX:
        raise ValueError(
            f"a {nrows} x {ncols} pattern is too large for SELL's int32 row and column indices "
            f"(at most {INT32_MAX}); split the matrix across more MPI ranks")
    if slice_height < 1 or sigma < 1:
        raise ValueError(f"slice height C and sort window sigma must be >= 1, got C={slice_height}, sigma={sigma}")


def _check_csr(xp, indptr, indices, data, nrows, ncols):
    if indptr.shape != (nrows + 1,):
        raise ValueError(f"indptr must have {nrows + 1} entries for {nrows} rows, got {indptr.shape[0]}")
    nnz = int(indptr[-1])
    if int(indptr[0]) != 0 or indices.shape != (nnz,) or data.shape != (nnz,):
        raise ValueError(f"inconsistent CSR: indptr[0]={int(indptr[0])}, indptr[-1]={nnz}, "
                         f"{indices.shape[0]} column indices, {data.shape[0]} values")
    if nrows and bool((indptr[1:] < indptr[:-1]).any()):
        raise ValueError("indptr must be non-decreasing")
    if nnz and (int(indices.min()) < 0 or int(indices.max()) >= ncols):
        raise ValueError(f"column indices must lie in [0, {ncols}), got [{int(indices.min())}, {int(indices.max())}]")
    return nnz


def _sort_in_windows(xp, lengths, sigma):
    """Row order putting longer rows first inside each window of sigma rows; None for sigma = 1."""
    if sigma == 1 or lengths.size == 0:
        return None
    longest = int(lengths.max())
    window = xp.arange(lengths.size, dtype=xp.int64) // sigma
    key = window * (longest + 1) + (longest - lengths)
    return _stable_argsort(xp, key)


def _stable_argsort(xp, keys):
    # CuPy's argsort is always stable and takes no ``kind``; NumPy must be asked.
    return xp.argsort(keys, kind="stable") if xp is numpy else xp.argsort(keys)


def _slot_rows(xp, slice_ptr, C, nslots):
    slot = xp.arange(nslots, dtype=xp.int64)
    s = xp.searchsorted(slice_ptr[1:], slot, side="right")
    return s * C + (slot - slice_ptr[s]) % C
