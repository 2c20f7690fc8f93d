"""Weak and strong scaling across ranks, one GPU per rank (issue 21): the
SpMV (gpusell, and a peer type's MatMult with PETSc's own halo exchange),
CG with jacobi, cacg with s = 8 and 12, CG and graphcg with gpuamg, and a
step of the 3D lid-driven cavity, on a box split in 3D among the ranks.

    mpiexec -n 8 python benchmarks/scaling.py --weak 128 256 --json weak-8.json
    mpiexec -n 8 python benchmarks/scaling.py --strong 512 --json strong-8.json
    mpiexec -n 8 python benchmarks/scaling.py --mesh cube110.msh --json tets-8.json   # 7,986,000 tetrahedra
    python benchmarks/scaling.py --report weak-*.json strong-*.json --png scaling.png

--weak n: n^3 cells per rank, the grid n * dims with dims = MPI_Dims_create(ranks, 3);
--strong n: n^3 cells in all; --mesh FILE: the cavity on an unstructured mesh
with groups "lid" and "wall" (benchmarks/cube_mesh.py's tetrahedra, cut
among the ranks by pymetis), a strong scaling. Every matrix is the cavity's pressure matrix
(the flow driver's -L, all walls: the constant null space attached), b = A x
for a random x, x0 = 0, rtol 1e-8; time per iteration is the solve's time
over its iterations (CG-equivalent ones for cacg). The flow step is the
driver's own per-step time after --warmup steps. For the SpMV the parts of
gpusell's product are timed alone as well (CUDA events on a GPU, the wall
clock on the host; the slowest rank's) and the fraction of the halo time
hidden behind the owned-column product is
(t_inner + t_halo + t_outer - t_whole) / t_halo, as Oyarzún (2015, ch. 2)
measures it. --report reads the JSON of runs on several rank counts and
prints the efficiencies: weak t(p_min) / t(p); strong t(p_min) p_min / (t(p) p).
A JSON file is written after every case, so a run cut short keeps what it measured.
"""

import argparse
import glob
import json
import os
import sys
import time

import petsc4py

ARGS, PETSC_ARGS = (sys.argv[1:sys.argv.index("--")], sys.argv[sys.argv.index("--") + 1:]) \
    if "--" in sys.argv else (sys.argv[1:], [])
petsc4py.init([sys.argv[0], *PETSC_ARGS])

import numpy  # noqa: E402
from mpi4py import MPI  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
import plugin  # noqa: E402,F401
from petsc_ext.gpusell import context  # noqa: E402
from petsc_ext.matrices import aij_from_rows  # noqa: E402
from petsc_ext.options import option_defaults  # noqa: E402
from plugin.flow.boundary import Wall  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402
from plugin.flow.solver import FlowSolver  # noqa: E402

LID = {"xmax": Wall((0.0, 1.0, 0.0))}
SOLVERS = {"cg + jacobi": {"ksp_type": "cg", "pc_type": "jacobi"},
           "cacg s=8 + jacobi": {"ksp_type": "cacg", "ksp_cacg_s": 8, "pc_type": "jacobi"},
           "cacg s=12 + jacobi": {"ksp_type": "cacg", "ksp_cacg_s": 12, "pc_type": "jacobi"},
           "cg + gpuamg": {"ksp_type": "cg", "pc_type": "gpuamg"},
           "graphcg + gpuamg": {"ksp_type": "graphcg", "pc_type": "gpuamg"}}
CASES = ("spmv", *SOLVERS, "flow step")


def box(comm, mode, n):
    """The cavity's DMDA: n^3 cells a rank (weak) or in all (strong), split in 3D."""
    dims = MPI.Compute_dims(comm.getSize(), 3)
    sizes = tuple(n * d for d in dims) if mode == "weak" else (n, n, n)
    da = PETSc.DMDA().create(dim=3, sizes=sizes, proc_sizes=dims, stencil_width=1, setup=False, comm=comm)
    da.setMatType("gpusell")
    da.setFromOptions()
    da.setUp()
    return da, dims


def slowest(comm, value):
    return comm.tompi4py().allreduce(value, op=MPI.MAX)


def spmv(A, peer_type, repeats):
    """us per product of gpusell and of the peer type; gpusell's parts, halo bytes and hidden fraction."""
    comm = A.getComm()
    timer = harness.event_us if harness.cupy is not None and context(A).on_gpu else harness.wall_us
    x, y = A.createVecs()
    x.setRandom()
    row = {"gpusell_us": slowest(comm, harness.wall_us(lambda: A.mult(x, y), repeats=repeats))}
    if peer_type:
        peer = aij_from_rows(*A.getValuesCSR(), A.getLocalSize()[1], comm, peer_type)
        px, py = peer.createVecs()
        x.copy(px)
        row["peer"] = peer.getType()
        row["peer_us"] = slowest(comm, harness.wall_us(lambda: peer.mult(px, py), repeats=repeats))
        peer.destroy()
    if comm.getSize() > 1:
        from petsc_ext.arrays import get_array, restore_array

        rows = A.getLocalSize()[0]
        xa, ya = get_array(x, "r", rows), get_array(y, "w", rows)
        try:
            parts, halo_bytes = context(A).product_parts(xa, ya)
            times = {name: slowest(comm, timer(part, repeats=repeats)) for name, part in parts.items()}
        finally:
            restore_array(y, "w")
            restore_array(x, "r")
        hidden = (times["inner"] + times["halo"] + times["outer"] - times["whole"]) / times["halo"]
        row.update({f"{name}_us": t for name, t in times.items()},
                   halo_bytes_per_rank=slowest(comm, halo_bytes), hidden_fraction=min(max(hidden, 0.0), 1.0))
    return row


def solve(A, options, repeats):
    """Seconds and iterations of one solve to rtol 1e-8 (the median of ``repeats`` after a warm-up)."""
    ksp = harness.krylov_solver(A, "scaling_", options, max_it=10000)
    b, x = A.createVecs()
    x.setRandom()
    A.getNullSpace().remove(x)
    A.mult(x, b)
    seconds = []
    for _ in range(repeats + 1):
        x.set(0.0)
        seconds.append(harness.seconds(lambda: ksp.solve(b, x)))
    its, reason = ksp.getIterationNumber(), int(ksp.getConvergedReason())
    ksp.destroy()
    seconds = float(numpy.median(seconds[1:]))
    return {"iterations": its, "reason": reason, "solve_s": seconds, "us_per_iteration": 1e6 * seconds / max(its, 1)}


def measure_box(comm, mode, n, warmup, *rest):
    """Each case on the box of ``mode`` and n."""
    da, dims = box(comm, mode, n)
    with option_defaults("", {"flow_t_end": 1e9, "flow_max_steps": warmup}):
        solver = FlowSolver.from_dmda(da, (1.0, 1.0, 1.0), 1e-3, LID)
    common = {"mode": mode, "n": n, "cells": solver.geometry.num_global_cells, "ranks": comm.getSize(),
              "dims": list(dims)}
    measure(solver, common, *rest)
    da.destroy()


def measure_mesh(comm, path, warmup, *rest):
    """Each case on the cavity of the mesh at ``path`` (groups lid and wall), cut by pymetis."""
    parts = distribute(path, comm.tompi4py(), "metis")
    dim = parts.geometry.dim
    lid = {"lid": Wall(tuple(numpy.eye(dim)[0])), "wall": Wall()}
    with option_defaults("", {"flow_t_end": 1e9, "flow_max_steps": warmup}):
        solver = FlowSolver(parts.geometry, comm, "gpusell", 1e-3, lid)
    common = {"mode": "mesh", "n": os.path.basename(path), "cells": solver.geometry.num_global_cells,
              "ranks": comm.getSize(), "faces_cut": parts.faces_cut}
    measure(solver, common, *rest)


def measure(solver, common, cases, peer_type, steps, repeats, record):
    """Each case with the flow ``solver``'s pressure matrix and steps; ``record(row)`` after every case."""
    A = solver.matrices.poisson
    A.setNullSpace(PETSc.NullSpace().create(constant=True, comm=A.getComm()))
    for case in cases:
        start = time.perf_counter()
        if case == "spmv":
            row = spmv(A, peer_type, repeats)
            row["seconds"] = row["gpusell_us"] * 1e-6
        elif case == "flow step":
            state = solver.run(solver.initial_state())
            solver.reset_timing()
            solver.max_steps = steps
            solver.run(state)
            timing = solver.timing()
            row = {"seconds": timing["seconds_per_step"], "pressure_its": timing["pressure_iterations_per_step"],
                   "mcell_steps_per_s": timing["million_cell_steps_per_second"]}
        else:
            row = solve(A, SOLVERS[case], repeats)
            row["seconds"] = row["us_per_iteration"] * 1e-6
        record({**common, "case": case, **row, "wall_s": time.perf_counter() - start})
    solver.destroy()


def efficiencies(rows):
    """Rows (of several runs) with their efficiency against the fewest ranks of the same mode, n and case."""
    out = []
    for row in rows:
        same = [r for r in rows if (r["mode"], r["n"], r["case"]) == (row["mode"], row["n"], row["case"])]
        base = min(same, key=lambda r: r["ranks"])
        ratio = base["seconds"] / row["seconds"]
        out.append({**row, "efficiency": ratio if row["mode"] == "weak" else ratio * base["ranks"] / row["ranks"]})
    return sorted(out, key=lambda r: (r["mode"], str(r["n"]), r["case"], r["ranks"]))


def report(paths, png):
    rows = [row for path in paths for name in sorted(glob.glob(path)) for row in json.load(open(name))["results"]]
    rows = efficiencies(rows)
    harness.print_table(rows, [("mode", "mode", "{}"), ("n", "n", "{}"), ("case", "case", "{}"),
                               ("ranks", "ranks", "{}"), ("seconds", "s (per op)", "{:.3e}"),
                               ("efficiency", "efficiency", "{:.3f}"), ("halo_bytes_per_rank", "halo B/rank", "{}"),
                               ("hidden_fraction", "hidden", "{:.2f}")])
    if png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(1, 3, figsize=(14, 4), sharey=True)
        for ax, mode in zip(axes, ("weak", "strong", "mesh")):
            for key in sorted({(r["n"], r["case"]) for r in rows if r["mode"] == mode}):
                line = [r for r in rows if r["mode"] == mode and (r["n"], r["case"]) == key]
                ax.plot([r["ranks"] for r in line], [r["efficiency"] for r in line], "o-", label=f"{key[1]}, n {key[0]}")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("GPUs (ranks)")
            ax.set_title("strong scaling, tetrahedra" if mode == "mesh" else f"{mode} scaling")
            ax.legend(fontsize=7)
        axes[0].set_ylabel("parallel efficiency")
        figure.tight_layout()
        figure.savefig(png, dpi=120)
        print(f"wrote {png}")
    return rows


def main(argv=None, comm=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weak", type=int, nargs="*", default=[], help="n: n^3 cells per rank")
    parser.add_argument("--strong", type=int, nargs="*", default=[], help="n: n^3 cells in all")
    parser.add_argument("--mesh", nargs="*", default=[], help="unstructured cavities (groups lid and wall)")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    parser.add_argument("--peer-mat", default="", help="the SpMV's peer type (aijcusparse on a GPU; '' for none)")
    parser.add_argument("--warmup", type=int, default=10, help="flow steps before the timed ones")
    parser.add_argument("--steps", type=int, default=20, help="timed flow steps")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    parser.add_argument("--commit")
    parser.add_argument("--report", nargs="*", help="JSON files (globs) of earlier runs: print the efficiencies")
    parser.add_argument("--png", help="with --report: plot the efficiency against the rank count")
    args = parser.parse_args(ARGS if argv is None else argv)
    if args.report:
        return report(args.report, args.png)
    comm = comm or PETSc.COMM_WORLD
    rank = comm.getRank()
    meta = {**harness.metadata(args.commit), "ranks": comm.getSize()}
    rows = []

    def record(row):
        rows.append(row)
        if rank == 0:
            print(" ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
            harness.write_json(args.json, {**meta, "results": rows}, quiet=True)

    rest = (args.cases, args.peer_mat, args.steps, args.repeats, record)
    for mode, sizes in (("weak", args.weak), ("strong", args.strong)):
        for n in sizes:
            measure_box(comm, mode, n, args.warmup, *rest)
    for path in args.mesh:
        measure_mesh(comm, path, args.warmup, *rest)
    return rows


if __name__ == "__main__":
    main()
