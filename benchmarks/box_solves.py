"""One pressure solve on a box, boxfft against gpuamg: the flow driver's
pressure Laplacian of a DMDA box (its two-point compact operator), cells
graded along y by the tanh law (--grading; the turbulent channel's), x and
z periodic or walled (--periodic), a random right-hand side of zero mean,
from x = 0 to rtol 1e-8 of the true residual. Each variant's KSP is set up
once; a solve is timed by the wall clock after a device synchronize
(median of --repeats, after --warmup), on gpusell matrices with CUDA
vectors (given the box's grid).

    python benchmarks/box_solves.py --shape 256 128 256 --grading 2 --json box-solves.json
    python benchmarks/box_solves.py --shape 256 256 256 --periodic xyz --grading 0 --json tg-solves.json
"""

import argparse
import sys

import petsc4py

petsc4py.init(sys.argv[:1])

import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
import plugin  # noqa: E402,F401
from petsc_ext import gpusell  # noqa: E402
from petsc_ext.matrices import aij_from_csr  # noqa: E402
from plugin.flow.box import box_geometry, tanh_widths, uniform_widths  # noqa: E402
from plugin.flow.operators import compact_laplacian  # noqa: E402

SELF = PETSc.COMM_SELF
VARIANTS = {
    "graphcg + boxfft": {"ksp_type": "graphcg", "pc_type": "boxfft"},
    "cg + boxfft": {"ksp_type": "cg", "pc_type": "boxfft"},
    "graphcg + gpuamg": {"ksp_type": "graphcg", "pc_type": "gpuamg", "pc_gpuamg_value_type": "float32",
                         "pc_gpuamg_vector_type": "float32"},
    "graphcg + gpuamg degree 3": {"ksp_type": "graphcg", "pc_type": "gpuamg", "pc_gpuamg_value_type": "float32",
                                  "pc_gpuamg_vector_type": "float32", "pc_gpuamg_degree": 3},
}


def pressure_matrix(shape, periodic, lengths, grading):
    """The gpusell matrix -L of the box (its grid given) and the host CSR."""
    widths = uniform_widths(shape, lengths)
    if grading > 0:
        widths[1] = tanh_widths(shape[1], lengths[1], grading)
    A = (-compact_laplacian(box_geometry(shape, lengths, periodic, widths=widths))).tocsr()
    A.sort_indices()
    P = aij_from_csr(A.indptr, A.indices, A.data, A.shape, comm=SELF, mat_type="gpusell")
    P.setNullSpace(PETSc.NullSpace().create(constant=True, comm=SELF))
    gpusell.context(P).set_grid(shape, periodic)
    return P, A


def run(name, options, P, A, b, args):
    ksp = harness.krylov_solver(P, f"v{abs(hash(name)) % 10**6}_", options, max_it=500)
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    x = P.createVecRight()
    setup = harness.seconds(ksp.setUp)
    ms = harness.median_solve_ms(ksp, b, x, args.warmup, args.repeats)
    residual = numpy.linalg.norm(b.getArray() - A @ x.getArray()) / numpy.linalg.norm(b.getArray())
    row = {"variant": name, "ms_per_solve": ms, "iterations": ksp.getIterationNumber(),
           "reason": int(ksp.getConvergedReason()), "setup_s": setup, "relative_residual": float(residual)}
    ksp.destroy()
    x.destroy()
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", type=int, nargs=3, default=[256, 128, 256])
    parser.add_argument("--periodic", default="xz", help="the periodic axes among x, y, z")
    parser.add_argument("--lengths", type=float, nargs=3, default=[2 * numpy.pi, 2.0, numpy.pi])
    parser.add_argument("--grading", type=float, default=2.0, help="tanh grading along y (0: equal cells)")
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json")
    parser.add_argument("--commit")
    args = parser.parse_args()
    shape, periodic = tuple(args.shape), tuple(axis in args.periodic for axis in "xyz")
    P, A = pressure_matrix(shape, periodic, tuple(args.lengths), args.grading)
    rhs = numpy.random.default_rng(0).standard_normal(A.shape[0])
    b = P.createVecLeft()
    b.setArray(rhs - rhs.mean())
    payload = {**harness.metadata(args.commit), "shape": list(shape), "periodic": args.periodic,
               "grading": args.grading, "rows": []}
    for name in args.variants:
        payload["rows"].append(run(name, VARIANTS[name], P, A, b, args))
        harness.write_json(args.json, payload, quiet=True)  # after every variant: a timeout loses nothing
    harness.print_table(payload["rows"], [("variant", "variant", "{}"), ("ms_per_solve", "ms a solve", "{:.3f}"),
                                          ("iterations", "its", "{}"), ("setup_s", "set-up s", "{:.2f}"),
                                          ("relative_residual", "||b - A x|| / ||b||", "{:.2e}")])
    harness.write_json(args.json, payload)


if __name__ == "__main__":
    main()
