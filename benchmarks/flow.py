"""Time per step of the 3D lid-driven cavity (Vianello 2020's box, Re = 1000) with
the flow driver: the explicit part, the pressure solve (iterations per step),
the correction and the CFL reduction, and million cell-steps per second.
With --mesh, the cavity on a mesh of the unit cube with boundary groups lid
and wall (demos/cavity.py -flow_mesh's, e.g. benchmarks/cube_mesh.py's).

    python benchmarks/flow.py --sizes 128 256 --json flow-gpu.json
    python benchmarks/flow.py --mesh cube70.msh --warmup 20 --steps 40 --json flow-cube70.json
    mpiexec -n 16 python benchmarks/flow.py --sizes 128 --json flow-cpu.json -- \\
        -dm_mat_type aij -pressure_ksp_type cg -pressure_pc_type gamg

PETSc options go after "--" (the CPU reference: PETSc's AIJ matrices and any
KSP/PC). Each size runs --warmup steps from rest (kernel compilation, solver
set-up, the first large pressure solves), then --steps timed steps; the
phase times are wall clock after a device synchronize (the flow driver's own
timer), the slowest rank's.
"""

import argparse
import resource
import sys
import time

import petsc4py

ARGS, PETSC_ARGS = (sys.argv[1:sys.argv.index("--")], sys.argv[sys.argv.index("--") + 1:]) \
    if "--" in sys.argv else (sys.argv[1:], [])
petsc4py.init([sys.argv[0], *PETSC_ARGS])

from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
import plugin  # noqa: E402,F401
from petsc_ext.options import option_defaults  # noqa: E402
from plugin.flow.boundary import Wall  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402
from plugin.flow.solver import FlowSolver, program_mat_type  # noqa: E402

COMM = PETSc.COMM_WORLD
LID = {"xmax": Wall((0.0, 1.0, 0.0))}  # the face x = 1 slides along y


def cycle_breakdown(solver, repeats=5):
    """Where the pressure solve's time goes: one solve of A x = A v (v random)
    from x = 0, against the operator's MatMult and the preconditioner's
    PCApply as the solve calls them (median of ``repeats``), and the gpuamg
    cycle timed operation by operation on the GPU (amg_cycles.breakdown) under gpuamg."""
    import statistics

    import cupy

    import amg_cycles

    ksp = solver.pressure_ksp
    A, pc = ksp.getOperators()[0], ksp.getPC()
    v, b = A.createVecs()
    x = v.duplicate()
    v.setRandom()
    A.mult(v, b)

    def solve():
        x.set(0.0)
        ksp.solve(b, x)

    costs = {name: statistics.median(harness.seconds(fn) for _ in range(repeats)) * 1e3
             for name, fn in (("solve", solve), ("MatMult", lambda: A.mult(v, x)), ("PCApply", lambda: pc.apply(b, x)))}
    costs["iterations"] = its = ksp.getIterationNumber()
    # cg multiplies its + 1 times (the initial residual too); it preconditions as often under the preconditioned
    # norm, but once fewer under the flow's unpreconditioned one, which stops before preconditioning the last residual
    applies = its + 1 if ksp.getNormType() == PETSc.KSP.NormType.PRECONDITIONED else max(its, 1)
    products = (its + 1) * costs["MatMult"] + applies * costs["PCApply"]
    costs["outside_per_iteration"] = (costs["solve"] - products) / max(its, 1)
    PETSc.Sys.Print(f"  pressure solve {costs['solve']:.2f} ms in {its} iterations; MatMult {costs['MatMult']:.3f} ms, "
                    f"PCApply {costs['PCApply']:.3f} ms, the rest {costs['outside_per_iteration']:.3f} ms per iteration")
    if pc.getType() != "gpuamg":  # boxfft: no cycle to take apart
        return costs
    amg = pc.getPythonContext().amg
    rows = amg.levels[0].A.shape[0]
    parts = amg_cycles.breakdown(amg, cupy.ones(rows), cupy.empty(rows), repeats)
    PETSc.Sys.Print("\n".join(amg_cycles.breakdown_lines(parts)))
    PETSc.Sys.Print(f"  one cycle: {sum(part['ms'] for part in parts):.3f} ms ({len(amg.levels)} levels: "
                    f"{[level.A.shape[0] for level in amg.levels]})")
    return {**costs, "cycle": parts}


def box_solver(n, re, warmup):
    """The n^3 box's cavity, and what to destroy with it."""
    da = PETSc.DMDA().create(dim=3, sizes=(n, n, n), stencil_width=1, setup=False)
    da.setMatType("gpusell")
    da.setFromOptions()
    da.setUp()
    with option_defaults("", {"flow_t_end": 1e9, "flow_max_steps": warmup}):
        return FlowSolver.from_dmda(da, (1.0, 1.0, 2.0), 1.0 / re, LID), da


def mesh_solver(path, re, warmup):
    """The cavity on the mesh at ``path`` (its lid slides along x, as demos/cavity.py's)."""
    geometry = distribute(path, COMM.tompi4py(), "metis").geometry
    lid = {"lid": Wall((1.0, 0.0, 0.0)), "wall": Wall()}
    with option_defaults("", {"flow_t_end": 1e9, "flow_max_steps": warmup}):
        return FlowSolver(geometry, COMM, program_mat_type("flow"), 1.0 / re, lid), None


def measure(n, re, warmup, steps, breakdown=False, mesh=None):
    start = time.perf_counter()
    solver, da = mesh_solver(mesh, re, warmup) if mesh else box_solver(n, re, warmup)
    harness.sync()
    setup = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    name = mesh or f"{n}^3"
    PETSc.Sys.Print(f"{name}: set up in {setup:.1f} s ({solver.setup_report()}; {solver.matrices.poisson.getType()}, "
                    f"pressure {solver.pressure_ksp.getType()} + {solver.pressure_ksp.getPC().getType()} from "
                    f"{solver.pressure_start}), peak host "
                    f"memory {peak:.2f} GiB")
    state = solver.run(solver.initial_state())
    solver.print_timing()
    solver.reset_timing()
    solver.max_steps = steps
    state = solver.run(state)
    solver.print_timing()
    timing = solver.timing()
    m = solver.matrices
    types = {"box stencils" if m.stencils is not None else m.mats["Ms"].getType(), m.poisson.getType()}
    row = {"n": n, "case": name, "cells": timing["cells"], "ranks": COMM.getSize(), "mat_type": " / ".join(sorted(types)),
           "pressure": f"{solver.pressure_ksp.getType()} + {solver.pressure_ksp.getPC().getType()}",
           "pressure_start": solver.pressure_start,
           "setup_s": setup, "setup_stages_s": dict(solver.setup_seconds), "peak_host_GiB": peak,
           "warmup_steps": warmup, "steps": timing["steps"], "t": state.t,
           "ms_per_step": 1e3 * timing["seconds_per_step"],
           "ns_per_cell_step": 1e9 * timing["seconds_per_step"] / timing["cells"],
           "mcell_steps_per_s": timing["million_cell_steps_per_second"],
           "pressure_its": timing["pressure_iterations_per_step"],
           "host_ms": None if timing["host_seconds_per_step"] is None else 1e3 * timing["host_seconds_per_step"],
           "host_ms_replayed": (None if timing["host_seconds_per_step_replayed"] is None else
                                1e3 * timing["host_seconds_per_step_replayed"]),
           **{f"{name.lower()}_ms": 1e3 * seconds for name, seconds in timing["phases"].items()},
           **{f"graph_{name.lower()}_ms": 1e3 * seconds for name, seconds in timing["graph_phases"].items()},
           "captured_steps": timing["captured_steps"]["steps"], "captured_steps_gpu_s": timing["captured_steps"]["seconds"]}
    if breakdown:
        row["cycle_breakdown"] = cycle_breakdown(solver)
    solver.destroy()
    if da is not None:
        da.destroy()
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128])
    parser.add_argument("--mesh", help="the cavity on this mesh of the unit cube in place of the boxes")
    parser.add_argument("--re", type=float, default=1000.0)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--breakdown", action="store_true",
                        help="then time the pressure's gpuamg cycle operation by operation (one GPU rank)")
    parser.add_argument("--json")
    args = parser.parse_args(ARGS)
    rows = []
    for n in [None] if args.mesh else args.sizes:
        rows.append(measure(n, args.re, args.warmup, args.steps, args.breakdown, args.mesh))
        if COMM.getRank() == 0:
            harness.write_json(args.json, {"meta": {**harness.metadata(), "petsc_options": PETSC_ARGS,
                                                    "ranks": COMM.getSize()}, "rows": rows}, quiet=True)
    if COMM.getRank() == 0:
        harness.print_table(rows, [("case", "cavity", "{}"), ("ranks", "ranks", "{}"), ("mat_type", "matrix", "{}"),
                                   ("pressure", "pressure", "{}"), ("ms_per_step", "ms/step", "{:.2f}"),
                                   ("explicit_ms", "explicit", "{:.2f}"), ("pressure_ms", "pressure", "{:.2f}"),
                                   ("correct_ms", "correct", "{:.2f}"), ("cfl_ms", "CFL", "{:.2f}"),
                                   ("pressure_its", "its/step", "{:.1f}"), ("ns_per_cell_step", "ns/cell-step", "{:.2f}"),
                                   ("mcell_steps_per_s", "Mcell-steps/s", "{:.1f}")])
        harness.write_json(args.json, {"meta": {**harness.metadata(), "petsc_options": PETSC_ARGS,
                                                "ranks": COMM.getSize()}, "rows": rows})


if __name__ == "__main__":
    main()
