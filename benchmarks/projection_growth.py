"""Whether a scheme's projection can amplify a velocity: 40 projections of a
random velocity on a DFG cylinder mesh of demos/cylinder_mesh.py (order 1;
3D: tetrahedra) with no inflow, so that the map is linear, the Omega-norm's
factor at each, per variant of plugin.flow.scheme. The symmetric scheme's
never amplifies; the consistent scheme's cell correction is not the
transpose of its divergence.

    python benchmarks/projection_growth.py --dim 3 --level 0 --json projection-growth-3d.json
    python benchmarks/projection_growth.py --dim 2 --level 1 --json projection-growth-2d.json
"""

import argparse
import json
import os
import sys
import tempfile

import petsc4py

petsc4py.init(sys.argv[:1])

import numpy  # noqa: E402
from mpi4py import MPI  # noqa: E402
from petsc4py import PETSc  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demos"))
import cylinder  # noqa: E402
import cylinder_mesh  # noqa: E402
import harness  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402

VARIANTS = {
    "symmetric": {"flow_scheme": "symmetric"},
    "symmetric + least-squares gradient": {"flow_scheme": "symmetric", "flow_gradient": "least-squares"},
    "consistent without skewness": {"flow_scheme": "consistent", "flow_skewness": "0"},
    "consistent with skewness": {"flow_scheme": "consistent", "flow_skewness": "1"},
    "consistent, wall pressure gradient interior": {"flow_scheme": "consistent",
                                                    "flow_wall_pressure_gradient": "interior"},
}


def factors(geometry, options, projections=40):
    at_rest = {"inlet": cylinder.Inflow(lambda x, t: 0 * x), "outlet": cylinder.Outflow(), "wall": cylinder.Wall(),
               "cylinder": cylinder.Wall()}
    with cylinder.option_defaults("", {**cylinder.STEADY, "pressure_ksp_rtol": 1e-12, **options}):
        solver = cylinder.FlowSolver(geometry, PETSc.COMM_SELF, "aij", cylinder.NU, at_rest)
    state = solver.initial_state()
    state.u[...] = numpy.random.default_rng(0).standard_normal(state.u.shape)
    found = []
    for _ in range(projections):
        before = numpy.sqrt((geometry.volumes * state.u**2).sum())
        solver.stepper.project(state)
        found.append(float(numpy.sqrt((geometry.volumes * state.u**2).sum()) / before))
    solver.destroy()
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, choices=(2, 3), default=3)
    parser.add_argument("--level", type=int, default=0)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, f"cylinder-{args.dim}d-level{args.level}.msh")
        cylinder_mesh.make(args.dim, args.level, path, order=1)
        geometry = distribute(path, MPI.COMM_SELF, "metis").geometry
    results = {"meta": harness.metadata(), "dim": args.dim, "level": args.level, "cells": geometry.num_global_cells,
               "variants": {}}
    for name, options in VARIANTS.items():
        found = factors(geometry, options)
        results["variants"][name] = {"largest": max(found), "last": found[-1], "factors": found}
        print(f"{name}: largest factor {max(found):.6f}, after 40 projections {found[-1]:.6f}", flush=True)
        with open(args.json, "w") as stream:
            json.dump(results, stream, indent=1)


if __name__ == "__main__":
    main()
