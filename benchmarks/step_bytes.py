"""The least bytes a flow step moves: every array that each call of the
project's kernels takes (the families of gpu_mats.kernels: SELL, CSR and
stencil products, the multigrid cycle, CG's steps, the flow's updates)
counted once a call, as the SpMV report counts a product's least traffic,
summed per family over --steps steps of a demo after --warmup.

    python benchmarks/step_bytes.py --warmup 20 --steps 20 --json bytes.json -- \\
        demos/cylinder.py -cyl_case 2d1 -flow_mesh cylinder2d-2.msh -dm_mat_type gpusell -gpu_backend numpy

It runs on the NumPy twins, which the host path calls with the arrays the
GPU's calls take, so that no GPU is needed; a step's kernels are those of
the step launched (blocks of CG iterations), as many calls as the GPU's
graph holds but for the loop's tests. Not counted: the few CuPy element-wise
passes and sparse products outside the families, and a vector read and
written in one call counts once, so the figure is a lower bound. With
--bandwidth (GB/s, a copy bandwidth measured on a card) it gives the time
those bytes take at it, and with --step-ms (a step measured on that card)
their share of the step.
"""

import argparse
import collections
import functools

import numpy
from numpy.lib.array_utils import byte_bounds

import harness

from gpu_mats.kernels import FAMILIES, family


class Traffic:
    """Calls and bytes per kernel family: each host twin's function wrapped
    so that a call adds the bytes of the distinct arrays it takes (a call
    inside another, a twin built of twins, adds nothing of its own)."""

    def __init__(self):
        self.calls, self.bytes = collections.Counter(), collections.Counter()
        self.counting, self._depth, self._wrapped = False, 0, []

    def wrap(self, name):
        module = family(name, numpy)
        for attr, fn in list(vars(module).items()):
            if callable(fn) and getattr(fn, "__module__", None) == module.__name__ and not attr.startswith("_"):
                self._wrapped.append((module, attr, fn))
                setattr(module, attr, self._counted(name, fn))

    def unwrap(self):
        """The twins' own functions back."""
        for module, attr, fn in self._wrapped:
            setattr(module, attr, fn)
        self._wrapped.clear()

    def _counted(self, name, fn):
        @functools.wraps(fn)
        def counted(*args, **kwargs):
            if self.counting and self._depth == 0:
                self.calls[name] += 1
                self.bytes[name] += array_bytes((*args, *kwargs.values()))
            self._depth += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth -= 1

        return counted


def array_bytes(values):
    """The bytes of the distinct arrays among ``values`` and the tuples and
    lists among them (views of one memory count once)."""
    spans, stack = {}, list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, (tuple, list)):
            stack.extend(value)
        elif isinstance(value, numpy.ndarray) and value.size:
            low, high = byte_bounds(value)
            spans[low] = max(spans.get(low, 0), high - low)
    return sum(spans.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--bandwidth", type=float, help="GB/s: a copy bandwidth to set the bytes against")
    parser.add_argument("--step-ms", type=float, help="a measured step (ms) at that bandwidth's card")
    parser.add_argument("--json")
    args, demo = harness.demo_arguments(parser, in_process=True)
    traffic = Traffic()
    for name in FAMILIES:
        traffic.wrap(name)

    def enter(_stepper):
        traffic.counting = True

    def leave(_stepper):
        traffic.counting = False

    harness.demo_window(demo, args.warmup, args.steps, enter, leave)
    steps = args.steps
    per_family = {name: {"calls_per_step": traffic.calls[name] / steps,
                         "MB_per_step": traffic.bytes[name] / steps / 1e6}
                  for name in FAMILIES if traffic.calls[name]}
    total = sum(traffic.bytes.values()) / steps
    result = {**harness.metadata(), "command": demo, "steps": steps, "families": per_family,
              "calls_per_step": sum(traffic.calls.values()) / steps, "MB_per_step": total / 1e6}
    print(f"{steps} steps of {' '.join(demo)}: {result['calls_per_step']:.1f} kernel calls and at least "
          f"{result['MB_per_step']:.2f} MB a step")
    for name, row in per_family.items():
        print(f"  {name:14s} {row['calls_per_step']:7.1f} calls {row['MB_per_step']:9.3f} MB")
    if args.bandwidth:
        result["bandwidth_GBs"] = args.bandwidth
        result["us_at_bandwidth"] = total / args.bandwidth / 1e3
        print(f"  at {args.bandwidth:.0f} GB/s: {result['us_at_bandwidth']:.1f} us a step")
        if args.step_ms:
            result["step_ms"] = args.step_ms
            result["share_of_step"] = result["us_at_bandwidth"] / (args.step_ms * 1e3)
            print(f"  {100 * result['share_of_step']:.1f}% of a {args.step_ms} ms step")
    harness.write_json(args.json, result)


if __name__ == "__main__":
    main()
