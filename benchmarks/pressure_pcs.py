"""Pressure solvers of the flow driver compared on one run of the 3D cavity
(benchmarks/flow.py's case). Each variant, a set of pressure KSP options,
takes over the pressure solve of the same run in turn: --warmup steps, then
--steps timed ones. Reported per variant: KSP set-up time, iterations and ms
per pressure solve, ms per iteration.

    python benchmarks/pressure_pcs.py --size 256 --json pressure-pcs.json -- -pressure_mat_type aijcusparse

PETSc options after "--" (the pressure matrix's type, say) apply to the
whole run; a variant's options are given without prefix (--variant
"name=-ksp_type cg -pc_type gamg", repeatable; default: VARIANTS, and
AIJ_VARIANTS when the pressure matrix is AIJ: -pressure_mat_type aijcusparse).
"""

import argparse
import sys

import petsc4py

ARGS, PETSC_ARGS = (sys.argv[1:sys.argv.index("--")], sys.argv[sys.argv.index("--") + 1:]) \
    if "--" in sys.argv else (sys.argv[1:], [])
petsc4py.init([sys.argv[0], *PETSC_ARGS])

from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
import plugin  # noqa: E402,F401
from flow import LID  # noqa: E402
from petsc_ext.options import option_defaults  # noqa: E402
from plugin.flow.solver import FlowSolver  # noqa: E402

COMM = PETSc.COMM_WORLD
MG = "-ksp_type cg -pc_type mg"  # plugin.flow.pressure_multigrid's levels
VARIANTS = {
    "cg + mg": MG,
    "cg + mg, cheby(1)": MG + " -mg_levels_ksp_max_it 1",
    "cg + mg, cheby(3)": MG + " -mg_levels_ksp_max_it 3",
    "cg + mg, W-cycle": MG + " -pc_mg_cycle_type w",
}
AIJ_VARIANTS = {"cg + gamg": "-ksp_type cg -pc_type gamg"}  # gamg needs an AIJ pressure matrix


def set_options(prefix, text):
    """Options 'text' (-name value ...) under 'prefix' in PETSc's database."""
    options, tokens = PETSc.Options(prefix), text.split()
    for i, token in enumerate(tokens):
        if token.startswith("-"):
            value = tokens[i + 1] if i + 1 < len(tokens) and not tokens[i + 1].startswith("-") else None
            options.setValue(token[1:], value)


def measure(solver, state, prefix, warmup, steps):
    ksp = solver.solvers.pressure_ksp(prefix)
    solver.pressure_ksp.destroy()
    solver.pressure_ksp = solver.stepper.pressure_ksp = ksp
    setup = harness.seconds(ksp.setUp)
    solver.max_steps = warmup
    state = solver.run(state)
    solver.reset_timing()
    solver.max_steps = steps
    state = solver.run(state)
    timing = solver.timing()
    pressure_ms = 1e3 * timing["phases"]["Pressure"]
    its = timing["pressure_iterations_per_step"]
    return state, {"pc": f"{ksp.getType()} + {ksp.getPC().getType()}", "setup_s": setup, "steps": steps,
                   "pressure_ms": pressure_ms, "its": its, "ms_per_it": pressure_ms / its,
                   "step_ms": 1e3 * timing["seconds_per_step"],
                   "mcell_steps_per_s": timing["million_cell_steps_per_second"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--re", type=float, default=1000.0)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--variant", action="append", help="name=options")
    parser.add_argument("--json")
    args = parser.parse_args(ARGS)
    n = args.size
    da = PETSc.DMDA().create(dim=3, sizes=(n, n, n), stencil_width=1, setup=False)
    da.setMatType("gpusell")
    da.setFromOptions()
    da.setUp()
    with option_defaults("", {"flow_t_end": 1e9}):
        solver = FlowSolver.from_dmda(da, (1.0, 1.0, 2.0), 1.0 / args.re, LID)
    state = solver.initial_state()
    rows = []
    if args.variant:
        variants = dict(v.split("=", 1) for v in args.variant)
    else:
        aij = "gpusell" not in solver.matrices.poisson.getType()
        variants = {**VARIANTS, **(AIJ_VARIANTS if aij else {})}

    def save(quiet):
        if COMM.getRank() == 0:
            harness.write_json(args.json, {"meta": {**harness.metadata(), "petsc_options": PETSC_ARGS,
                                                    "ranks": COMM.getSize()}, "rows": rows}, quiet=quiet)

    for i, (name, text) in enumerate(variants.items()):
        prefix = f"variant{i}_"
        set_options(prefix, text)
        state, row = measure(solver, state, prefix, args.warmup, args.steps)
        rows.append({"n": n, "variant": name, "options": text, **row})
        PETSc.Sys.Print(f"{name}: {row['its']:.1f} its, {row['pressure_ms']:.2f} ms per solve, "
                        f"{row['ms_per_it']:.2f} ms per iteration (set-up {row['setup_s']:.2f} s)")
        save(quiet=True)  # after each variant: a later one may run out of memory
    if COMM.getRank() == 0:
        harness.print_table(rows, [("variant", "variant", "{}"), ("setup_s", "set-up s", "{:.2f}"),
                                   ("its", "its/solve", "{:.1f}"), ("pressure_ms", "ms/solve", "{:.2f}"),
                                   ("ms_per_it", "ms/it", "{:.2f}"), ("step_ms", "ms/step", "{:.2f}"),
                                   ("mcell_steps_per_s", "Mcell-steps/s", "{:.1f}")])
    save(quiet=False)
    solver.destroy()
    da.destroy()


if __name__ == "__main__":
    main()
