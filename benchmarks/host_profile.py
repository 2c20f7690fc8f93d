"""Where the host's time goes in a flow step: cProfile over --steps steps of
a demo after --warmup (the steps' CUDA graphs captured by then, so that
what it sees is the replayed step's Python and driver work), the functions
by their own time, and the wall time a step with the time the host spent
blocked on the device (StepReadback.wait) set apart.

    python benchmarks/host_profile.py --warmup 300 --steps 1000 --out profile.txt -- \\
        demos/cylinder.py -cyl_case 2d1 -flow_mesh cylinder2d-2.msh -flow_max_steps 1500

Everything after -- is the demo and its options; it must run at least
--warmup + --steps + 1 steps. cProfile adds about a microsecond to each
call it sees: the demo's own timing line, without the profiler, is the
figure to report; this is where to look.

--graphs reports the step's CUDA graphs captured by step --warmup + 1:
each one's nodes by type (its loops' bodies within, from CUDA's DOT dump,
written beside --out) and the host's time of its launch alone (the device
idle before each), then stops the demo (the launches rewrite the time
levels' buffers).

--spread reports how the host's own time is spread over the steps: for
each interval of the window from the end of one of the host's waits for
the device to the start of the next (its launches, verdicts and readers;
with loops of steps, -flow_graph_steps above 1, one wait a loop), its
wall time over the steps the host took in it; their mean, median and
percentiles: a mean above the median by much is a few long intervals (the
interpreter's, the system's), not the steps' own work.

--split times the functions named instead (module:qualified name; the
default list follows a replayed step's host path) by the wall clock, each
call's time including the calls it makes, with no profiler: a few tenths
of a microsecond a call where cProfile's adds a microsecond to each of the
hundreds beneath them.
"""

import argparse
import cProfile
import collections
import functools
import importlib
import io
import pstats
import re
import time

import harness


# a replayed step's host path: the solver's loop, the step, its launch and wait, its solves' verdicts, its readers
SPLIT = ["plugin.flow.solver:FlowSolver._time_step", "plugin.flow.integrator:FractionalStep.advance",
         "plugin.flow.integrator:FractionalStep._wait", "plugin.flow.integrator:FractionalStep._graph_key",
         "plugin.flow.integrator:FractionalStep._after", "plugin.flow.integrator:FractionalStep._launch",
         "plugin.flow.integrator:FractionalStep._launch_loop", "plugin.flow.integrator:FractionalStep._take_loop",
         "plugin.flow.integrator:FractionalStep._judge", "plugin.flow.solver:FlowSolver._take_launched",
         "gpu_mats.kernels.cuda_graphs:replay", "plugin.flow.phases:PhaseTimer._read",
         "plugin.flow.readback:StepReadback.mark", "plugin.flow.integrator:_check",
         "plugin.flow.integrator:FractionalStep.convective_rate",
         "plugin.flow.integrator:FractionalStep.change_rate", "plugin.flow.forces:GroupForce.__call__",
         "plugin.flow.forces:PointPressure.__call__", "plugin.flow.solver:_Progress.__call__"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--top", type=int, default=45, help="functions listed by their own time")
    parser.add_argument("--split", nargs="*", metavar="MODULE:NAME",
                        help=f"time these functions instead of profiling (none named: {len(SPLIT)} on a step's path)")
    parser.add_argument("--graphs", action="store_true", help="the step graphs' nodes and launch times")
    parser.add_argument("--spread", action="store_true", help="the host's own time of each step: its percentiles")
    parser.add_argument("--out", help="the report (default: printed)")
    args, demo = harness.demo_arguments(parser, in_process=True)
    if args.graphs:
        harness.write_report(step_graphs(demo, args.warmup, args.out), args.out)
        return
    if args.spread:
        harness.write_report(spread(demo, args.warmup, args.steps), args.out)
        return
    if args.split is not None:
        harness.write_report(split(demo, args.warmup, args.steps, args.split or SPLIT), args.out)
        return
    profile, window = cProfile.Profile(), {}

    def enter(_stepper):
        window["start"] = time.perf_counter()
        profile.enable()

    def leave(_stepper):
        profile.disable()
        window["seconds"] = time.perf_counter() - window["start"]

    harness.demo_window(demo, args.warmup, args.steps, enter, leave)
    stats = pstats.Stats(profile, stream=io.StringIO())
    waited = sum(tottime for (_, _, name), (_, _, tottime, _, _) in stats.stats.items() if name == "wait")
    report = io.StringIO()
    report.write(f"{' '.join(demo)}: steps {args.warmup + 1} to {args.warmup + args.steps} under cProfile: "
                 f"{window['seconds'] / args.steps * 1e3:.3f} ms a step, of it blocked in wait() "
                 f"{waited / args.steps * 1e3:.3f} ms, the host's own "
                 f"{(window['seconds'] - waited) / args.steps * 1e3:.3f} ms\n")
    stats.stream = report
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(r"plugin|petsc_ext|gpu_mats|demos", args.top)
    harness.write_report(report.getvalue(), args.out)


def _timed_calls(fn, window, record):
    """``fn`` that, while ``window["on"]``, passes each call's start and end (perf_counter) to ``record``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not window["on"]:
            return fn(*args, **kwargs)
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            record(start, time.perf_counter())
    return wrapper


def split(demo, warmup, steps, names):
    """The report of --split: each function's wall time and calls a step over the window."""
    seconds, calls, window = collections.Counter(), collections.Counter(), {"on": False}

    def timed(name, fn):
        def record(start, end):
            seconds[name] += end - start
            calls[name] += 1
        return _timed_calls(fn, window, record)

    absent = {}
    for name in names:
        module, path = name.split(":")
        try:
            owner = importlib.import_module(module)
        except ImportError as exc:  # a GPU module on a machine without CuPy
            absent[name] = str(exc)
            continue
        *outer, last = path.split(".")
        for attribute in outer:
            owner = getattr(owner, attribute)
        setattr(owner, last, timed(name, getattr(owner, last)))

    def enter(_stepper):
        window["on"], window["start"] = True, time.perf_counter()

    def leave(_stepper):
        window["on"], window["seconds"] = False, time.perf_counter() - window["start"]

    harness.demo_window(demo, warmup, steps, enter, leave)
    waited = seconds.get("plugin.flow.integrator:FractionalStep._wait", 0.0)
    lines = [f"{' '.join(demo)}: steps {warmup + 1} to {warmup + steps}, functions timed: "
             f"{window['seconds'] / steps * 1e6:.1f} us a step, of it waited {waited / steps * 1e6:.1f}, "
             f"the host's own {(window['seconds'] - waited) / steps * 1e6:.1f}",
             f"{'us a step':>10} {'calls':>6}  function (its time includes the calls it makes)"]
    lines += [f"{seconds[name] / steps * 1e6:10.2f} {calls[name] / steps:6.2f}  {name}" for name in names
              if name not in absent]
    lines += [f"not timed: {name} ({why})" for name, why in absent.items()]
    return "\n".join(lines) + "\n"


def spread(demo, warmup, steps):
    """The report of --spread: the host's own time between its waits for the
    device, each interval's over the steps the host took in it (with loops of
    steps, one wait a loop)."""
    import numpy

    from plugin.flow.integrator import FractionalStep

    waits, window, wait = [], {"on": False}, FractionalStep._wait

    def switch(on):
        def to(_stepper):
            window["on"] = on
        return to

    @functools.wraps(wait)
    def timed(stepper, readback):  # (start, end, steps taken by then: phases.waits counts each step taken)
        start, taken = time.perf_counter(), stepper.phases.waits
        try:
            return wait(stepper, readback)
        finally:
            if window["on"]:
                waits.append((start, time.perf_counter(), taken))

    FractionalStep._wait = timed
    try:
        harness.demo_window(demo, warmup, steps, switch(True), switch(False))
    finally:
        FractionalStep._wait = wait
    # interval i: from the end of wait i to the start of wait i + 1, and the steps taken in it
    intervals = [(start - end, taken - taken_before) for (_, end, taken_before), (start, _, taken)
                 in zip(waits, waits[1:])]
    own = numpy.array([seconds for seconds, _ in intervals]) * 1e6
    taken = numpy.array([count for _, count in intervals])
    if not taken.sum():
        return f"{' '.join(demo)}: no waits in the window (no step graphs?)\n"
    a_step = own[taken > 0] / taken[taken > 0]
    p10, median, p90, p99 = numpy.percentile(a_step, (10, 50, 90, 99))
    long = a_step > 2 * median
    return (f"{' '.join(demo)}: steps {warmup + 1} to {warmup + steps}, {len(waits)} waits, {taken.mean():.1f} "
            f"steps taken between two; the host's own between them, us a step: mean {own.sum() / taken.sum():.1f}, "
            f"of the intervals median {median:.1f}, 10% {p10:.1f}, 90% {p90:.1f}, 99% {p99:.1f}, largest "
            f"{a_step.max():.1f}; {int(long.sum())} intervals above twice the median\n")


class _Stop(BaseException):
    """Ends the demo once its graphs are reported (not an Exception, which a demo may catch)."""


NODE_TYPES = ("MEMCPY", "MEMSET", "EVENT_RECORD", "EVENT_WAIT", "CONDITIONAL", "HOST", "EMPTY", "MEM_ALLOC",
              "MEM_FREE", "GRAPH")  # a node's label names its type, or else (a kernel) its function


def node_types(graph, path):
    """{type: nodes} of a CuPy graph, its loops' bodies within, and its edges, from CUDA's DOT dump into ``path``."""
    from cuda.bindings import driver

    error, = driver.cuGraphDebugDotPrint(driver.CUgraph(graph.graph), path.encode(), 0)
    if error != driver.CUresult.CUDA_SUCCESS:
        return {"dump failed": error.name}
    with open(path) as dump:
        text = dump.read()
    counts = collections.Counter(kind if kind in NODE_TYPES else "KERNEL"
                                 for kind in re.findall(r'label="(?:\d+|\{)\n([^\n"]*)', text))
    counts["edges"] = text.count("->")
    return dict(counts)


def step_graphs(demo, warmup, out, repeats=300):
    """The report of --graphs."""
    import itertools

    import cupy
    import numpy

    lines = []

    def report(stepper):
        graphs = stepper.step_graphs.graphs() if stepper.step_graphs is not None else {}
        stream = cupy.cuda.Stream(non_blocking=True)
        lines.append(f"{' '.join(demo)}: {len(graphs)} step graphs at step {warmup + 1}")
        lines.append("launch us (CuPy's call, the runtime's call; median of "
                     f"{repeats}, the device idle before each), nodes by type (DOT: with the loops' bodies)")
        for k, (arrangement, graph) in enumerate(graphs.items()):
            by_cupy = harness.launch_us(lambda: graph.launch(stream), stream, repeats)
            by_runtime = harness.launch_us(lambda: cupy.cuda.runtime.graphLaunch(graph.graphExec, stream.ptr), stream,
                                           repeats)
            nodes = node_types(graph, f"{out or 'step-graph'}.{k}.dot")
            what = "a loop of steps" if "loop" in arrangement else f"one step, marked {arrangement[-1]}"
            lines.append(f"graph {k} ({what}): launch {by_cupy:.1f} us, {by_runtime:.1f} us; nodes {nodes}")
        # the unmarked graphs of one step launched in turn, as the steps take them, with and without host work
        # between (8 MB read: a step's Python leaves the driver's data out of the CPU's caches)
        turn = [g for a, g in graphs.items() if "loop" not in a and not a[-1]]
        scratch = numpy.ones(1 << 20)
        for between in ((None, scratch.sum) if turn else ()):
            graph_in_turn = itertools.cycle(turn)
            us = harness.launch_us(lambda: next(graph_in_turn).launch(stream), stream, repeats, between)
            lines.append(f"the {len(turn)} unmarked graphs in turn{', 8 MB read between' if between else ''}: "
                         f"launch {us:.1f} us")
        raise _Stop

    try:
        harness.demo_window(demo, warmup, 1, lambda stepper: None, report)
    except _Stop:
        pass
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
