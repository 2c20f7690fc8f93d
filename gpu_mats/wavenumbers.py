"""Which rank solves which wavenumbers of an extruded mesh's transform.

Each rank holds whole columns of the mesh (a partition of the
cross-section), so the FFT along the layers is its own. The 2D systems, one
per wavenumber, couple every column of the cross-section: an all-to-all
turns the ranks' columns x all wavenumbers into all columns x each rank's
wavenumbers and back (the transpose of a pencil-decomposed FFT). Every rank
then solves the 2D systems of its own contiguous range of wavenumbers on the
whole cross-section. MPI here need not be CUDA-aware: device arrays go
through host memory.
"""

import numpy
from mpi4py import MPI

from .backend import to_host


def spectrum_split(wavenumbers, ranks):
    """(first, stop) of each rank's wavenumbers: contiguous, as even as can be (where there are more ranks
    than wavenumbers, the last ranks get none)."""
    bounds = numpy.concatenate(([0], numpy.cumsum([wavenumbers // ranks + (r < wavenumbers % ranks)
                                                   for r in range(ranks)])))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


class LocalSpectrum:
    """One rank: its columns are the whole cross-section and its wavenumbers all of them."""

    def __init__(self, wavenumbers):
        self.mine = (0, wavenumbers)

    def to_wavenumbers(self, field):
        return field

    def to_columns(self, block):
        return block

    def total(self, value):
        return value


class SpectrumTranspose:
    """The all-to-all between the ranks' columns (``columns[r]`` each, numbered rank after rank) and their
    wavenumbers (spectrum_split); ``mine``: this rank's (first, stop); ``total``: a float summed over the
    ranks."""

    def __init__(self, comm, columns, wavenumbers, xp):
        self.comm, self.xp = comm, xp
        self.columns = numpy.asarray(columns)
        self.split = spectrum_split(wavenumbers, comm.Get_size())
        self.mine = self.split[comm.Get_rank()]
        self.widths = numpy.array([b - a for a, b in self.split])
        self.wavenumbers = wavenumbers

    def to_wavenumbers(self, field):
        """(own columns, all wavenumbers) -> (every column, own wavenumbers), complex."""
        field = to_host(self.xp, field)
        send = numpy.concatenate([field[:, a:b].ravel() for a, b in self.split])
        width = self.widths[self.comm.Get_rank()]
        block = numpy.empty((self.columns.sum(), width), dtype=numpy.complex128)
        self._exchange(send, field.shape[0] * self.widths, block, self.columns * width)
        return self.xp.asarray(block)

    def to_columns(self, block):
        """(every column, own wavenumbers) -> (own columns, all wavenumbers), complex."""
        block = numpy.ascontiguousarray(to_host(self.xp, block))
        own = self.columns[self.comm.Get_rank()]
        received = numpy.empty(own * self.wavenumbers, dtype=numpy.complex128)
        self._exchange(block.ravel(), self.columns * block.shape[1], received, own * self.widths)
        field = numpy.empty((own, self.wavenumbers), dtype=numpy.complex128)
        start = 0
        for (a, b), width in zip(self.split, self.widths):
            field[:, a:b] = received[start:start + own * width].reshape(own, width)
            start += own * width
        return self.xp.asarray(field)

    def _exchange(self, send, send_counts, receive, receive_counts):
        def spec(buffer, counts):
            counts = numpy.asarray(counts, dtype=numpy.int64)
            return [buffer, counts, numpy.concatenate(([0], numpy.cumsum(counts)[:-1])), MPI.C_DOUBLE_COMPLEX]

        self.comm.Alltoallv(spec(send, send_counts), spec(receive.reshape(-1), receive_counts))

    def total(self, value):
        return self.comm.allreduce(value, op=MPI.SUM)
