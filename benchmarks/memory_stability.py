"""Whether the consistent scheme's face memory lets a mode grow: a Stokes
flow (walls at rest, nu 0.1, a random start of 1e-8, so that convection is
negligible and the step linear) on gmsh tetrahedra of the unit cube, at
fixed time steps, for each -flow_face_memory_beta and without the memory:
the growth factor of the velocity's Omega-norm per step over the last half
of the steps, and the share of the kinetic energy in the ten cells that
hold most of it (a mode of a few cells: near 1).

    python benchmarks/memory_stability.py --size 0.05 --dt 5e-5 8.8e-4 2e-3 --json memory-stability.json
    python benchmarks/memory_stability.py --size 0.1 --dt 1e-3 2e-3 --variants fourier --json fourier.json
"""

import argparse
import sys
import tempfile

import petsc4py

petsc4py.init(sys.argv[:1])

import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
from meshes import gmsh_mesh  # noqa: E402  (tests/meshes.py, on the path through harness)
from petsc_ext.options import option_defaults  # noqa: E402
from plugin.flow.boundary import Wall  # noqa: E402
from plugin.flow.mesh import mesh_geometry  # noqa: E402
from plugin.flow.solver import FlowBlowUp, FlowSolver  # noqa: E402

NU = 0.1
VARIANTS = {"fourier": {"flow_face_memory_beta": "fourier"}, "damping": {"flow_face_memory_beta": "damping"},
            "no memory": {"flow_face_memory": False}}


def growth(g, dt, steps, options):
    """(growth factor per step, the ten largest cells' share of the energy, the step that blew up or None)."""
    with option_defaults("", {"flow_scheme": "consistent", "flow_diffusion": "implicit", "flow_dt": dt,
                              "flow_max_steps": steps, "flow_t_end": 2 * dt * steps, "pressure_ksp_rtol": 1e-10,
                              **options}):
        solver = FlowSolver(g, PETSc.COMM_SELF, "aij", NU, {name: Wall() for name in g.boundary_names})
    start = 1e-8 * numpy.random.default_rng(1).standard_normal((g.dim, g.num_cells))
    energies, failed = [], None
    try:
        state = solver.run(solver.initial_state(start, project=True),
                           lambda s: energies.append(solver.stepper.kinetic_energy(s)))
        u = state.u
    except FlowBlowUp:
        failed, u = len(energies) + 1, None
    solver.destroy()
    half = len(energies) // 2
    factor = (energies[-1] / energies[half - 1]) ** (1 / (2 * (len(energies) - half)))
    share = None
    if u is not None:
        cells = (g.volumes * u**2).sum(axis=0)
        share = float(numpy.sort(cells)[-10:].sum() / cells.sum())
    return float(factor), share, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=0.05, help="gmsh cell size of the unit cube")
    parser.add_argument("--dt", type=float, nargs="+", default=[5e-5, 8.8e-4, 2e-3])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        g = mesh_geometry(gmsh_mesh(directory, "tetrahedra", args.size))
    fo = NU / g.face_distances**2  # times dt: each face's diffusion number
    results = {"meta": harness.metadata(), "size": args.size, "cells": g.num_global_cells, "nu": NU,
               "steps": args.steps, "cases": []}
    for dt in args.dt:
        for name in args.variants:
            factor, share, failed = growth(g, dt, args.steps, VARIANTS[name])
            results["cases"].append({"dt": dt, "fo_median": float(numpy.median(fo) * dt),
                                     "fo_max": float(fo.max() * dt), "beta": name, "factor": factor,
                                     "top10_share": share, "blew_up_at": failed})
            print(f"dt {dt:.3g} (Fo median {numpy.median(fo) * dt:.3f}) {name}: growth {factor:.5f} a step"
                  + (f", blew up at step {failed}" if failed else f", ten cells hold {share:.3f}"), flush=True)
            harness.write_json(args.json, results, quiet=True)


if __name__ == "__main__":
    main()
