"""Time of one gpuamg cycle on the GPU, apart from any Krylov method: each
variant's hierarchy of the 7-point Dirichlet Laplacian, its cycle launched
kernel by kernel from Python and replayed as one CUDA graph, timed by CUDA
events over --repeats applications after a warm-up one.

    python benchmarks/amg_cycles.py --size 256 --json amg-cycles.json

Variants are AggregationAMG keyword sets (--variant 'name={"cycle": "k"}',
repeatable; default: VARIANTS), and "rows_per_thread" for the SELL kernels
of the variant's value type (gpu_mats.kernels.sell.cuda.TUNING). --breakdown also times each operation of an
eager cycle (CUDA events around every kernel, by level) with the bytes it
must move at least and the bandwidth that makes: where the cycle falls short
of the memory's speed.
"""

import argparse
import collections
import json

import cupy
import numpy

import harness
from gpu_mats.amg import AggregationAMG
from gpu_mats.kernels.cuda_graphs import capture, replay
from gpu_mats.kernels.sell import cuda as sell_cuda
from stencils import laplacian

VARIANTS = {
    "V-cycle": {},
    "K-cycle": {"cycle": "k"},
    "K-cycle, unsmoothed pairwise": {"cycle": "k", "smoothed": False, "aggregation": "pairwise"},
    "V-cycle, unsmoothed pairwise": {"smoothed": False, "aggregation": "pairwise"},
}


def milliseconds(fn, repeats):
    """GPU milliseconds per call of fn (CUDA events), after one untimed call."""
    fn()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / repeats


class Breakdown:
    """CUDA events around every operation the cycle of ``amg`` launches,
    added up per (level, operation) with the bytes each must read and write
    at least (matrix arrays once, vectors once). Installed on the instance:
    its products, smoothing kernels, restrictions and coarsest solve."""

    def __init__(self, amg):
        self.level_of = {level.A.shape[0]: k for k, level in enumerate(amg.levels)}
        self.pending, self.totals = [], collections.defaultdict(lambda: [0, 0.0, 0])
        product = amg._product

        def timed_product(A, halo, x, y, alpha=1.0, beta=0.0, z=None):
            name = "A x" if A.shape[0] == A.shape[1] else "P x (prolongation)"
            moved = A.nbytes + x.itemsize * (x.size + y.size + (y.size if beta else 0))
            self._time(self.level_of[y.size], name, moved, lambda: product(A, halo, x, y, alpha, beta, z))

        amg._product = timed_product
        # per timed kernel: (rows of its level, operation, bytes moved) from its arguments
        amg._kernels = _Timed(self, amg._kernels, {
            "chebyshev_step": lambda x, d, r, scaling, a, c: (x.size, "first smoothing step",
                                                             x.nbytes * (5 + (a != 0))),
            "chebyshev_start": lambda x, d, r, scaling, c: (x.size, "first smoothing step", 4 * x.nbytes),
            "matvec": lambda y, A, x: (y.size, "coarsest dense solve", A.nbytes + x.nbytes + y.nbytes)})
        for level in amg.levels:
            if level.R is not None:
                level.R = _TimedRestriction(self, level.R)
            smoothed = level.A if level.A_cycle is None else level.A_cycle  # SELL, a warp-per-row copy or a stencil
            smoothed.chebyshev_step = self._timed_step(smoothed)

    def _timed_step(self, A):
        step = A.chebyshev_step

        def timed(d, d_next, r, z, scaling, x, a, c):
            self._time(self.level_of[x.size], "fused smoothing step", A.nbytes + 7 * x.nbytes,
                       lambda: step(d, d_next, r, z, scaling, x, a, c))

        return timed

    def _time(self, level, name, moved, fn):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        self.pending.append(((level, name), moved, start, end))

    def collect(self):
        """Add the operations timed since the last call into ``totals``."""
        for key, moved, start, end in self.pending:
            end.synchronize()
            total = self.totals[key]
            total[0] += 1
            total[1] += cupy.cuda.get_elapsed_time(start, end)
            total[2] += moved
        self.pending = []

    def rows(self, cycles):
        """Per (level, operation): calls, ms and GB moved per cycle, GB/s."""
        return [{"level": level, "operation": name, "calls": calls / cycles, "ms": ms / cycles,
                 "GB": moved / cycles / 1e9, "GB/s": moved / (ms * 1e-3) / 1e9 if ms else 0.0}
                for (level, name), (calls, ms, moved) in sorted(self.totals.items())]


class _Timed:
    """A kernel family whose functions named in ``costs`` are timed by a Breakdown."""

    def __init__(self, breakdown, kernels, costs):
        self._breakdown, self._kernels, self._costs = breakdown, kernels, costs

    def __getattr__(self, name):
        function = getattr(self._kernels, name)
        if name not in self._costs:
            return function

        def timed(*args):
            rows, label, moved = self._costs[name](*args)
            self._breakdown._time(self._breakdown.level_of[rows], label, moved, lambda: function(*args))

        return timed


class _TimedRestriction:
    def __init__(self, breakdown, R):
        self._breakdown, self._R, self.shape = breakdown, R, R.shape

    def multiply(self, x, y):
        moved = self._R.nbytes + x.nbytes + y.nbytes
        self._breakdown._time(self._breakdown.level_of[x.size], "R r (restriction)", moved,
                              lambda: self._R.multiply(x, y))


def breakdown_lines(parts):
    """The printed table of ``breakdown``'s rows, a line per (level, operation)."""
    return [f"  level {part['level']} {part['operation']:24s} x{part['calls']:.0f} {part['ms']:8.3f} ms "
            f"{part['GB']:7.3f} GB {part['GB/s']:7.0f} GB/s" for part in parts]


def breakdown(amg, b, x, repeats):
    """Per (level, operation) of the eager cycle: calls, ms, GB and GB/s per cycle (after one untimed cycle)."""
    amg.apply(b, x)
    timer = Breakdown(amg)
    for _ in range(repeats):
        amg.apply(b, x)
        timer.collect()
    return timer.rows(repeats)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--variant", action="append", help='name={"keyword": value, ...}')
    parser.add_argument("--breakdown", action="store_true", help="time each operation of the eager cycle")
    parser.add_argument("--json")
    parser.add_argument("--commit")
    args = parser.parse_args()
    variants = dict(v.split("=", 1) for v in args.variant) if args.variant else None
    variants = {name: json.loads(kw) for name, kw in variants.items()} if variants else VARIANTS

    meta = harness.metadata(args.commit)
    n = args.size
    csr = [cupy.asarray(a) for a in laplacian(n)]
    rows = []
    for name, keywords in variants.items():
        keywords = dict(keywords)
        tuning = keywords.pop("rows_per_thread", None)  # of the SELL kernels, for the variant's value type
        value_type = numpy.dtype(keywords.get("value_dtype", "float64"))
        chosen = dict(sell_cuda.TUNING[value_type])
        if tuning:
            sell_cuda.TUNING[value_type]["rows_per_thread"] = tuning
        amg = AggregationAMG(*csr, n**3, cupy, **keywords)
        b, x = cupy.ones(n**3), cupy.empty(n**3)
        graph = capture(lambda: amg.apply(b, x))
        rows.append({"variant": name, "levels": [level.A.shape[0] for level in amg.levels],
                     "eager_ms": milliseconds(lambda: amg.apply(b, x), args.repeats),
                     "graph_ms": milliseconds(lambda: replay(graph), args.repeats)})
        print(f"{n}^3 {name}: {len(amg.levels)} levels, eager {rows[-1]['eager_ms']:.3f} ms, "
              f"graph {rows[-1]['graph_ms']:.3f} ms per cycle", flush=True)
        if args.breakdown:
            rows[-1]["breakdown"] = parts = breakdown(amg, b, x, args.repeats)
            print("\n".join(breakdown_lines(parts)))
            print(f"  sum of the operations {sum(part['ms'] for part in parts):.3f} ms", flush=True)
        harness.write_json(args.json, {**meta, "size": n, "results": rows}, quiet=True)
        sell_cuda.TUNING[value_type].update(chosen)


if __name__ == "__main__":
    main()
