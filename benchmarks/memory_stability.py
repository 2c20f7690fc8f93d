"""Whether the consistent scheme's face memory, or another of its parts,
lets a mode grow: a Stokes flow (walls at rest, a random start of 1e-8, so
that convection is negligible and the step linear) on gmsh tetrahedra of
the unit cube or on a mesh given with --mesh (its groups walls at rest but
those named by --outflow), at fixed time steps, for each
-flow_face_memory_beta and without the memory, with the options of --with:
the growth factor of the velocity's Omega-norm per step over the last half
of the steps, and the share of the kinetic energy in the ten cells that
hold most of it (a mode of a few cells: near 1) with the centroid of the
cell that holds most.

    python benchmarks/memory_stability.py --size 0.05 --dt 5e-5 8.8e-4 2e-3 --json memory-stability.json
    python benchmarks/memory_stability.py --size 0.1 --dt 1e-3 2e-3 --variants fourier --json fourier.json
    python benchmarks/memory_stability.py --mesh cylinder3d-tet-2.msh --outflow outlet --nu 1e-3 --dt 3e-4 \
        --steps 400 --variants fourier --with flow_wall_pressure_gradient=interior --json wall-interior.json
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
from plugin.flow.boundary import Outflow, Wall  # noqa: E402
from plugin.flow.mesh import mesh_geometry, read_mesh  # noqa: E402
from plugin.flow.solver import FlowBlowUp, FlowSolver  # noqa: E402

VARIANTS = {"fourier": {"flow_face_memory_beta": "fourier"}, "damping": {"flow_face_memory_beta": "damping"},
            "no memory": {"flow_face_memory": False}}


def growth(g, nu, outflow, dt, steps, options):
    """(growth factor per step, the ten largest cells' share of the energy, the centroid of the largest, the step
    that blew up or None)."""
    with option_defaults("", {"flow_scheme": "consistent", "flow_diffusion": "implicit", "flow_dt": dt,
                              "flow_max_steps": steps, "flow_t_end": 2 * dt * steps, "pressure_ksp_rtol": 1e-10,
                              **options}):
        solver = FlowSolver(g, PETSc.COMM_SELF, "aij", nu,
                            {name: Outflow() if name in outflow else Wall() for name in g.boundary_names})
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
    share = largest = None
    if u is not None:
        cells = (g.volumes * u**2).sum(axis=0)
        share = float(numpy.sort(cells)[-10:].sum() / cells.sum())
        largest = g.centroids[int(numpy.argmax(cells))].tolist()
    return float(factor), share, largest, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=0.05, help="gmsh cell size of the unit cube")
    parser.add_argument("--mesh", help="a gmsh mesh instead of the unit cube")
    parser.add_argument("--outflow", nargs="+", default=[], help="the mesh's groups that are outflows")
    parser.add_argument("--nu", type=float, default=0.1)
    parser.add_argument("--with", dest="extra", nargs="+", default=[], metavar="OPTION=VALUE",
                        help="options (without the dash) for every variant")
    parser.add_argument("--dt", type=float, nargs="+", default=[5e-5, 8.8e-4, 2e-3])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    if any("=" not in option for option in args.extra):
        parser.error(f"--with takes OPTION=VALUE, not {' '.join(o for o in args.extra if '=' not in o)}")
    extra = dict(option.split("=", 1) for option in args.extra)
    if args.mesh:
        g = mesh_geometry(read_mesh(args.mesh))
    else:
        with tempfile.TemporaryDirectory() as directory:
            g = mesh_geometry(gmsh_mesh(directory, "tetrahedra", args.size))
    unknown = set(args.outflow) - set(g.boundary_names)
    if unknown:
        parser.error(f"--outflow {' '.join(sorted(unknown))}: the mesh's groups are {', '.join(g.boundary_names)}")
    fo = args.nu / g.face_distances**2  # times dt: each face's diffusion number
    results = {"meta": harness.metadata(), "mesh": args.mesh or f"unit cube, size {args.size}",
               "cells": g.num_global_cells, "nu": args.nu, "outflow": args.outflow, "with": extra,
               "steps": args.steps, "cases": []}
    for dt in args.dt:
        for name in args.variants:
            factor, share, largest, failed = growth(g, args.nu, args.outflow, dt, args.steps,
                                                    {**VARIANTS[name], **extra})
            results["cases"].append({"dt": dt, "fo_median": float(numpy.median(fo) * dt),
                                     "fo_max": float(fo.max() * dt), "beta": name, "factor": factor,
                                     "top10_share": share, "largest_cell": largest, "blew_up_at": failed})
            print(f"dt {dt:.3g} (Fo median {numpy.median(fo) * dt:.3f}) {name}: growth {factor:.5f} a step"
                  + (f", blew up at step {failed}" if failed else
                     f", ten cells hold {share:.3f}, most the cell at {numpy.round(largest, 4).tolist()}"), flush=True)
            harness.write_json(args.json, results, quiet=True)


if __name__ == "__main__":
    main()
