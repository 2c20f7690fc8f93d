"""What the host's first calls cost after it waited for the device: a loop
of flow steps makes the host wait once a loop, for as long as the loop's
steps take on the device, and then launch the next loop and take the
steps. This times, after a wait of --waits milliseconds (a spin kernel
holding the device, then the host blocked in cudaEventSynchronize, or
polling cudaEventQuery in a Python loop), the first and the second launch
of a one-thread kernel (the flow family's loop_start, which each loop's
launch calls first) and a small NumPy operation, each the median over
--repeats waits, against the same calls with the host warm.

    python benchmarks/cold_launch.py --waits 3 25 80 --json cold-launch.json
"""

import argparse
import statistics
import time

import cupy
import numpy

import harness
from gpu_mats.kernels.flow import LOOP_SLOTS
from gpu_mats.kernels.flow import cuda as flow

_CYCLES_PER_MS = 1.9e6  # the spin kernel's clock64 ticks a millisecond, about (H100, H200)


def after_waits(wait_ms, how, repeats):
    """Median us of (first launch, second launch, NumPy op) after each of ``repeats`` waits of ``wait_ms``."""
    status, small = cupy.zeros(LOOP_SLOTS), numpy.arange(14.0)
    done = cupy.cuda.Event(block=False, disable_timing=True)
    first, second, host = [], [], []
    for _ in range(repeats):
        harness.spin(int(wait_ms * _CYCLES_PER_MS))
        done.record()
        if how == "poll":
            while not done.done:
                pass
        else:
            done.synchronize()
        t0 = time.perf_counter()
        flow.loop_start(status, 16, 0)
        t1 = time.perf_counter()
        flow.loop_start(status, 16, 0)
        t2 = time.perf_counter()
        numpy.minimum(small, 3.0)
        t3 = time.perf_counter()
        first.append(t1 - t0), second.append(t2 - t1), host.append(t3 - t2)
    return tuple(1e6 * statistics.median(values) for values in (first, second, host))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waits", type=float, nargs="+", default=[3.0, 25.0, 80.0], help="milliseconds")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    status = cupy.zeros(LOOP_SLOTS)
    flow.loop_start(status, 16, 0)  # compiled and loaded
    cupy.cuda.Device().synchronize()
    warm = after_waits(0.0, "sync", args.repeats)
    rows = [{"wait_ms": 0.0, "how": "none", "first_us": warm[0], "second_us": warm[1], "numpy_us": warm[2]}]
    for wait in args.waits:
        for how in ("sync", "poll"):
            first, second, host = after_waits(wait, how, args.repeats)
            rows.append({"wait_ms": wait, "how": how, "first_us": first, "second_us": second, "numpy_us": host})
    lines = [f"{'wait ms':>8} {'waited by':>9} {'1st launch us':>14} {'2nd launch us':>14} {'NumPy op us':>12}"]
    lines += [f"{r['wait_ms']:8.0f} {r['how']:>9} {r['first_us']:14.1f} {r['second_us']:14.1f} {r['numpy_us']:12.2f}"
              for r in rows]
    print("\n".join(lines))
    if args.json:
        harness.write_json(args.json, {"rows": rows})


if __name__ == "__main__":
    main()
