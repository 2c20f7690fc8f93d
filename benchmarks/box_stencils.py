"""The flow's face operators on a periodic box of n^3 equal cells: each
product by the box's stencils (gpu_mats.box_faces) against the same
product by the loop's SELL copies (-flow_box_stencils 0), and the CFL
number's rate and maximum (FlowMatrices.largest_speed_rate), GPU time
(cupyx.profiler.benchmark, median of --repeats) of each call captured in a
CUDA graph and replayed, as the flow's step runs it (--launched: launched
from Python, the host's launch time in the GPU's gaps), and the bytes the
stencil must move at least (its vectors once) as a bandwidth.

    python benchmarks/box_stencils.py --sizes 128 256 --json box-stencils.json
"""

import argparse
import functools
import sys

import petsc4py

petsc4py.init(sys.argv[:1])

import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
import plugin  # noqa: E402,F401
from gpu_mats.kernels import family  # noqa: E402
from petsc_ext.options import option_defaults  # noqa: E402
from plugin.flow.matrices import STENCILS  # noqa: E402
from plugin.flow.solver import FlowSolver  # noqa: E402

# name -> (input kind, output kind, with z): kinds "cells", "faces", "velocity" (dim x cells)
CALLS = {"Gamma": ("velocity", "faces", False), "Ms": ("faces", "cells", True), "Gs": ("cells", "faces", True),
         "G": ("cells", "velocity", False), "flux_rate": ("faces", "cells", False),
         "C": ("velocity", "velocity", False), "K": ("velocity", "velocity", True)}


def solver_on(n, stencils):
    da = PETSc.DMDA().create([n] * 3, boundary_type=("periodic",) * 3, stencil_width=1, comm=PETSc.COMM_SELF)
    da.setMatType("gpusell")
    with option_defaults("", {"flow_box_stencils": stencils, "flow_max_steps": 0}):
        return FlowSolver.from_dmda(da, (2 * numpy.pi,) * 3, 1.0 / 1600)


def gpu_ms(fn, repeats, launched):
    """The median GPU time of fn's work, replayed as one CUDA graph (run once first: its kernels compiled) or
    launched by fn where ``launched``."""
    from cupyx.profiler import benchmark

    from gpu_mats.kernels.cuda_graphs import capture, replay

    if not launched:
        fn()
        graph = capture(fn)
        fn = functools.partial(replay, graph)
    return float(numpy.median(benchmark(lambda: fn(), (), n_repeat=repeats, n_warmup=3).gpu_times)) * 1e3


def main():
    import cupy

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--blocks", nargs="+", default=[], help="the stencils' block shapes to time too, as "
                        "64x2 (cells along x and y; the box family's BLOCK)")
    parser.add_argument("--planes", type=int, nargs="+", default=[], help="the CFL kernel's cells a thread along z "
                        "to time too (the box family's PLANES, one of its PLANES_CHOICES)")
    parser.add_argument("--no-matrices", action="store_true", help="the stencils only")
    parser.add_argument("--launched", action="store_true", help="time the calls launched from Python, not "
                        "replayed as CUDA graphs")
    parser.add_argument("--json")
    parser.add_argument("--commit")
    args = parser.parse_args()
    assert set(CALLS) == set(STENCILS)
    payload = {**harness.metadata(args.commit), "timing": "launched" if args.launched else "CUDA graph replays",
               "rows": []}
    kernels = family("box", cupy)
    default = kernels.BLOCK
    variants = [(True, default)] + [(True, tuple(int(v) for v in b.split("x"))) for b in args.blocks]
    variants += [] if args.no_matrices else [(False, None)]
    for n in args.sizes:
        for stencils, block in variants:
            kernels.BLOCK = block or default
            solver = solver_on(n, stencils)
            m, cells, faces = solver.matrices, solver.geometry.num_cells, solver.operators.num_faces
            sizes = {"cells": cells, "faces": faces, "velocity": 3 * cells}
            m.refresh_convection(cupy.ones(faces))
            for name, (given, made, with_z) in CALLS.items():
                x, y = cupy.ones(sizes[given]), cupy.zeros(sizes[made])
                if name in ("C", "K"):  # as the step calls them: every component a row
                    x, y = x.reshape(3, cells), y.reshape(3, cells)
                arguments = (x, y, y) if with_z else (x, y)
                operator = getattr(m, name)

                ms = gpu_ms(functools.partial(operator, *arguments), args.repeats, args.launched)
                least = 8 * (sizes[given] + sizes[made] * (2 if with_z else 1))  # each vector once
                payload["rows"].append({"n": n, "operator": name, "stencils": stencils,
                                        "block": "x".join(map(str, block)) if block else None, "ms": ms,
                                        "least_GB_per_s": least / ms * 1e-6})
                harness.write_json(args.json, payload, quiet=True)
            out, cells_scratch, faces_scratch = cupy.zeros(1), cupy.zeros(cells), cupy.zeros(faces)
            partials = cupy.zeros(family("blas", cupy).reduction_slots(cells))
            speeds = cupy.ones(faces)

            def largest():
                m.largest_speed_rate(speeds, out, cells_scratch, faces_scratch, partials)

            default_planes = kernels.PLANES
            for planes in [default_planes] + (args.planes if stencils else []):
                kernels.PLANES = planes
                ms = gpu_ms(largest, args.repeats, args.launched)
                payload["rows"].append({"n": n, "operator": f"CFL rate and max ({planes} planes)",
                                        "stencils": stencils, "block": "x".join(map(str, block)) if block else None,
                                        "ms": ms, "least_GB_per_s": 8 * faces / ms * 1e-6})
                harness.write_json(args.json, payload, quiet=True)
            kernels.PLANES = default_planes
            solver.destroy()
            del solver, m
            cupy.get_default_memory_pool().free_all_blocks()
    harness.print_table(payload["rows"], [("n", "n", "{}"), ("operator", "operator", "{}"),
                                          ("stencils", "stencils", "{}"), ("block", "block", "{}"),
                                          ("ms", "ms", "{:.3f}"),
                                          ("least_GB_per_s", "GB/s (least bytes)", "{:.0f}")])
    harness.write_json(args.json, payload)


if __name__ == "__main__":
    main()
