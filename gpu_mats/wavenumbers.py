"""Which rank solves which wavenumbers of an extruded mesh's transform.

Each rank holds whole columns of the mesh (a partition of the
cross-section), so the FFT along the layers is its own. The 2D systems, one
per wavenumber, couple every column of the cross-section: an all-to-all
turns the ranks' columns x all wavenumbers into all columns x each rank's
wavenumbers and back (the transpose of a pencil-decomposed FFT). Every rank
then solves the 2D systems of its own contiguous range of wavenumbers on the
whole cross-section. Device arrays go GPU to GPU by NCCL, or through host
memory by MPI, which need not be CUDA-aware (the transport: as halos'
choice, gpu_mats.exchange).
"""

import numpy
from mpi4py import MPI

from .backend import to_host
from .exchange import nccl_chosen, nccl_communicator, nccl_messages


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
    ranks; ``transport`` (exchange.TRANSPORTS) as nccl_chosen takes it."""

    def __init__(self, comm, columns, wavenumbers, xp, transport="auto", notify=print):
        self.comm, self.xp = comm, xp
        self.columns = numpy.asarray(columns)
        self.split = spectrum_split(wavenumbers, comm.Get_size())
        self.mine = self.split[comm.Get_rank()]
        self.widths = numpy.array([b - a for a, b in self.split])
        self.wavenumbers = wavenumbers
        self.nccl = nccl_communicator(comm) if nccl_chosen(transport, xp, "spectra", notify) else None
        self.memory = xp if self.nccl is not None else numpy  # where the messages are packed

    def to_wavenumbers(self, field):
        """(own columns, all wavenumbers) -> (every column, own wavenumbers), complex."""
        xp = self.memory
        field = to_host(self.xp, field) if xp is numpy else field
        send = xp.concatenate([field[:, a:b].ravel() for a, b in self.split])
        width = self.widths[self.comm.Get_rank()]
        block = xp.empty((self.columns.sum(), width), dtype=numpy.complex128)
        self._exchange(send, field.shape[0] * self.widths, block, self.columns * width)
        return self.xp.asarray(block)

    def to_columns(self, block):
        """(every column, own wavenumbers) -> (own columns, all wavenumbers), complex."""
        xp = self.memory
        block = xp.ascontiguousarray(to_host(self.xp, block) if xp is numpy else block)
        own = self.columns[self.comm.Get_rank()]
        received = xp.empty(own * self.wavenumbers, dtype=numpy.complex128)
        self._exchange(block.ravel(), self.columns * block.shape[1], received, own * self.widths)
        field = xp.empty((own, self.wavenumbers), dtype=numpy.complex128)
        start = 0
        for (a, b), width in zip(self.split, self.widths):
            field[:, a:b] = received[start:start + own * width].reshape(own, width)
            start += own * width
        return self.xp.asarray(field)

    def _exchange(self, send, send_counts, receive, receive_counts):
        """Segment p of ``send`` (send_counts[p] complex values) to rank p, rank p's into segment p of
        ``receive``."""
        if self.nccl is None:
            def spec(buffer, counts):
                counts = numpy.asarray(counts, dtype=numpy.int64)
                return [buffer, counts, numpy.concatenate(([0], numpy.cumsum(counts)[:-1])), MPI.C_DOUBLE_COMPLEX]

            self.comm.Alltoallv(spec(send, send_counts), spec(receive.reshape(-1), receive_counts))
            return
        from cupy.cuda import get_current_stream

        receive, rank = receive.reshape(-1), self.comm.Get_rank()
        sent, got = (numpy.concatenate(([0], numpy.cumsum(counts))) for counts in (send_counts, receive_counts))
        receive[got[rank]:got[rank + 1]] = send[sent[rank]:sent[rank + 1]]  # its own share, not a message

        def segments(offsets, counts):  # in float64 values: a complex value is two
            return [(p, 2 * int(offsets[p]), 2 * int(offsets[p] + counts[p]))
                    for p in range(self.comm.Get_size()) if p != rank and counts[p]]

        nccl_messages(self.nccl, send, segments(sent, send_counts), receive, segments(got, receive_counts),
                      get_current_stream())

    def total(self, value):
        return self.comm.allreduce(value, op=MPI.SUM)
