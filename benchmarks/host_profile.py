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
"""

import argparse
import cProfile
import io
import pstats
import time

import harness


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--top", type=int, default=45, help="functions listed by their own time")
    parser.add_argument("--out", help="the report (default: printed)")
    args, demo = harness.demo_arguments(parser, in_process=True)
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


if __name__ == "__main__":
    main()
