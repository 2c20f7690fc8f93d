"""Halo plans: a rank's rows split into the block on the columns it owns and the
block on the columns other ranks own (its halo), numbered compactly.

y = A_diag x_owned + A_offd x_halo is then two local SpMVs once the halo values
have arrived (the MPIAIJ layout; Oyarzún 2015, section 1.4).
"""

from dataclasses import dataclass

import numpy


@dataclass(eq=False)
class RowSplit:
    diag: tuple  # CSR (indptr, indices, data), columns local to the owned range
    offd: tuple  # CSR on halo columns 0..len(halo)-1
    halo: numpy.ndarray  # global column of each halo column, ascending
    owned: numpy.ndarray  # per CSR entry: True if its column is owned

    def split_values(self, data):
        """Values of the original CSR (same pattern) as (diag values, offd values)."""
        return data[self.owned], data[~self.owned]


def split_rows(indptr, indices, data, col_start, col_end):
    """Split local rows with global column indices at the owned range [col_start, col_end)."""
    indptr = numpy.asarray(indptr, dtype=numpy.int64)
    indices = numpy.asarray(indices, dtype=numpy.int64)
    nrows = indptr.size - 1
    owned = (indices >= col_start) & (indices < col_end)
    entry_row = numpy.repeat(numpy.arange(nrows), numpy.diff(indptr))
    halo = numpy.unique(indices[~owned])

    def csr(mask, cols):
        counts = numpy.bincount(entry_row[mask], minlength=nrows)
        return numpy.concatenate(([0], numpy.cumsum(counts))), cols, data[mask]

    return RowSplit(diag=csr(owned, indices[owned] - col_start),
                    offd=csr(~owned, numpy.searchsorted(halo, indices[~owned])),
                    halo=halo, owned=owned)
