"""Halo plans and their transports (gpu_mats.exchange): every rank owns a
contiguous range of a global vector and needs scattered entries of the others;
and sums over the ranks, the same two ways.

Marked mpi: they run under mpiexec -n 2 and -n 3 (and trivially on one rank).
The NCCL transport runs where a GPU and CuPy's NCCL are present.
"""

import numpy
import pytest
from mpi4py import MPI

from gpu_mats.exchange import halo_plan, summed_over, transport

from conftest import gpu_usable

COMM = MPI.COMM_WORLD


def layout(n_per_rank=7):
    size, rank = COMM.Get_size(), COMM.Get_rank()
    starts = numpy.arange(size + 1) * n_per_rank
    rng = numpy.random.default_rng(rank)
    others = numpy.setdiff1d(numpy.arange(starts[-1]), numpy.arange(starts[rank], starts[rank + 1]))
    halo = numpy.sort(rng.choice(others, size=min(5, others.size), replace=False)) if others.size else others
    return starts, halo


def array_module(choice):
    if choice == "mpi":
        return numpy
    if not gpu_usable():
        pytest.skip("needs a CUDA GPU and CuPy")
    import cupy
    from cupy.cuda import nccl

    if not getattr(nccl, "available", False):
        pytest.skip("this CuPy has no NCCL")
    cupy.cuda.Device(COMM.Get_rank() % cupy.cuda.runtime.getDeviceCount()).use()
    return cupy


@pytest.mark.mpi
@pytest.mark.parametrize("choice", ["mpi", "nccl"])
def test_forward_gathers_the_owners_values_and_reverse_adds_them_back(choice):
    xp = array_module(choice)
    starts, halo = layout()
    rank = COMM.Get_rank()
    plan = halo_plan(halo, starts, COMM)
    exchange = transport(plan, COMM, xp, choice)
    assert type(exchange).__name__ == {"mpi": "MpiTransport", "nccl": "NcclTransport"}[choice]
    global_x = numpy.arange(starts[-1], dtype=float) ** 1.5
    x = xp.asarray(global_x[starts[rank]:starts[rank + 1]])
    received = xp.full(halo.size, numpy.nan)
    exchange.forward_begin(x, received)
    exchange.forward_end()
    numpy.testing.assert_array_equal(xp.asnumpy(received) if xp is not numpy else received, global_x[halo])

    y = xp.zeros(x.size)
    exchange.reverse(xp.asarray(halo + 0.5), y)  # each rank adds (global index + 1/2) to the entries it reads
    wanted = COMM.allgather(halo)
    expected = numpy.zeros(starts[-1])
    for h in wanted:
        numpy.add.at(expected, h, h + 0.5)
    numpy.testing.assert_array_equal(xp.asnumpy(y) if xp is not numpy else y, expected[starts[rank]:starts[rank + 1]])


def test_unknown_or_impossible_transport_is_refused():
    plan = halo_plan(numpy.zeros(0, dtype=numpy.int64), numpy.array([0, 4]), MPI.COMM_SELF)
    with pytest.raises(ValueError, match="valid values are auto, nccl, mpi"):
        transport(plan, MPI.COMM_SELF, numpy, "shm")
    with pytest.raises(ValueError, match="nccl transport of the halos needs device arrays"):
        transport(plan, MPI.COMM_SELF, numpy, "nccl")
    with pytest.raises(ValueError, match="nccl transport of the sums needs device arrays"):
        summed_over(MPI.COMM_SELF, numpy, "nccl")


@pytest.mark.mpi
@pytest.mark.parametrize("choice", ["mpi", "nccl"])
def test_sums_over_the_ranks_are_the_same_bits_on_every_rank(choice):
    """What a Krylov method's dot products need: every rank gets the sum of
    every rank's values, bit for bit the same, so their iterations agree."""
    xp = array_module(choice)
    rank = COMM.Get_rank()
    local = numpy.array([1.0 / (rank + 3), (rank + 1) ** 0.5, -rank * 1e-3])
    sums = xp.array(local)  # a copy: the sum is in place
    add = summed_over(COMM, xp, choice)
    assert add.on_device == (choice == "nccl")
    add(sums)
    got = sums if xp is numpy else xp.asnumpy(sums)
    numpy.testing.assert_allclose(got, numpy.sum(COMM.allgather(local), axis=0), rtol=1e-15, atol=0)
    assert all(numpy.array_equal(got, other) for other in COMM.allgather(got))
