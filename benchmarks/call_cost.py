"""The cost of one MatMult call on a small matrix (16^3 7-point Laplacian by
default): gpusell against aijcusparse in the same run, and where gpusell's
time goes, layer by layer down from PETSc's MatMult:

  petsc MatMult        A.mult(x, y) through petsc4py and PETSc's dispatch
  context mult         GpuSellMat.mult on the vector handles (array views, state check)
  arrays product       GpuSellMat.multiply_arrays on CuPy arrays
  spmv                 gpu_mats.spmv (argument checks, family dispatch)
  kernel driver        the SELL family's spmv (the launch itself)

Each row is the median wall time of one call over batches closed by a device
synchronize (harness.wall_us). A cProfile of the MatMult path follows.

    python benchmarks/call_cost.py --n 16 --json call-cost.json
"""

import argparse
import cProfile
import io
import pstats
import sys

import petsc4py

ARGS = sys.argv[1:]
petsc4py.init([sys.argv[0]])

import cupy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
import plugin  # noqa: E402,F401
from gpu_mats import spmv  # noqa: E402
from gpu_mats.kernels import family  # noqa: E402
from petsc_ext import gpusell  # noqa: E402
from petsc_ext.arrays import get_array, restore_array  # noqa: E402
from petsc_ext.matrices import aij_from_csr  # noqa: E402
from stencils import laplacian  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[16])
    parser.add_argument("--json")
    args = parser.parse_args(ARGS)
    rows = []
    for n in args.n:
        csr = laplacian(n)
        mats = {kind: aij_from_csr(*csr, (n**3, n**3), comm=PETSc.COMM_SELF, mat_type=kind)
                for kind in ("aijcusparse", "gpusell")}
        vecs = {kind: mat.createVecs() for kind, mat in mats.items()}
        for x, _ in vecs.values():
            x.setRandom()
        row = {"n": n, "rows": n**3}
        for kind, mat in mats.items():
            x, y = vecs[kind]
            row[f"{kind}_us"] = harness.wall_us(lambda: mat.mult(x, y))
        ctx = gpusell.context(mats["gpusell"])
        x, y = vecs["gpusell"]
        row["context_mult_us"] = harness.wall_us(lambda: ctx.mult(x.handle, y.handle))
        xa, ya = cupy.array(get_array(x, "r")), cupy.empty(n**3)
        restore_array(x, "r")
        row["arrays_product_us"] = harness.wall_us(lambda: ctx.multiply_arrays(xa, ya))
        row["spmv_us"] = harness.wall_us(lambda: spmv(ctx.local, xa, ya))
        driver = family("sell", cupy)
        row["kernel_driver_us"] = harness.wall_us(lambda: driver.spmv(ctx.local, xa, ya, ya, 1.0, 0.0))
        row["ratio_gpusell_to_aijcusparse"] = row["gpusell_us"] / row["aijcusparse_us"]
        rows.append(row)
        harness.write_json(args.json, {"meta": harness.metadata(), "rows": rows}, quiet=True)
        profile = cProfile.Profile()
        A = mats["gpusell"]
        profile.enable()
        for _ in range(2000):
            A.mult(x, y)
        harness.sync()
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(18)
        print(f"--- cProfile of 2000 gpusell MatMult calls at {n}^3 (tottime) ---\n{text.getvalue()}")
    harness.print_table(rows, [("n", "n^3", "{}"), ("aijcusparse_us", "aijcusparse us", "{:.1f}"),
                               ("gpusell_us", "gpusell us", "{:.1f}"), ("context_mult_us", "ctx.mult", "{:.1f}"),
                               ("arrays_product_us", "arrays", "{:.1f}"), ("spmv_us", "spmv", "{:.1f}"),
                               ("kernel_driver_us", "driver", "{:.1f}"),
                               ("ratio_gpusell_to_aijcusparse", "gpusell/aijcusparse", "{:.2f}")])
    harness.write_json(args.json, {"meta": harness.metadata(), "rows": rows})


if __name__ == "__main__":
    main()
