"""What each scheme costs in kinetic energy: an inviscid Taylor-Green vortex
in the closed unit cube of gmsh tetrahedra (demos/meshes.py), slip walls on
every side, u = (sin pi x cos pi y cos pi z, -cos pi x sin pi y cos pi z, 0)
made discretely divergence-free, run to t = 1; the relative change of the
kinetic energy, per variant of plugin.flow.scheme and per time step.

    python benchmarks/energy_drift.py --size 0.1 --json energy.json
"""

import argparse
import math
import os
import sys
import tempfile

import petsc4py

petsc4py.init(sys.argv[:1])

import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
from meshes import gmsh_mesh  # noqa: E402  (tests/meshes.py, on the path through harness)
from petsc_ext.options import option_defaults  # noqa: E402
from plugin.flow.boundary import Slip  # noqa: E402
from plugin.flow.mesh import mesh_geometry  # noqa: E402
from plugin.flow.solver import FlowBlowUp, FlowSolver  # noqa: E402

VARIANTS = {
    "symmetric": {"flow_scheme": "symmetric"},
    "least-squares cell gradient only": {"flow_scheme": "symmetric", "flow_gradient": "least-squares"},
    "consistent without face memory": {"flow_scheme": "consistent", "flow_face_memory": False},
    "consistent (3D default: with face memory)": {"flow_scheme": "consistent"},
    "consistent with the convected velocities' correction": {"flow_scheme": "consistent",
                                                             "flow_convection_skewness": True},
}


def vortex(x):
    s, c = numpy.sin(math.pi * x), numpy.cos(math.pi * x)
    return numpy.array([s[:, 0] * c[:, 1] * c[:, 2], -c[:, 0] * s[:, 1] * c[:, 2], 0 * x[:, 0]])


def energy_change(geometry, options, cfl, checkpoint):
    """The relative change, or where the run blew up (its last good state written to ``checkpoint``)."""
    conditions = {name: Slip() for name in geometry.boundary_names}
    with option_defaults("", {"flow_t_end": 1.0, "flow_cfl": cfl, "pressure_ksp_rtol": 1e-12,
                              "flow_diffusion": "explicit", "flow_checkpoint_file": checkpoint, **options}):
        solver = FlowSolver(geometry, PETSc.COMM_SELF, "aij", 1e-12, conditions)
    state = solver.initial_state(vortex(geometry.centroids), project=True)
    start = solver.stepper.kinetic_energy(state)
    try:
        state = solver.run(state)
    except FlowBlowUp as exc:
        solver.destroy()
        return {"blew up": str(exc).split(" failed")[0]}
    change = solver.stepper.kinetic_energy(state) / start - 1
    solver.destroy()
    return {"relative_change": change, "steps": state.step, "t": state.t}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=0.1)
    parser.add_argument("--cfl", type=float, nargs="*", default=[0.5, 0.25])
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        geometry = mesh_geometry(gmsh_mesh(directory, "tetrahedra", args.size))
        checkpoint = os.path.join(directory, "blow-up.h5")
        results = {"meta": harness.metadata(), "cells": geometry.num_global_cells, "size": args.size, "variants": {}}
        for name, options in VARIANTS.items():
            results["variants"][name] = {str(cfl): energy_change(geometry, options, cfl, checkpoint)
                                         for cfl in args.cfl}
            print(name, results["variants"][name], flush=True)
            harness.write_json(args.json, results, quiet=True)


if __name__ == "__main__":
    main()
