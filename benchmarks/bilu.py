"""wbilu's block ILU(0) on the GPU against PETSc's ilu on BAIJ (one CPU core)
and cuSPARSE's bsrilu02 + bsrsv2: setup, one apply, time per level.

    python benchmarks/bilu.py --sizes 14 19 24 29 64 128 --bs 6 --json bilu.json

The systems are Luo et al. 2015's INCOMP3D-like 7-point block matrices on N^3 grids
(gpu_mats.stencils.block_stencil) with the grid's i+j+k levels. An apply is
both sweeps; each GPU schedule is timed by the wall clock (median of
batches, closed by a device synchronize), so per-level launches pay their
host cost. "per level" is the apply time over the 2 (3N - 2) levels it runs.
Results are checked against PETSc's (relative max difference).
"""

import argparse
import sys

import petsc4py

petsc4py.init([sys.argv[0]])

import cupy  # noqa: E402
import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
from gpu_mats.block_ilu import BlockILU, grid_levels  # noqa: E402
from stencils import block_stencil  # noqa: E402
from petsc_ext.matrices import baij_from_bsr  # noqa: E402

SCHEDULES = ("launch", "graph", "persistent")


def measure(n, bs, repeats):
    indptr, indices, blocks = block_stencil(n, bs)
    levels = grid_levels((n, n, n))
    row = {"n": n, "bs": bs, "block_rows": n ** 3, "levels": int(levels.max()) + 1}
    rhs = numpy.random.default_rng(n).standard_normal(n ** 3 * bs)

    A = baij_from_bsr(indptr, indices, blocks, comm=PETSc.COMM_SELF)
    pc = PETSc.PC().create(comm=PETSc.COMM_SELF)
    pc.setType("ilu")
    pc.setOperators(A)
    row["petsc_setup_s"] = harness.seconds(pc.setUp)
    b, x = A.createVecs()
    b.setArray(rhs)
    row["petsc_apply_us"] = harness.wall_us(lambda: pc.apply(b, x), repeats=repeats, batch=3, warmup=1)
    reference = x.getArray().copy()
    scale = numpy.abs(reference).max()

    holder = {}
    row["wbilu_setup_s"] = harness.seconds(lambda: holder.update(f=BlockILU(indptr, indices, blocks, levels, xp=cupy)))
    f = holder["f"]
    row["wbilu_factor_s"] = harness.seconds(lambda: f.factor(cupy.asarray(blocks)))
    db, dx = cupy.asarray(rhs), cupy.empty(rhs.size)
    for schedule in SCHEDULES:
        f.schedule = schedule
        us = harness.wall_us(lambda: f.apply(db, dx), repeats=repeats, batch=10, warmup=2)
        row[f"{schedule}_apply_us"] = us
        row[f"{schedule}_per_level_us"] = us / (2 * f.num_levels)
        row[f"{schedule}_diff"] = float(abs(dx.get() - reference).max() / scale)
    best = min(SCHEDULES, key=lambda s: row[f"{s}_apply_us"])
    row["best"], row["best_apply_us"] = best, row[f"{best}_apply_us"]
    row["x_petsc"] = row["petsc_apply_us"] / row["best_apply_us"]

    try:
        from cusparse_bilu import CusparseBlockILU

        peer = CusparseBlockILU(indptr, indices, blocks)
        row["cusparse_setup_s"] = harness.seconds(peer.factor)
        row["cusparse_apply_us"] = harness.wall_us(lambda: peer.apply(db, dx), repeats=repeats, batch=10, warmup=2)
        row["cusparse_diff"] = float(abs(dx.get() - reference).max() / scale)
        row["x_cusparse"] = row["cusparse_apply_us"] / row["best_apply_us"]
    except (OSError, RuntimeError) as exc:
        row["cusparse"] = f"not reachable: {exc}"
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[14, 19, 24, 29, 64])
    parser.add_argument("--bs", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json")
    args = parser.parse_args()
    measure(4, args.bs, 1)  # compiles the kernels
    rows = []
    for n in args.sizes:
        rows.append(measure(n, args.bs, args.repeats))
        print(rows[-1], flush=True)
    harness.print_table(rows, [("n", "N", "{}"), ("levels", "levels", "{}"),
                               ("petsc_setup_s", "PETSc setup s", "{:.4f}"), ("wbilu_setup_s", "ours s", "{:.4f}"),
                               ("wbilu_factor_s", "factor s", "{:.4f}"), ("petsc_apply_us", "PETSc us", "{:.1f}"),
                               *[(f"{s}_apply_us", f"{s} us", "{:.1f}") for s in SCHEDULES],
                               *[(f"{s}_per_level_us", f"{s}/lvl", "{:.2f}") for s in SCHEDULES],
                               ("cusparse_apply_us", "cuSPARSE us", "{:.1f}"), ("x_petsc", "x PETSc", "{:.1f}"),
                               ("x_cusparse", "x cuSPARSE", "{:.2f}")])
    harness.write_json(args.json, {"meta": harness.metadata(), "rows": rows})


if __name__ == "__main__":
    main()
