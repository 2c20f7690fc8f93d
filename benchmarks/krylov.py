"""Time per CG-equivalent iteration: cacg (s = 4, 8, 12) and graphcg (its
loop the device ends, its adaptive blocks, and blocks of 8; on the unpreconditioned norm, with and
without Chronopoulos and Gear's single reduction) against PETSc's cg and pipecg, with
jacobi and ainv (gpuamg with --pcs), on gpusell with CUDA vectors; cg and pipecg also on
PETSc's own GPU matrix (--peer-mat, default aijcusparse).

    python benchmarks/krylov.py --sizes 64 128 256 --json krylov.json
    mpiexec -n 2 python benchmarks/krylov.py --sizes 64 --json krylov2.json   # one GPU per rank

Problem: the 7-point Dirichlet Laplacian on an n x n x (n * ranks) grid, so
each rank holds n^3 rows; b = 1, x = 0, rtol 1e-8 (cg and pipecg in their
default norm, cacg in the unpreconditioned one; graphcg in cg's). Each solve is timed by the
wall clock between device synchronizes and barriers, after a warm-up solve;
median of --repeats.
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
from stencils import stencil_csr  # noqa: E402
from petsc_ext.matrices import aij_from_csr  # noqa: E402

COMM = PETSc.COMM_WORLD
METHODS = {"cg": {"ksp_type": "cg"}, "pipecg": {"ksp_type": "pipecg"}}
METHODS.update({f"cacg s={s}": {"ksp_type": "cacg", "ksp_cacg_s": s} for s in (4, 8, 12)})
METHODS.update({"graphcg": {"ksp_type": "graphcg"}, "graphcg blocks": {"ksp_type": "graphcg", "ksp_graphcg_loop": 0},
                "graphcg block 8": {"ksp_type": "graphcg", "ksp_graphcg_block": 8},
                "graphcg unpreconditioned": {"ksp_type": "graphcg", "ksp_norm_type": "unpreconditioned"},
                "graphcg single reduction": {"ksp_type": "graphcg", "ksp_norm_type": "unpreconditioned",
                                             "ksp_graphcg_single_reduction": 1}})
OURS = ("cacg", "graphcg")  # the project's KSPs: on gpusell only
PCS = {"jacobi": {"pc_type": "jacobi"}, "ainv": {"pc_type": "ainv"}, "gpuamg": {"pc_type": "gpuamg"}}
STAR = [(0, 0, 0), (-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1)]


def timed(fn):
    harness.sync()
    COMM.tompi4py().Barrier()
    start = time.perf_counter()
    fn()
    harness.sync()
    COMM.tompi4py().Barrier()
    return time.perf_counter() - start


def run(A, options, repeats):
    ksp = harness.krylov_solver(A, "kry_", options, max_it=5000)
    b, x = A.createVecs()
    b.set(1.0)
    ksp.setUp()
    ksp.solve(b, x)  # warm-up
    seconds = []
    for _ in range(repeats):
        x.set(0.0)
        seconds.append(timed(lambda: ksp.solve(b, x)))
    its = ksp.getIterationNumber()
    result = {"iterations": its, "reason": int(ksp.getConvergedReason()), "solve_s": float(numpy.median(seconds))}
    result["us_per_iteration"] = result["solve_s"] / max(its, 1) * 1e6
    if ksp.getType() == "cacg":
        result["reductions"] = ksp.getPythonContext().getReductionCount()
    ksp.destroy()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[64, 128, 256], help="n: n^3 rows per rank")
    parser.add_argument("--pcs", nargs="*", default=["jacobi", "ainv"])
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peer-mat", default="aijcusparse",
                        help="also run cg and pipecg on PETSc's own matrix type ('' for none)")
    parser.add_argument("--json")
    parser.add_argument("--commit")
    args = parser.parse_args()
    ranks, rank = COMM.getSize(), COMM.getRank()
    meta = {**harness.metadata(args.commit), "ranks": ranks}
    say = (lambda *a, **k: print(*a, **k, flush=True)) if rank == 0 else (lambda *a, **k: None)
    say(f"{meta['device']} x {ranks} ranks, {meta['date']}, commit {meta['commit']}")
    rows = []
    for n in args.sizes:
        shape = (n, n, n * ranks)
        csr = stencil_csr(shape, STAR, [6.0] + [-1.0] * 6)
        for mat_type in ["gpusell"] + ([args.peer_mat] if args.peer_mat else []):
            A = aij_from_csr(*csr, (n**3 * ranks,) * 2, comm=COMM, mat_type=mat_type)
            methods = args.methods if mat_type == "gpusell" else [m for m in args.methods if not m.startswith(OURS)]
            for pc in args.pcs:
                for method in methods:
                    result = {"problem": f"{n}^3 per rank", "rows": n**3 * ranks, "pc": pc, "mat": mat_type,
                              "method": method, **run(A, {**METHODS[method], **PCS[pc]}, args.repeats)}
                    rows.append(result)
                    say(f"{result['problem']} {mat_type} {pc} {method}: {result['iterations']} its, "
                        f"{result['solve_s']:.4f} s, {result['us_per_iteration']:.1f} us/it, reason {result['reason']}")
                    if rank == 0:
                        harness.write_json(args.json, {**meta, "results": rows}, quiet=True)
            A.destroy()
    if rank == 0:
        print()
        harness.print_table(rows, [("problem", "problem", "{}"), ("pc", "pc", "{}"), ("mat", "matrix", "{}"),
                                   ("method", "method", "{}"),
                                   ("iterations", "its", "{}"), ("solve_s", "solve s", "{:.4f}"),
                                   ("us_per_iteration", "us/it", "{:.1f}"), ("reductions", "allreduces", "{}")])
        harness.write_json(args.json, {**meta, "results": rows})


if __name__ == "__main__":
    main()
