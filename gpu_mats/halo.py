"""Halo plans: a rank's rows split into the block on the columns it owns and the
block on the columns other ranks own (its halo), numbered compactly.

y = A_diag x_owned + A_offd x_halo is then two local SpMVs once the halo values
have arrived (the MPIAIJ layout; Oyarzún 2015, section 1.4).
"""

from dataclasses import dataclass

from .backend import array_module
from .sell import entry_rows


@dataclass(eq=False)
class RowSplit:
    diag: tuple  # CSR (indptr, indices, data), columns local to the owned range
    offd: tuple  # CSR on halo columns 0..len(halo)-1
    halo: object  # global column of each halo column, ascending
    owned: object  # per CSR entry: True if its column is owned

    def split_values(self, data):
        """Values of the original CSR (same pattern) as (diag values, offd values)."""
        return data[self.owned], data[~self.owned]


def split_rows(indptr, indices, data, col_start, col_end):
    """Split local rows with global column indices at the owned range [col_start, col_end),
    in the array module of ``data`` (NumPy or CuPy)."""
    xp = array_module(data)
    indptr = xp.asarray(indptr, dtype=xp.int64)
    indices = xp.asarray(indices, dtype=xp.int64)
    nrows = indptr.size - 1
    owned = (indices >= col_start) & (indices < col_end)
    entry_row = entry_rows(xp, indptr)
    halo = xp.unique(indices[~owned])

    def csr(mask, cols):
        counts = xp.bincount(entry_row[mask], minlength=nrows)
        return xp.concatenate((xp.zeros(1, dtype=xp.int64), xp.cumsum(counts))), cols, data[mask]

    return RowSplit(diag=csr(owned, indices[owned] - col_start),
                    offd=csr(~owned, xp.searchsorted(halo, indices[~owned])),
                    halo=halo, owned=owned)
