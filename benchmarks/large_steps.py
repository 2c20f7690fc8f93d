"""Crank-Nicolson steps far past the explicit diffusion limit on tetrahedra:
a lid-driven cavity at Re 1 (nu 1, lid speed 1) in the unit cube of gmsh
tetrahedra (demos/meshes.py), implicit diffusion at a fixed dt, each scheme
with and without -flow_implicit_rhie_chow; per run, whether it blew up (and
at which step) or its last max |u^{n+1} - u^n| and max |u|.

    python benchmarks/large_steps.py --size 0.2 0.1 --dt 0.02 0.2 2 --json large-steps.json
"""

import argparse
import os
import sys
import tempfile

import petsc4py

petsc4py.init(sys.argv[:1])

from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
from meshes import gmsh_mesh  # noqa: E402  (tests/meshes.py, on the path through harness)
from petsc_ext.options import option_defaults  # noqa: E402
from plugin.flow.boundary import Wall  # noqa: E402
from plugin.flow.mesh import mesh_geometry  # noqa: E402
from plugin.flow.solver import FlowBlowUp, FlowSolver  # noqa: E402

SCHEMES = ("symmetric", "consistent")


def cavity(geometry, options, checkpoint):
    """The run's outcome: the step it blew up at, or how far from steady it ended."""
    conditions = {"lid": Wall((1.0, 0.0, 0.0)), "wall": Wall()}  # demos/meshes.py's groups
    with option_defaults("", {"flow_diffusion": "implicit", "flow_t_end": 1e9, "flow_cfl_max": 1e6,
                              "pressure_ksp_rtol": 1e-10, "flow_checkpoint_file": checkpoint, **options}):
        solver = FlowSolver(geometry, PETSc.COMM_SELF, "aij", 1.0, conditions)
    state = solver.initial_state()
    try:
        state = solver.run(state)
    except FlowBlowUp as exc:
        solver.destroy()
        return {"blew up": str(exc).split(" failed")[0]}
    change = solver.stepper.change_rate(state) * state.dt_old
    result = {"steps": state.step, "max |du|": change, "max |u|": float(abs(state.u).max()),
              "diffusion number": solver.diffusion_rate * state.dt_old}
    solver.destroy()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, nargs="+", default=[0.2])
    parser.add_argument("--dt", type=float, nargs="+", default=[0.02, 0.2, 2.0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    results = {"meta": harness.metadata(), "steps": args.steps, "meshes": {}}
    with tempfile.TemporaryDirectory() as directory:
        for size in args.size:
            geometry = mesh_geometry(gmsh_mesh(directory, "tetrahedra", size))
            runs = results["meshes"][f"{geometry.num_global_cells} cells"] = {}
            for scheme in SCHEMES:
                for coupled in (True, False):
                    for dt in args.dt:
                        name = f"{scheme}, implicit_rhie_chow {int(coupled)}, dt {dt:g}"
                        runs[name] = cavity(geometry, {"flow_scheme": scheme, "flow_implicit_rhie_chow": coupled,
                                                       "flow_dt": dt, "flow_max_steps": args.steps},
                                            os.path.join(directory, "blow-up.h5"))
                        print(size, name, runs[name], flush=True)
                        harness.write_json(args.json, results, quiet=True)


if __name__ == "__main__":
    main()
