"""What a first run costs on a machine whose CuPy kernel cache is empty, and
what `python -m plugin.warmup` (run once after installing) saves of it.

    python benchmarks/first_run.py --json first-run.json

Each scenario gets an empty cache of its own (CUPY_CACHE_DIR in a temporary
folder) and runs its commands in order, each in a new process: `make demo`'s
case (the 2D cavity, 64^2, Re 100, to its steady state) and the 256^3 cavity's
set-up (`benchmarks/flow.py --sizes 256`, one warm-up and one timed step),
first and again; then the same after the warm-up in a fresh cache. Wall time
of each command, and the set-up that flow.py reports; JSON after every
command, so a run cut short keeps what it measured.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEMO = [sys.executable, os.path.join(ROOT, "demos", "cavity.py"), "-flow_re", "100", "-da_grid_x", "64",
        "-da_grid_y", "64"]
SETUP_256 = [sys.executable, os.path.join(HERE, "flow.py"), "--sizes", "256", "--warmup", "1", "--steps", "1"]
WARMUP = [sys.executable, "-m", "plugin.warmup"]
SCENARIOS = {  # name -> the commands run in order on one empty cache
    "demo, empty cache": [("demo", DEMO), ("demo again", DEMO)],
    "256^3 set-up, empty cache": [("256^3", SETUP_256), ("256^3 again", SETUP_256)],
    "after the warm-up": [("warm-up", WARMUP), ("demo", DEMO), ("256^3", SETUP_256)],
}


def run(command, cache):
    env = {**os.environ, "CUPY_CACHE_DIR": cache, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    start = time.perf_counter()
    out = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode:
        raise SystemExit(f"first_run: {' '.join(command)} failed:\n{out.stderr[-3000:]}")
    row = {"wall_s": seconds, "kernels_cached": sum(len(files) for _, _, files in os.walk(cache))}
    setup = re.search(r"256\^3: set up in (\S+) s", out.stdout)
    if setup:
        row["setup_s"] = float(setup.group(1))
    steady = re.search(r"flow: (\d+) steps of \d+ cells: (\S+) ms per step", out.stdout)
    if steady:
        row["steps"], row["ms_per_step"] = int(steady.group(1)), float(steady.group(2))
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for scenario in args.scenarios:
        with tempfile.TemporaryDirectory() as cache:
            for name, command in SCENARIOS[scenario]:
                rows.append({"scenario": scenario, "command": name, **run(command, cache)})
                print(rows[-1], flush=True)
                harness.write_json(args.json, {"meta": harness.metadata(), "rows": rows}, quiet=True)
    harness.print_table(rows, [("scenario", "scenario", "{}"), ("command", "command", "{}"),
                               ("wall_s", "wall s", "{:.1f}"), ("setup_s", "set-up s", "{}"),
                               ("ms_per_step", "ms/step", "{}"),
                               ("kernels_cached", "kernels cached", "{}")])
    harness.write_json(args.json, {"meta": harness.metadata(), "rows": rows})


if __name__ == "__main__":
    main()
