"""Whether a CUDA graph can hold graphcg's loop that the device ends (a
conditional WHILE node) with the dot products summed over the ranks by an
NCCL all-reduce inside it: CG on a diagonal matrix, captured and replayed,
against the same loop launched. Run on two ranks with a GPU each:

    mpiexec -n 2 python benchmarks/nccl_in_loops.py
    NCCL_GRAPH_MIXING_SUPPORT=0 mpiexec -n 2 -x NCCL_GRAPH_MIXING_SUPPORT python benchmarks/nccl_in_loops.py

Each rank prints what happened: the iterations of the replayed loop and of
the launched one, or the error that refused the graph.
"""

import os
import sys

import cupy
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gpu_mats.device_cg import DeviceCG  # noqa: E402
from gpu_mats.exchange import NcclSum  # noqa: E402
from gpu_mats.kernels.cuda_graphs import capture, replay  # noqa: E402

ROWS, LIMIT, TEST = 1000, 128, (0, 1e-8, 0.0, 1e5)  # the test: the natural norm's column, rtol, atol, dtol


def main():
    comm = MPI.COMM_WORLD
    cupy.cuda.Device(comm.Get_rank() % cupy.cuda.runtime.getDeviceCount()).use()
    diagonal = cupy.linspace(1.0, 10.0, ROWS) * (1 + comm.Get_rank())
    reduce, cg, b = NcclSum(comm), DeviceCG(cupy, ROWS, LIMIT), cupy.ones(ROWS)

    def multiply(x, y):
        cupy.multiply(diagonal, x, out=y)

    def precondition(x, y):
        cupy.copyto(y, x)

    def solve():
        cg.start(b, False, multiply, precondition, reduce)
        cg.loop(LIMIT, TEST, multiply, precondition, reduce, start=True)

    solve()  # launched: opens NCCL's connections, which a capture cannot
    launched = len(cg.read()[0]) - 1
    mixing = os.environ.get("NCCL_GRAPH_MIXING_SUPPORT", "unset")
    try:
        replay(capture(solve))
        cupy.cuda.Device().synchronize()
        print(f"rank {comm.Get_rank()} (NCCL_GRAPH_MIXING_SUPPORT {mixing}): replayed, {len(cg.read()[0]) - 1} "
              f"iterations; launched, {launched}", flush=True)
    except Exception as exc:  # what the driver or NCCL said: the point of this probe
        print(f"rank {comm.Get_rank()} (NCCL_GRAPH_MIXING_SUPPORT {mixing}): refused, {type(exc).__name__}: {exc}",
              flush=True)


if __name__ == "__main__":
    main()
