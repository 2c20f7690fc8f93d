"""Time of one gpuamg cycle on the GPU, apart from any Krylov method: each
variant's hierarchy of the 7-point Dirichlet Laplacian, its cycle launched
kernel by kernel from Python and replayed as one CUDA graph, timed by CUDA
events over --repeats applications after a warm-up one.

    python benchmarks/amg_cycles.py --size 256 --json amg-cycles.json

Variants are AggregationAMG keyword sets (--variant 'name={"cycle": "k"}',
repeatable; default: VARIANTS).
"""

import argparse
import json

import cupy

import harness
from gpu_mats.amg import AggregationAMG
from gpu_mats.kernels.cuda_graphs import capture, replay
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--variant", action="append", help='name={"keyword": value, ...}')
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
        amg = AggregationAMG(*csr, n**3, cupy, **keywords)
        b, x = cupy.ones(n**3), cupy.empty(n**3)
        graph = capture(lambda: amg.apply(b, x))
        rows.append({"variant": name, "levels": [level.A.shape[0] for level in amg.levels],
                     "eager_ms": milliseconds(lambda: amg.apply(b, x), args.repeats),
                     "graph_ms": milliseconds(lambda: replay(graph), args.repeats)})
        print(f"{n}^3 {name}: {len(amg.levels)} levels, eager {rows[-1]['eager_ms']:.3f} ms, "
              f"graph {rows[-1]['graph_ms']:.3f} ms per cycle", flush=True)
        harness.write_json(args.json, {**meta, "size": n, "results": rows}, quiet=True)


if __name__ == "__main__":
    main()
