"""What a CUDA graph's launch costs the host, by what the graph holds: kernel
nodes only, with device-to-host copies into pinned memory (a flow step's
readback), with the same values gathered into pinned memory by one kernel,
with WHILE loops the device ends (graphcg's), and with the memsets and
device-to-device copies of a graphcg solve's start and end, as such nodes
or as kernels, and with what times a flow step's phases inside its graph:
twelve event record nodes, or twelve kernels that stamp the device's clock;
and a step's graph as the body of an outer WHILE loop of --passes passes,
its own loops nested in it (what a loop of steps on the device would cost
the host's launch). For each: the host's time
in the launch call (median over launches, the device idle before each, and
with another graph of the same work launched just before it, still running) and
the device's time a replay (CUDA events, launches queued behind a spin);
the work launched kernel by kernel, and its capture (the instantiation in it).

    python benchmarks/graph_launch.py --kernels 50 200 --json graph-launch.json
"""

import argparse
import functools
import time

import cupy
import cupyx
import numpy

import harness
from gpu_mats.kernels import family
from gpu_mats.kernels.cuda_graphs import capture, record_event, while_loop

_CODE = r"""
extern "C" __device__ __attribute__((cudart_builtin)) void cudaGraphSetConditional(unsigned long long handle,
                                                                                   unsigned int value);

// c[0] = start (start >= 0) or c[0] - 1, and the loop goes on while c[0] > 0
extern "C" __global__ void countdown(int* c, int start, unsigned long long handle)
{
    c[0] = start >= 0 ? start : c[0] - 1;
    cudaGraphSetConditional(handle, c[0] > 0);
}
"""


class Parts:
    """The arrays and kernels a variant's graph queues."""

    def __init__(self, rows, copies):
        self.x = cupy.zeros(rows)
        self.add = cupy.ElementwiseKernel("", "float64 x", "x += 1.0", "graph_launch_add")
        self.sources = [cupy.zeros(12) for _ in range(copies)]
        self.host = [cupyx.empty_pinned(s.shape, s.dtype) for s in self.sources]
        self.gathered = cupyx.empty_pinned(12 * copies, numpy.float64)
        self.plan = family("flow", cupy).gather_plan(self.sources)
        self.counter = cupy.zeros(1, dtype=numpy.int32)
        self.passes = cupy.zeros(1, dtype=numpy.int32)  # the outer loop's count
        self.module = cupy.RawModule(code=_CODE)  # countdown
        self.vectors = [cupy.zeros(rows) for _ in range(2)]  # a solve's x and its workspace's
        self.scalars = [cupy.zeros(200) for _ in range(2)]  # its scalars and history, and their record
        self.copy = cupy.ElementwiseKernel("float64 x", "float64 y", "y = x", "graph_launch_copy")
        self.zero = cupy.ElementwiseKernel("", "float64 y", "y = 0.0", "graph_launch_zero")
        self.events = [cupy.cuda.Event() for _ in range(12)]  # a step's phases' marks: six pairs
        self.clock = cupyx.zeros_pinned(12, numpy.int64)

    def marks(self):
        """The flow step's phases timed inside its graph: twelve event record nodes."""
        for event in self.events:
            record_event(event)

    def stamps(self):
        """The same marks as kernels that stamp the device's clock (plugin.flow.phases.GraphPhases)."""
        for slot in range(12):
            family("flow", cupy).stamp(self.clock, slot)

    def kernels(self, count):
        for _ in range(count):
            self.add(self.x)

    def copies(self):
        stream = cupy.cuda.get_current_stream().ptr
        runtime = cupy.cuda.runtime
        for source, host in zip(self.sources, self.host):
            runtime.memcpyAsync(host.ctypes.data, source.data.ptr, source.nbytes, runtime.memcpyDeviceToHost, stream)

    def solve_ends(self, as_kernels):
        """What graphcg queues around a solve's kernels, twice (two solves): x into its workspace, the
        scalars zeroed (twice), x back, the record kept; as memset and memcpy nodes (CuPy's fill and
        copyto) or as kernels."""
        (x, work), (scalars, record) = self.vectors, self.scalars
        for _ in range(2):
            for source, target in ((x, work), (None, scalars), (None, scalars[:9]), (work, x), (scalars, record)):
                if source is None:
                    self.zero(target) if as_kernels else target.fill(0.0)
                else:
                    self.copy(source, target) if as_kernels else cupy.copyto(target, source)

    def gather(self):
        """The flow step's readback: one kernel writes every source into pinned host memory."""
        family("flow", cupy).gather(self.gathered, self.plan)

    def loop(self, count, iterations):
        self.repeat(lambda: self.kernels(count), iterations, self.counter)

    def repeat(self, body, passes, counter):
        """``body`` in a WHILE loop of ``passes`` passes the device counts in ``counter`` (once where not
        captured: the warm-up run, which compiles the body's kernels)."""
        countdown = self.module.get_function("countdown")
        if not cupy.cuda.get_current_stream().is_capturing():
            body()
            return
        while_loop(lambda h: countdown((1,), (1,), (counter, numpy.int32(passes), numpy.uint64(h))),
                   lambda h: (body(), countdown((1,), (1,), (counter, numpy.int32(-1), numpy.uint64(h)))))


def variants(parts, kernels, loops, iterations, passes):
    """{name: fn queueing the variant's work}."""
    per_loop = kernels // (2 * max(loops, 1) * iterations)  # half the kernels run in loops
    looped = kernels - loops * per_loop * iterations

    def with_loops(tail):
        def fn():
            parts.kernels(looped)
            for _ in range(loops):
                parts.loop(per_loop, iterations)
            tail()
        return fn

    return {
        "kernels": lambda: parts.kernels(kernels),
        "kernels + copies": lambda: (parts.kernels(kernels), parts.copies()),
        "kernels + one gather": lambda: (parts.kernels(kernels), parts.gather()),
        "kernels + 12 event records": lambda: (parts.kernels(kernels), parts.marks()),
        "kernels + 12 clock stamps": lambda: (parts.kernels(kernels), parts.stamps()),
        f"kernels + {loops} loops": with_loops(lambda: None),
        f"kernels + {loops} loops + copies": with_loops(parts.copies),
        f"kernels + {loops} loops + one gather": with_loops(parts.gather),
        f"kernels + {loops} loops + one gather + 12 event records": with_loops(lambda: (parts.gather(), parts.marks())),
        f"kernels + {loops} loops + one gather + 12 clock stamps": with_loops(lambda: (parts.gather(), parts.stamps())),
        f"the last, {passes} passes of an outer loop": lambda: parts.repeat(
            with_loops(lambda: (parts.gather(), parts.stamps())), passes, parts.passes),
        "kernels + memsets and copies": lambda: (parts.kernels(kernels), parts.solve_ends(False)),
        "kernels + the same by kernels": lambda: (parts.kernels(kernels), parts.solve_ends(True)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, nargs="+", default=[50, 200], help="kernel launches a replay")
    parser.add_argument("--rows", type=int, default=26_815, help="each kernel's length")
    parser.add_argument("--copies", type=int, default=6, help="values read back a replay")
    parser.add_argument("--loops", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=4, help="each loop's passes")
    parser.add_argument("--passes", type=int, default=16, help="the outer loop's passes")
    parser.add_argument("--repeats", type=int, default=500)
    parser.add_argument("--json")
    args = parser.parse_args()
    parts, rows = Parts(args.rows, args.copies), []
    for kernels in args.kernels:
        for name, fn in variants(parts, kernels, args.loops, args.iterations, args.passes).items():
            fn()  # compiles what it launches, outside the capture
            eager = harness.seconds(fn)  # launched kernel by kernel (a loop's body once)
            start = time.perf_counter()
            graph = capture(fn)
            captured = time.perf_counter() - start
            stream = cupy.cuda.Stream(non_blocking=True)
            with stream:
                device = harness.event_us(lambda: graph.launch(stream), repeats=7, batch=20)
            twin = capture(fn)  # the same work in another graph, launched just before: the device busy
            # the launch alone, and behind another graph still running (as a flow step's behind the last)
            launch = functools.partial(graph.launch, stream)
            rows.append({"graph": name, "kernels": kernels, "launch_us": harness.launch_us(launch, stream, args.repeats),
                         "busy_launch_us": harness.launch_us(launch, stream, args.repeats,
                                                             functools.partial(twin.launch, stream)),
                         "device_us": device, "eager_ms": 1e3 * eager, "capture_ms": 1e3 * captured})
            print(rows[-1], flush=True)
            harness.write_json(args.json, {"meta": harness.metadata(), "args": vars(args), "rows": rows}, quiet=True)
    harness.print_table(rows, [("graph", "graph", "{}"), ("kernels", "kernels a replay", "{}"),
                               ("launch_us", "host us a launch", "{:.1f}"),
                               ("busy_launch_us", "behind another", "{:.1f}"), ("device_us", "device us a replay",
                                                                              "{:.1f}"),
                               ("eager_ms", "ms launched", "{:.2f}"), ("capture_ms", "ms to capture", "{:.2f}")])


if __name__ == "__main__":
    main()
