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
import time

import harness


# a replayed step's host path: the solver's loop, the step, its launch and wait, its solves' verdicts, its readers
SPLIT = ["plugin.flow.solver:FlowSolver._time_step", "plugin.flow.integrator:FractionalStep.advance",
         "plugin.flow.integrator:FractionalStep._wait", "plugin.flow.integrator:FractionalStep._graph_key",
         "plugin.flow.integrator:FractionalStep._after", "plugin.flow.integrator:FractionalStep._launch_graph",
         "gpu_mats.kernels.cuda_graphs:replay", "plugin.flow.integrator:PhaseTimer._read",
         "plugin.flow.integrator:StepReadback.mark", "petsc_ext.graphcg:GraphCG.settle",
         "plugin.flow.integrator:_check", "plugin.flow.integrator:FractionalStep.convective_rate",
         "plugin.flow.integrator:FractionalStep.change_rate", "plugin.flow.forces:GroupForce.__call__",
         "plugin.flow.forces:PointPressure.__call__", "plugin.flow.solver:_Progress.__call__"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--top", type=int, default=45, help="functions listed by their own time")
    parser.add_argument("--split", nargs="*", metavar="MODULE:NAME",
                        help=f"time these functions instead of profiling (none named: {len(SPLIT)} on a step's path)")
    parser.add_argument("--out", help="the report (default: printed)")
    args, demo = harness.demo_arguments(parser, in_process=True)
    if args.split is not None:
        harness.write_report(split(demo, args.warmup, args.steps, args.split or SPLIT), args.out)
        return
    profile, window = cProfile.Profile(), {}

    def enter():
        window["start"] = time.perf_counter()
        profile.enable()

    def leave():
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


def split(demo, warmup, steps, names):
    """The report of --split: each function's wall time and calls a step over the window."""
    seconds, calls, window = collections.Counter(), collections.Counter(), {"on": False}

    def timed(name, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not window["on"]:
                return fn(*args, **kwargs)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - start
                calls[name] += 1
        return wrapper

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

    def enter():
        window["on"], window["start"] = True, time.perf_counter()

    def leave():
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


if __name__ == "__main__":
    main()
