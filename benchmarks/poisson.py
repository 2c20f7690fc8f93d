"""Poisson solves on the GPU: CG with the ainv preconditioners and gpuamg
against PETSc's jacobi and gamg, in one run.

    python benchmarks/poisson.py --sizes 128 256 --mesh .bench-data/sphere.xdmf --json poisson.json

Problems: the 7-point Dirichlet Laplacian on n^3 grids with b = 1, and the
two-point-flux Neumann Laplacian of the tetrahedral sphere (constant null
space attached, b random with zero mean). rtol 1e-8. jacobi and ainv run on
gpusell with CUDA vectors, gamg on aijcusparse (its products need PETSc's own
GPU type). Setup (KSPSetUp) and solve (KSPSolve from x = 0, median of
--repeats) are timed apart by the wall clock after a device synchronize,
after a warm-up solve of every method on a small problem (kernels compiled).
"""

import argparse
import sys
import time

import petsc4py

petsc4py.init(sys.argv[:1])

import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
import plugin  # noqa: E402,F401
from stencils import laplacian  # noqa: E402
from petsc_ext.matrices import aij_from_csr  # noqa: E402
from petsc_ext.options import option_defaults  # noqa: E402

SELF = PETSc.COMM_SELF
GPU_AIJ = "aijcusparse" if PETSc.Sys.hasExternalPackage("cuda") else "aij"
METHODS = {
    "jacobi": ("gpusell", {"pc_type": "jacobi"}),
    "gamg": (GPU_AIJ, {"pc_type": "gamg"}),
    "fsai k=1": ("gpusell", {"pc_type": "ainv"}),
    "fsai k=1 f32": ("gpusell", {"pc_type": "ainv", "pc_ainv_value_type": "float32"}),
    "fsai k=2": ("gpusell", {"pc_type": "ainv", "pc_ainv_levels": 2}),
    "fsai k=2 f32": ("gpusell", {"pc_type": "ainv", "pc_ainv_levels": 2, "pc_ainv_value_type": "float32"}),
    "spai": ("gpusell", {"pc_type": "ainv", "pc_ainv_type": "spai"}),
    "chebyshev d=4": ("gpusell", {"pc_type": "ainv", "pc_ainv_type": "chebyshev", "pc_ainv_degree": 4}),
    "chebyshev d=8": ("gpusell", {"pc_type": "ainv", "pc_ainv_type": "chebyshev", "pc_ainv_degree": 8}),
    "gpuamg": ("gpusell", {"pc_type": "gpuamg"}),
    # the stopping test of hypre's PCG (benchmarks/hypre_ij.py): the residual's 2-norm against b's
    "gpuamg unpreconditioned": ("gpusell", {"pc_type": "gpuamg", "ksp_norm_type": "unpreconditioned"}),
    "gpuamg f32": ("gpusell", {"pc_type": "gpuamg", "pc_gpuamg_value_type": "float32"}),
    "gpuamg sparsified": ("gpusell", {"pc_type": "gpuamg", "pc_gpuamg_sparsify": 0.2}),
    "gpuamg f32 sparsified": ("gpusell", {"pc_type": "gpuamg", "pc_gpuamg_value_type": "float32",
                                          "pc_gpuamg_sparsify": 0.2}),
    "cacg + gpuamg": ("gpusell", {"ksp_type": "cacg", "pc_type": "gpuamg"}),
    "gpuamg unsmoothed pairwise": ("gpusell", {"pc_type": "gpuamg", "pc_gpuamg_smoothed": False,
                                               "pc_gpuamg_aggregation": "pairwise"}),
    "fcg + gpuamg k-cycle unsmoothed pairwise": ("gpusell", {"ksp_type": "fcg", "pc_type": "gpuamg",
                                                             "pc_gpuamg_cycle": "k", "pc_gpuamg_smoothed": False,
                                                             "pc_gpuamg_aggregation": "pairwise"}),
    "fcg + gpuamg k-cycle": ("gpusell", {"ksp_type": "fcg", "pc_type": "gpuamg", "pc_gpuamg_cycle": "k"}),
    "gpuamg l1jacobi": ("gpusell", {"pc_type": "gpuamg", "pc_gpuamg_smoother": "l1jacobi"}),
    "gpuamg degree 3": ("gpusell", {"pc_type": "gpuamg", "pc_gpuamg_degree": 3}),
    "gpuamg mis2 pairs 1": ("gpusell", {"pc_type": "gpuamg", "pc_gpuamg_mis2_pairs": 1}),
    "gpuamg f32 mis2 pairs 1": ("gpusell", {"pc_type": "gpuamg", "pc_gpuamg_mis2_pairs": 1,
                                            "pc_gpuamg_value_type": "float32"}),
}


def run(csr, n, method, repeats, nullspace=False, rhs=None, resetup=False):
    mat_type, options = METHODS[method]
    A = aij_from_csr(*csr, (n, n), comm=SELF, mat_type=mat_type)
    if nullspace:
        A.setNullSpace(PETSc.NullSpace().create(constant=True, comm=SELF))
    ksp = PETSc.KSP().create(comm=SELF)
    ksp.setOptionsPrefix("bench_")
    ksp.setOperators(A)
    ksp.setType("cg")
    ksp.setTolerances(rtol=1e-8, max_it=5000)
    with option_defaults("bench_", options):
        ksp.setFromOptions()
    b, x = A.createVecs()
    if rhs is None:
        b.set(1.0)
    else:
        b.setArray(rhs)
    A.mult(b, x)  # the operator's own GPU copy is built here, not in the preconditioner's setup
    setup = harness.seconds(ksp.setUp)
    hierarchy = {}
    if ksp.getPC().getType() == "gpuamg":
        amg = ksp.getPC().getPythonContext().amg
        operator, grid = amg.complexities()
        hierarchy = {"levels": [level.A.shape[0] for level in amg.levels], "operator_complexity": operator,
                     "grid_complexity": grid, "setup_phases": dict(amg.phases)}
    solves = []
    for _ in range(repeats):
        x.set(0.0)
        solves.append(harness.seconds(lambda: ksp.solve(b, x)))
    its, reason = ksp.getIterationNumber(), int(ksp.getConvergedReason())
    r = b.duplicate()
    A.mult(x, r)
    r.aypx(-1.0, b)
    result = {"method": method, "iterations": its, "reason": reason, "setup_s": setup,
              "solve_s": float(numpy.median(solves)), "true_rel_residual": r.norm() / b.norm(), **hierarchy}
    result["us_per_iteration"] = result["solve_s"] / max(its, 1) * 1e6
    result["setup_plus_10_solves_s"] = setup + 10 * result["solve_s"]
    if resetup and ksp.getPC().getType() == "gpuamg":  # new values on the same pattern (A scaled in place)
        A.scale(2.0)
        A.mult(b, x)  # the matrix's own copy takes the new values here, not in the preconditioner's set-up
        result["resetup_s"] = harness.seconds(ksp.getPC().setUp)
        x.set(0.0)
        ksp.solve(b, x)
        result["resetup_iterations"] = ksp.getIterationNumber()
        result["resetup_phases"] = dict(ksp.getPC().getPythonContext().amg.phases)
    ksp.destroy()
    A.destroy()
    return result


def problems(args):
    for n in args.sizes:
        yield f"7-point {n}^3 Dirichlet", laplacian(n), n**3, False, None
    if args.mesh:
        csr = harness.mesh_laplacian(args.mesh)
        rows = csr[0].size - 1
        rhs = numpy.random.default_rng(0).standard_normal(rows)
        yield "tet sphere Neumann", csr, rows, True, rhs - rhs.mean()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[128, 256])
    parser.add_argument("--mesh", help="tetrahedral sphere mesh (benchmarks/sphere_mesh.py)")
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--resetup", action="store_true",
                        help="then scale A in place and time gpuamg's set-up for the new values (gamg's, on "
                        "aijcusparse, did not finish in 9 minutes at 64^3)")
    parser.add_argument("--json")
    parser.add_argument("--commit")
    args = parser.parse_args()

    meta = harness.metadata(args.commit)
    print(f"{meta['device']}, {meta['date']}, commit {meta['commit']}", flush=True)
    start = time.perf_counter()
    for method in args.methods:  # warm-up: compile every kernel on a small problem
        run(laplacian(16), 16**3, method, 1, resetup=args.resetup)
    print(f"[{time.perf_counter() - start:6.1f} s] warm-up done", flush=True)
    rows = []
    for name, csr, n, nullspace, rhs in problems(args):
        for method in args.methods:
            result = {"problem": name, "rows": n, **run(csr, n, method, args.repeats, nullspace, rhs,
                                                         args.resetup)}
            rows.append(result)
            print(f"[{time.perf_counter() - start:6.1f} s] {name}: {method}: {result['iterations']} its, "
                  f"setup {result['setup_s']:.3f} s, solve {result['solve_s']:.4f} s, reason {result['reason']}"
                  + (f", re-setup {result['resetup_s']:.3f} s ({result['resetup_iterations']} its)"
                     if "resetup_s" in result else ""),
                  flush=True)
            harness.write_json(args.json, {**meta, "results": rows}, quiet=True)  # partial results survive a kill
    print()
    harness.print_table(rows, [("problem", "problem", "{}"), ("method", "method", "{}"),
                               ("iterations", "its", "{}"), ("setup_s", "setup s", "{:.3f}"),
                               ("solve_s", "solve s", "{:.4f}"), ("us_per_iteration", "us/it", "{:.0f}"),
                               ("setup_plus_10_solves_s", "setup+10 solves s", "{:.2f}"),
                               ("true_rel_residual", "|b-Ax|/|b|", "{:.1e}")])
    harness.write_json(args.json, {**meta, "results": rows})


if __name__ == "__main__":
    main()
