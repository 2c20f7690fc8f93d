"""Halo exchanges between MPI ranks for the split products of gpu_mats.halo.

A HaloPlan says which owned entries each rank sends to which neighbour and
where the entries it receives land in its halo array (halo columns are sorted
by global index, so each owner's entries are one contiguous segment). Two
transports carry it:

* MpiTransport: mpi4py point-to-point messages on host arrays; device arrays
  are staged through host memory (MPI here need not be CUDA-aware).
* NcclTransport: NCCL send/recv between GPUs on a stream of its own. The
  gather, the messages and the caller's local product overlap; nothing waits
  on the host, so a CUDA graph can capture a whole exchange.

Forward: halo = x[plan rows of the owners]. Reverse (transposed products):
each halo entry is added back into its owner's row.

Sums over the ranks (a Krylov method's dot products) take the same two ways:
``summed_over`` gives MpiSum (through host memory) or NcclSum (an NCCL
all-reduce on the device, which a CUDA graph can hold).
"""

from dataclasses import dataclass

import numpy

from .backend import to_host

TRANSPORTS = ("auto", "nccl", "mpi")


@dataclass(eq=False)
class HaloPlan:
    send_rows: numpy.ndarray  # owned rows (local numbers) to send, grouped by destination
    send: list  # (rank, start, stop) segments of send_rows
    recv: list  # (rank, start, stop) segments of the halo array

    @property
    def nsend(self):
        return self.send_rows.size

    @property
    def nrecv(self):
        return self.recv[-1][2] if self.recv else 0


def halo_plan(halo, col_starts, comm):
    """The plan for halo columns ``halo`` (global, ascending) when rank p owns the
    columns col_starts[p] .. col_starts[p + 1] - 1; collective over ``comm`` (mpi4py)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    owners = numpy.searchsorted(col_starts, halo, side="right") - 1
    wanted = [halo[owners == p] for p in range(size)]
    asked = comm.alltoall(wanted)  # what every rank needs from this one
    recv, start = [], 0
    for p in range(size):
        if wanted[p].size:
            recv.append((p, start, start + wanted[p].size))
            start += wanted[p].size
    send, rows, start = [], [], 0
    for p in range(size):
        if asked[p].size:
            send.append((p, start, start + asked[p].size))
            rows.append(asked[p] - col_starts[rank])
            start += asked[p].size
    send_rows = numpy.concatenate(rows).astype(numpy.int64) if rows else numpy.zeros(0, dtype=numpy.int64)
    return HaloPlan(send_rows=send_rows, send=send, recv=recv)


def nccl_chosen(choice, xp, what, notify=print):
    """Whether ``what`` (halos, spectra) of arrays of ``xp`` travel by NCCL: ``choice`` nccl, mpi, or auto
    (NCCL for device arrays when CuPy has it, with a notice when it has not); host arrays go by MPI."""
    if choice not in TRANSPORTS:
        raise ValueError(f"unknown transport '{choice}' of the {what}: valid values are {', '.join(TRANSPORTS)}")
    if xp is numpy:
        if choice == "nccl":
            raise ValueError(f"the nccl transport of the {what} needs device arrays; host arrays use mpi")
        return False
    from cupy.cuda import nccl

    available = getattr(nccl, "available", False)
    if choice == "nccl" and not available:
        raise RuntimeError(f"the nccl transport of the {what} was asked for, but this CuPy has no NCCL")
    if choice == "auto" and not available:
        notify(f"CuPy has no NCCL: the {what} go through host memory and MPI\n")
    return available and choice != "mpi"


def transport(plan, comm, xp, choice="auto", notify=print):
    """The transport for ``plan`` on arrays of ``xp`` (``choice``: nccl_chosen's)."""
    return NcclTransport(plan, comm) if nccl_chosen(choice, xp, "halos", notify) else MpiTransport(plan, comm, xp)


class MpiTransport:
    """Halo messages by MPI on host buffers (device arrays staged through them)."""

    FORWARD, REVERSE = 71, 72  # message tags

    def __init__(self, plan, comm, xp):
        self.plan, self.comm, self.xp = plan, comm, xp
        self._rows = xp.asarray(plan.send_rows)
        self._sent, self._received = numpy.empty(plan.nsend), numpy.empty(plan.nrecv)
        self._requests, self._halo = [], None

    def forward_begin(self, x, halo):
        if self.xp is numpy:
            numpy.take(x, self._rows, out=self._sent)
        else:
            self._sent[...] = to_host(self.xp, self.xp.take(x, self._rows))
        received = halo if self.xp is numpy else self._received
        self._requests = ([self.comm.Irecv(received[a:b], p, self.FORWARD) for p, a, b in self.plan.recv] +
                          [self.comm.Isend(self._sent[a:b], p, self.FORWARD) for p, a, b in self.plan.send])
        self._halo = halo

    def forward_end(self):
        _wait(self._requests)
        if self.xp is not numpy:
            self._halo.set(self._received)

    def reverse(self, halo, y):
        """y[owned rows] += the halo entries other ranks computed for them."""
        values = to_host(self.xp, halo)
        requests = ([self.comm.Irecv(self._sent[a:b], p, self.REVERSE) for p, a, b in self.plan.send] +
                    [self.comm.Isend(values[a:b], p, self.REVERSE) for p, a, b in self.plan.recv])
        _wait(requests)
        self.xp.add.at(y, self._rows, self.xp.asarray(self._sent))  # a row several neighbours read adds up


class NcclTransport:
    """Halo messages by NCCL between GPUs, on a stream of their own."""

    def __init__(self, plan, comm):
        import cupy

        self.plan, self.cupy = plan, cupy
        self.nccl = nccl_communicator(comm)
        self._rows = cupy.asarray(plan.send_rows)
        self._sent = cupy.empty(plan.nsend)
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def _messages(self, send_buffer, send, recv_buffer, recv):
        nccl_messages(self.nccl, send_buffer, send, recv_buffer, recv, self.stream)

    def _fork(self):
        self.stream.wait_event(self.cupy.cuda.get_current_stream().record())

    def _join(self):
        self.cupy.cuda.get_current_stream().wait_event(self.stream.record())

    def forward_begin(self, x, halo):
        """Starts after the work queued so far on the current stream; returns at once."""
        self._fork()
        with self.stream:
            self.cupy.take(x, self._rows, out=self._sent)
            self._messages(self._sent, self.plan.send, halo, self.plan.recv)

    def forward_end(self):
        """Work queued on the current stream from now on sees the halo."""
        self._join()

    def reverse(self, halo, y):
        self._fork()
        with self.stream:
            self._messages(halo, self.plan.recv, self._sent, self.plan.send)
        self._join()
        self.cupy.add.at(y, self._rows, self._sent)  # a row several neighbours read adds up


def nccl_messages(communicator, send_buffer, send, receive_buffer, receive, stream):
    """One NCCL group of messages on ``stream``: send_buffer[a:b] to rank p for
    each (p, a, b) of ``send``, rank p's into receive_buffer[a:b] for each of
    ``receive``; the buffers are float64 (complex ones are viewed as such)."""
    from cupy.cuda import nccl

    send_buffer, receive_buffer = (buffer.reshape(-1).view("float64") for buffer in (send_buffer, receive_buffer))
    nccl.groupStart()
    for p, a, b in send:
        communicator.send(send_buffer.data.ptr + 8 * a, b - a, nccl.NCCL_FLOAT64, p, stream.ptr)
    for p, a, b in receive:
        communicator.recv(receive_buffer.data.ptr + 8 * a, b - a, nccl.NCCL_FLOAT64, p, stream.ptr)
    nccl.groupEnd()


def summed_over(comm, xp, choice="auto", notify=print):
    """A callable that adds the other ranks' values to an array of sums in
    place, for arrays of ``xp`` (``choice``: nccl_chosen's)."""
    return NcclSum(comm) if nccl_chosen(choice, xp, "sums", notify) else MpiSum(comm, xp)


class MpiSum:
    """Sums over the ranks by MPI, through host memory: the host waits for the device."""

    on_device = False

    def __init__(self, comm, xp):
        self.comm, self.xp = comm, xp

    def __call__(self, sums):
        from mpi4py import MPI

        local = to_host(self.xp, sums)
        self.comm.Allreduce(MPI.IN_PLACE, local, op=MPI.SUM)
        sums[...] = self.xp.asarray(local)


class NcclSum:
    """Sums over the ranks by an NCCL all-reduce on the current stream: the
    host does not wait, and every rank gets the same bits, so that their
    iterations take the same decisions."""

    on_device = True

    def __init__(self, comm):
        self.nccl = nccl_communicator(comm)

    def __call__(self, sums):
        import cupy
        from cupy.cuda import nccl

        self.nccl.allReduce(sums.data.ptr, sums.data.ptr, sums.size, nccl.NCCL_FLOAT64, nccl.NCCL_SUM,
                            cupy.cuda.get_current_stream().ptr)


_communicators = {}


def nccl_communicator(comm):
    """One NCCL communicator per MPI communicator (created collectively on first use)."""
    from cupy.cuda import nccl

    key = comm.py2f()
    if key not in _communicators:
        uid = comm.bcast(nccl.get_unique_id() if comm.Get_rank() == 0 else None)
        _communicators[key] = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())
    return _communicators[key]


def _wait(requests):
    from mpi4py import MPI

    MPI.Request.Waitall(requests)
