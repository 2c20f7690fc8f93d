"""The flow around a circular cylinder at Re 3900, spanwise periodic, as a
large-eddy simulation (issue 36, item 6): the wake turbulent from a few
diameters behind the cylinder, c_D about 0.99 and St about 0.21
(Parnaudeau, Carlier, Heitz and Lamballais, "Experimental and numerical
studies of the flow over a circular cylinder at Reynolds number 3900",
Phys. Fluids 20, 2008; Kravchenko and Moin, "Numerical studies of flow over
a circular cylinder at Re_D = 3900", Phys. Fluids 12, 2000).

Diameter 1 at the origin, free stream u = (1, 0, 0) at "inlet" (x = -10),
pressure 0 at "outlet" (x = 20), slip on "sides" (y = -10 and 10), no slip
on "cylinder", the planes z = 0 ("front") and z = pi ("back") joined as
periodic; nu = 1 / -flow_re (3900), WALE (-flow_les), Crank-Nicolson for
nu. The mesh is demos/cylinder_mesh.py's make_spanwise (gmsh: prisms in
-les_layers layers, triangles of -les_size away from the cylinder, an 8th
of it on it and a quarter in the wake, and on the cylinder a boundary layer
of hexahedra, the first -les_wall_cell thick), or -flow_mesh with the same
groups. Without the boundary layer (-les_wall_cell 0) the wall's shear
layer, about D / sqrt(Re) thick, lies inside the first cell: the flow
then stays attached, hardly sheds, and c_D falls to a third
(BENCHMARKS.md).
On the host the pressure takes layerfft (the extrusion's exact solve, a
quarter of gamg's time here: BENCHMARKS.md; on several ranks the mesh is
cut by its cross-section, -flow_mesh_partitioner columns), on the GPU
gpuamg.
c_D = 2 F_x / (U^2 D pi) is averaged from t = -les_average_from to the end;
St = D f / U from the lift's period over the same window.

    python demos/cylinder_les.py -les_size 0.5 -les_layers 32 -flow_output_dir out

With -flow_output_dir DIR it writes forces.csv (t, c_D, c_L every step),
summary.json (the cells, c_D, St, the references, ms per step) and
forces.png. -help lists every option.
"""

import json
import math
import os
import sys
import tempfile

import numpy
import petsc4py

petsc4py.init(sys.argv)

from petsc4py import PETSc  # noqa: E402

import plugin  # noqa: E402,F401  (registers gpusell, gpuamg, ...)
from petsc_ext.options import OptionError, OptionsReader, help_requested, option_defaults  # noqa: E402
from plugin.flow import output  # noqa: E402
from plugin.flow.boundary import BoundaryError, Inflow, Outflow, Slip, Wall  # noqa: E402
from plugin.flow.collective import RankZeroError, exit_with, on_rank_zero  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402
from plugin.flow.forces import GroupForce  # noqa: E402
from plugin.flow.mesh import MeshError  # noqa: E402
from plugin.flow.partition import PARTITIONERS  # noqa: E402
from plugin.flow.solver import FlowBlowUp, FlowSolver, program_mat_type  # noqa: E402

SPAN = math.pi
PERIODIC = (("front", "back"),)
REFERENCE = {"c_D": 0.99, "St": 0.21}  # Kravchenko and Moin 2000's LES and Parnaudeau et al. 2008, rounded
DEFAULTS = {"flow_les": "wale", "flow_diffusion": "implicit", "flow_nonorthogonal": True, "flow_t_end": 150.0}


def free_stream(x, t):
    """u = (1, 0, 0) at the points x."""
    out = numpy.zeros_like(x)
    out[:, 0] = 1.0
    return out


def disturbed(g, amplitude=0.01, seed=1):
    """The free stream with random disturbances of ``amplitude`` (3, n): they break the symmetry the wake
    would otherwise keep for long (projected before the first step)."""
    rng = numpy.random.default_rng(seed + g.cell_ranges[g.rank])
    return free_stream(g.centroids, 0.0).T + amplitude * rng.uniform(-1.0, 1.0, (3, g.num_cells))


def strouhal(t, c_l):
    """D f / U from the mean spacing of the lift's upward crossings of its mean (None below two periods)."""
    shifted = c_l - c_l.mean()
    up = numpy.flatnonzero((shifted[:-1] < 0) & (shifted[1:] >= 0))
    if up.size < 3:
        return None
    crossings = t[up] - shifted[up] * (t[up + 1] - t[up]) / (shifted[up + 1] - shifted[up])
    return 1.0 / float(numpy.mean(numpy.diff(crossings)))


def main():
    reader = OptionsReader("", "Spanwise-periodic cylinder at Re 3900 (LES)")
    re = reader.real("flow_re", 3900.0, "Reynolds number U D / nu", low=0.0, above=0.0)
    size = reader.real("les_size", 0.5, "cell size of the mesh away from the cylinder (diameters)", low=0.0,
                       above=0.0)
    layers = reader.int("les_layers", 32, "layers of prisms across the span pi", low=3, high=4096)
    wall_cell = reader.real("les_wall_cell", 0.004, "thickness of the boundary layer's first cell on the cylinder "
                            "(diameters; 0: no boundary layer)", low=0.0)
    wall_ratio = reader.real("les_wall_ratio", 1.15, "growth of the boundary layer's cells away from the wall",
                             low=1.0)
    wall_thickness = reader.real("les_wall_thickness", 0.15, "thickness of the boundary layer (diameters)",
                                 low=0.0, above=0.0)
    average_from = reader.real("les_average_from", 50.0, "the time from which c_D and St are averaged", low=0.0)
    mesh_path = reader.string("flow_mesh", "", "run on this mesh (groups inlet, outlet, sides, cylinder, front, "
                              "back) instead")
    partitioner = reader.choice("flow_mesh_partitioner", "columns", tuple(PARTITIONERS), "how the mesh is cut among "
                                "ranks (columns: by its cross-section, whole columns on each rank, as layerfft "
                                "needs)")
    directory = reader.string("flow_output_dir", "", "directory for forces.csv, summary.json and forces.png")
    comm = PETSc.COMM_WORLD
    mpi = comm.tompi4py()
    if directory:
        output.prepare_directory(directory, mpi)
    with tempfile.TemporaryDirectory() as scratch:
        if help_requested():  # the options are listed by a solver on the coarsest mesh
            size, layers = 4.0, 3
        wall_layer = (wall_cell, wall_ratio, wall_thickness) if wall_cell > 0 else None
        path = mesh_path or _gmsh_mesh(os.path.join(scratch, "cylinder-spanwise.msh"), size, layers, wall_layer, mpi)
        try:
            parts = distribute(path, mpi, partitioner, PERIODIC)
            mat_type = program_mat_type("cylinder_les")
            on_host = {"pressure_pc_type": "layerfft"} if mat_type == "aij" else {}
            with option_defaults("", {**DEFAULTS, **on_host}):
                solver = FlowSolver(parts.geometry, comm, mat_type, 1.0 / re,
                                    {"inlet": Inflow(free_stream), "outlet": Outflow(), "sides": Slip(),
                                     "cylinder": Wall()})
        except (MeshError, BoundaryError, OptionError) as exc:
            exit_with(mpi, f"cylinder_les: {exc}")
    if help_requested():
        raise SystemExit(0)
    g = solver.geometry
    PETSc.Sys.Print(f"cylinder_les: Re {re:g}, {g.num_global_cells} cells on {mpi.size} ranks; "
                    f"{solver.describe_conditions()}")
    force, rows = GroupForce(solver, "cylinder"), []
    scale = 2.0 / SPAN  # U = D = rho = 1

    def observe(state):
        F = force(state)
        rows.append((state.t, scale * F[0], scale * F[1]))

    try:
        state = solver.run(solver.initial_state(disturbed(g), project=True), observe)
    except FlowBlowUp as exc:
        PETSc.Sys.Print(str(exc))
        return 1
    solver.print_timing()
    t, c_d, c_l = numpy.array(rows).T
    window = t >= average_from
    summary = {"case": "cylinder Re 3900, spanwise periodic", "re": re, "cells": g.num_global_cells,
               "steps": state.step, "t": float(state.t), "averaged_from": average_from,
               "c_D": float(c_d[window].mean()) if window.any() else None,
               "St": strouhal(t[window], c_l[window]) if window.sum() > 2 else None,
               "ms_per_step": 1e3 * solver.timing()["seconds_per_step"], "reference": REFERENCE}
    if mpi.rank == 0:
        figures = ", ".join(f"{k} {summary[k]:.4g}" for k in ("c_D", "St") if summary[k] is not None)
        print(f"cylinder_les: t = {state.t:.4g}: {figures or 'no averages yet (the run ended before the window)'} "
              f"(references: c_D about 0.99, St about 0.21)")
        if directory:
            _write(directory, summary, t, c_d, c_l)
    return 0


def _gmsh_mesh(path, size, layers, wall_layer, mpi):
    def make():
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import cylinder_mesh  # gmsh: an optional extra

        cylinder_mesh.make_spanwise(path, size, layers, wall_layer=wall_layer)

    try:
        on_rank_zero(mpi, make)
    except RankZeroError as exc:
        exit_with(mpi, f"cylinder_les: cannot make the gmsh mesh ({exc}); give a mesh with -flow_mesh")
    return path


def _write(directory, summary, t, c_d, c_l):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = [os.path.join(directory, name) for name in ("summary.json", "forces.csv", "forces.png")]
    with open(written[0], "w") as stream:
        json.dump(summary, stream, indent=1)
    numpy.savetxt(written[1], numpy.column_stack([t, c_d, c_l]), delimiter=",", header="t,c_D,c_L", comments="",
                  fmt="%.10g")
    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot(t, c_d, label="c_D")
    axes.plot(t, c_l, label="c_L")
    axes.axhline(REFERENCE["c_D"], color="k", linestyle="--", label="c_D about 0.99")
    axes.set_xlabel("t U / D")
    axes.set_title(f"Cylinder, Re {summary['re']:g}, {summary['cells']} cells")
    axes.legend()
    figure.tight_layout()
    figure.savefig(written[2], dpi=120)
    print("cylinder_les: wrote " + ", ".join(os.path.abspath(w) for w in written))


if __name__ == "__main__":
    sys.exit(main())
