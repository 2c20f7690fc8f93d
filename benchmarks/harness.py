"""What every benchmark script shares: timers, the copy-bandwidth ceiling, run
metadata, the printed table and the JSON file.

Timings follow docs/design.md: warm-up first, then the median of repeated batches;
device work is timed with CUDA events, whole PETSc calls by the wall clock
after a device synchronize.
"""

import argparse
import datetime
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time

import numpy

# The test matrices (stencils) live with the tests.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))

try:
    import cupy
except ImportError:  # on a machine without CuPy: host timers only (for trying scripts out)
    cupy = None


def mesh_laplacian(path):
    """CSR arrays of the SPD Neumann Laplacian -L of a tetrahedral mesh file (meshio)."""
    import meshio

    from plugin.flow.mesh import mesh_geometry
    from plugin.flow.operators import compact_laplacian

    L = -compact_laplacian(mesh_geometry(meshio.read(path), ungrouped="boundary"))
    return L.indptr, L.indices, L.data


def sync():
    if cupy is not None:
        cupy.cuda.Device().synchronize()


def seconds(fn):
    """Wall time of one call of fn (s), device work included."""
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def wall_us(fn, repeats=15, batch=20, warmup=3):
    """Median wall time of one call (us), each batch of calls closed by a synchronize."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        sync()
        times.append((time.perf_counter() - start) / batch * 1e6)
    return statistics.median(times)


def launch_us(launch, stream, repeats, before=None):
    """Median host time (us) of ``launch()`` (a graph's launch on ``stream``)
    with ``stream`` idle before each, or with ``before()`` called just before
    it (another graph launched, still running; host work)."""
    times = []
    for _ in range(repeats):
        stream.synchronize()
        if before is not None:
            before()
        start = time.perf_counter()
        launch()
        times.append((time.perf_counter() - start) * 1e6)
    stream.synchronize()
    return statistics.median(times)


_SPIN = cupy and cupy.RawKernel(r"""
extern "C" __global__ void spin(long long cycles)
{
    const long long start = clock64();
    while (clock64() - start < cycles) {}
}""", "spin")


def spin(cycles):
    """Hold the device for about ``cycles`` of its clock (one thread on the current stream); the host goes on."""
    _SPIN((1,), (1,), (numpy.int64(cycles),))


def event_us(fn, repeats=15, batch=20, warmup=3, spin_cycles=8_000_000):
    """Median device time of one call (us) between CUDA events on the current stream.

    A spin kernel holds the GPU (a few ms) while the batch is enqueued, so the
    events bracket GPU work only, not the host's launch rate.
    """
    for _ in range(warmup):
        fn()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeats):
        spin(spin_cycles)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / batch * 1e3)
    return statistics.median(times)


def median_solve_ms(ksp, b, x, warmup, repeats):
    """The median wall time (ms) of ``repeats`` solves from x = 0, after ``warmup`` more, each between device
    synchronizes."""
    times = []
    for k in range(warmup + repeats):
        x.set(0.0)
        times.append(seconds(lambda: ksp.solve(b, x)))
    return 1e3 * statistics.median(times[warmup:])


def krylov_solver(A, prefix, options, max_it):
    """A KSP on A to rtol 1e-8 with ``options`` as defaults under ``prefix`` (the user's options win)."""
    from petsc4py import PETSc

    from petsc_ext.options import option_defaults

    ksp = PETSc.KSP().create(comm=A.getComm())
    ksp.setOptionsPrefix(prefix)
    ksp.setOperators(A)
    ksp.setTolerances(rtol=1e-8, max_it=max_it)
    with option_defaults(prefix, options):
        ksp.setFromOptions()
    return ksp


def copy_bandwidth_GBs(nbytes=2**31):
    """Device-to-device copy rate, counting bytes read plus bytes written."""
    src, dst = cupy.ones(nbytes // 8), cupy.empty(nbytes // 8)
    us = event_us(lambda: dst.data.copy_from_device_async(src.data, nbytes), repeats=10, batch=5)
    return 2 * nbytes / (us * 1e-6) / 1e9


def metadata(commit=None):
    device = "host (no CuPy)"
    if cupy is not None:
        device = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()
    if commit is None:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = os.environ.get("BENCH_COMMIT", "unknown")
    return {"device": device, "date": datetime.date.today().isoformat(), "commit": commit,
            "cupy": cupy.__version__ if cupy is not None else None}


def print_table(rows, columns):
    """rows: list of dicts; columns: list of (key, header, format)."""
    cells = [[header for _, header, _ in columns]]
    cells += [[("" if row.get(key) is None else fmt.format(row[key])) for key, _, fmt in columns] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for k, r in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def write_json(path, payload, quiet=False):
    if path:
        with open(path, "w") as out:
            json.dump(payload, out, indent=1)
        if not quiet:
            print(f"wrote {path}")


def demo_summary(demo, options, timeout=None):
    """Run the demo ``demo`` (its script and options) with ``options`` more in
    a process of its own: its summary.json, or what went wrong."""
    with tempfile.TemporaryDirectory() as directory:
        command = [sys.executable, *demo, *options, "-flow_output_dir", directory]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            return {"timed out": timeout, "output": str(exc.stdout or "")[-2000:]}
        if run.returncode:
            return {"failed": run.stdout[-2000:] + run.stderr[-2000:]}
        with open(os.path.join(directory, "summary.json")) as stream:
            return json.load(stream)


def demo_arguments(parser, in_process=False):
    """(args, demo): ``parser``'s arguments and, after them (past a --), the
    demo's command line, its script and options. ``in_process``: the demo
    runs in this process (run_demo, demo_window), so PETSc starts now with
    its options (the demo's own init is then a no-op)."""
    parser.add_argument("demo", nargs=argparse.REMAINDER, help="the demo and its options, after --")
    args = parser.parse_args()
    demo = [a for a in args.demo if a != "--"]
    if in_process:
        import petsc4py

        petsc4py.init(demo)
    return args, demo


def write_report(text, path):
    """``text`` into the file ``path``, or printed where ``path`` is None."""
    if path is None:
        print(text, end="")
        return
    with open(path, "w") as stream:
        stream.write(text)


def run_demo(demo):
    """Run the demo ``demo`` (its script and options, as a command line) in this process, as its own
    ``python`` command would (a failing exit raises)."""
    sys.argv = list(demo)
    sys.path.insert(0, os.path.dirname(os.path.abspath(demo[0])))
    try:
        runpy.run_path(demo[0], run_name="__main__")
    except SystemExit as exc:  # a demo's sys.exit(main())
        if exc.code:
            raise


def demo_window(demo, warmup, steps, enter, leave):
    """Run the demo ``demo`` (its script and options, as a command line) in
    this process, calling ``enter(stepper)`` before its step warmup + 1 and
    ``leave(stepper)`` before its step warmup + steps + 1 (the demo's
    FractionalStep), so that what they measure covers ``steps`` steps; the
    demo must run at least warmup + steps + 1 steps (a SystemExit naming
    how many it ran). The steps are counted as the run takes them: one at
    a time (FractionalStep.advance) or those launched together
    (FractionalStep.take)."""
    from plugin.flow.integrator import FractionalStep

    advance, take, count = FractionalStep.advance, FractionalStep.take, [0]

    def tick(stepper):
        count[0] += 1
        if count[0] == warmup + 1:
            enter(stepper)
        elif count[0] == warmup + steps + 1:
            leave(stepper)

    def counted(stepper, state, dt, more=False, loop=0):
        tick(stepper)
        return advance(stepper, state, dt, more, loop)

    def counted_together(stepper, count):
        for new in take(stepper, count):
            tick(stepper)
            yield new

    FractionalStep.advance, FractionalStep.take = counted, counted_together
    try:
        run_demo(demo)
    finally:
        FractionalStep.advance, FractionalStep.take = advance, take
    if count[0] < warmup + steps + 1:
        sys.exit(f"the demo ran {count[0]} steps: fewer than --warmup + --steps + 1")
