"""Flows with inflow and outflow boundaries, and the order of accuracy on meshes.

-channel_case poiseuille (default): plane Poiseuille flow in the channel
(0, 4) x (0, 1). The parabola u = 4 U y (1 - y) (U = 1) flows in at the group
"inlet", out at "outlet" (pressure 0, zero normal gradient of the velocity),
no slip on "wall"; Re = U H / nu = -channel_re (20). Run to a steady state,
the profile across x = 3 is compared with the parabola (largest difference
over U) and the pressure gradient with -8 nu U.

-channel_case kovasznay: Kovasznay's flow (Kovasznay 1948, Re = 40), an exact
steady solution of the Navier-Stokes equations, in (-0.5, 1) x (-0.5, 1.5)
with the exact velocity held on the group "boundary". Run to a steady state
on -channel_levels meshes, each with cells half the size of the last; the L2
error of the velocity against the exact one, and the observed order between
levels.

The meshes are gmsh's (demos/meshes.py, cells of about -channel_size on the
first level), of -channel_cells triangles, quads or mixed; box is a DMDA
(the sides xmin, xmax, ymin, ymax are the groups); -flow_mesh FILE runs the
case on one mesh of the user's with the case's group names. Rank 0 reads a
mesh and sends each rank its part. Both cases take the consistent scheme
(-flow_scheme symmetric the other).

    python demos/channel.py -channel_cells triangles -channel_size 0.05 -flow_output_dir out
    python demos/channel.py -channel_case kovasznay -channel_cells quads -channel_levels 3 -flow_output_dir out

-channel_case turbulent: the plane channel at Re_tau = -channel_re_tau (180;
Moser, Kim and Mansour, Phys. Fluids 11, 1999) as a large-eddy simulation on
a DMDA box (-da_grid_x, -da_grid_y, -da_grid_z; -channel_box 2pi: 2 pi x 2 x
pi, or 4pi: 4 pi x 2 x 4 pi / 3), x and z periodic, walls at y = 0 and 2
(h = 1), nu = 1 / Re_tau, cells clustered at the walls (-flow_box_grading
2), WALE (-flow_les), driven by -dP/dx = 1 (-flow_forcing, so that u_tau is
1 once the flow settles). It starts from a 1/7-law mean profile with random
disturbances, skips -channel_transient time units, then averages over the
planes and over time (plugin.flow.statistics, kept with every checkpoint);
summary.json holds Re_tau, Ub_plus, Uc_plus, u_rms_plus_peak and
y_plus_of_peak (null until there are statistics), profiles.csv and
profiles.png the profiles in wall units against -channel_reference (a CSV
naming its columns y+, U+, u_rms+, v_rms+, w_rms+, uv+; the DNS's data
files are public).

    python demos/channel.py -channel_case turbulent -da_grid_x 32 -da_grid_y 48 -da_grid_z 32 -flow_output_dir out

With -flow_output_dir DIR it writes summary.json (the case's figures),
profile.csv (Poiseuille: y, u, exact) or errors.csv (Kovasznay: level, cells,
h, error, order), a PNG of either, and each level's fields as XDMF.
-help lists every option.
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

import plugin  # noqa: E402,F401  (registers gpusell, ainv, cacg)
from petsc_ext.options import OptionError, OptionsReader, help_requested, option_defaults  # noqa: E402
from plugin.flow import output  # noqa: E402
from plugin.flow.boundary import BoundaryError, Inflow, Outflow, Wall  # noqa: E402
from plugin.flow.box import box_geometry, dmda_partition  # noqa: E402
from plugin.flow.checkpoint import CheckpointError  # noqa: E402
from plugin.flow.collective import RankZeroError, exit_with, on_rank_zero  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402
from plugin.flow.mesh import MeshError  # noqa: E402
from plugin.flow.partition import PARTITIONERS  # noqa: E402
from plugin.flow.solver import FlowBlowUp, FlowSolver, program_mat_type  # noqa: E402

CELLS = ("triangles", "quads", "mixed", "box")
CASES = ("poiseuille", "kovasznay", "turbulent")
CHANNEL_BOXES = {"2pi": (2 * math.pi, 2.0, math.pi), "4pi": (4 * math.pi, 2.0, 4 * math.pi / 3)}
# Chebyshev degree 3: on the graded cells 31.5 cycles a solve where degree 2 took 39.6, 22% less time (BENCHMARKS.md)
TURBULENT = {"flow_les": "wale", "flow_forcing": "pressure_gradient", "flow_forcing_value": 1.0,
             "flow_box_grading": 2.0, "flow_diffusion": "implicit", "pressure_pc_gpuamg_degree": 3}
# case -> (rectangle (x0, y0, width, height), demos/meshes.py domain, {group: box side})
DOMAINS = {
    "poiseuille": ((0.0, 0.0, 4.0, 1.0), "channel", {"inlet": "xmin", "outlet": "xmax"}),
    "kovasznay": ((-0.5, -0.5, 1.5, 2.0), "kovasznay", {}),
}
# The steady laminar cases take the consistent scheme: resolved viscous flows, second order on gmsh's
# non-orthogonal cells where the symmetric scheme is not (BENCHMARKS.md, "The consistent scheme"); on a box
# both are the same operators.
STEADY = {"flow_t_end": 400.0, "flow_steady_tol": 1e-6, "flow_diffusion": "implicit", "pressure_ksp_rtol": 1e-10,
          "flow_scheme": "consistent"}


def parabola(x, t):
    """The inflow of the Poiseuille case: 4 y (1 - y) along x."""
    return numpy.column_stack([4 * x[:, 1] * (1 - x[:, 1]), numpy.zeros(len(x))])


class Kovasznay:
    """Kovasznay's exact solution at Reynolds number re (unit speed far upstream, unit period in y)."""

    def __init__(self, re):
        self.re = re
        self.lam = re / 2 - math.sqrt(re**2 / 4 + 4 * math.pi**2)

    def velocity(self, x, t=0.0):
        e = numpy.exp(self.lam * x[:, 0])
        return numpy.column_stack([1 - e * numpy.cos(2 * math.pi * x[:, 1]),
                                   self.lam / (2 * math.pi) * e * numpy.sin(2 * math.pi * x[:, 1])])


def conditions(case, box, kovasznay):
    if case == "kovasznay":
        held = Inflow(kovasznay.velocity)
        return {side: held for side in ("xmin", "xmax", "ymin", "ymax")} if box else {"boundary": held}
    named = {"inlet": Inflow(parabola), "outlet": Outflow(), "wall": Wall()}
    if box:
        return {"xmin": named["inlet"], "xmax": named["outlet"]}  # ymin, ymax: walls
    return named


def main():
    reader = OptionsReader("", "Channel demo")
    case = reader.choice("channel_case", "poiseuille", CASES, "the flow")
    cells = reader.choice("channel_cells", "triangles", CELLS, "the cells of the gmsh meshes, or box (a DMDA)")
    size = reader.real("channel_size", 0.1, "cell size of the first level", low=1e-4, high=1.0)
    levels = reader.int("channel_levels", 1 if case == "poiseuille" else 3, "meshes, each with cells half the "
                        "size of the last", low=1, high=8)
    re = reader.real("channel_re", 20.0 if case == "poiseuille" else 40.0, "Reynolds number (U H / nu; "
                     "Kovasznay: 1 / nu)", low=1e-6)
    mesh_path = reader.string("flow_mesh", "", "run on this mesh (groups as the case names them) instead")
    partitioner = reader.choice("flow_mesh_partitioner", "metis", tuple(PARTITIONERS), "how a mesh is cut among ranks")
    directory = reader.string("flow_output_dir", "", "directory for summary.json, CSV, PNG and XDMF (none: no files)")
    comm = PETSc.COMM_WORLD
    mpi = comm.tompi4py()
    if directory:
        output.prepare_directory(directory, mpi)
    mat_type = program_mat_type("channel")
    if case == "turbulent":
        return _turbulent(reader, comm, mat_type, directory)
    kovasznay = Kovasznay(re)
    nu = 1.0 / re
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for level in range(1 if mesh_path else levels):
            h = size / 2**level
            path = mesh_path or (None if cells == "box" else _gmsh_mesh(scratch, case, cells, h, mpi))
            run = _run_level(case, path, h, nu, kovasznay, mat_type, partitioner, comm, directory, level)
            if run is None:
                return 1
            results.append(run)
    if mpi.rank == 0:
        _report(case, cells if not mesh_path else os.path.basename(mesh_path), re, results, directory)
    return 0


def _turbulent(reader, comm, mat_type, directory):
    """The turbulent channel: a run, its statistics, summary.json, the profiles against a reference."""
    from plugin.flow.statistics import PlaneStatistics

    mpi = comm.tompi4py()
    re_tau = reader.real("channel_re_tau", 180.0, "friction Reynolds number u_tau h / nu", low=1.0)
    box = reader.choice("channel_box", "2pi", tuple(CHANNEL_BOXES), "the box: 2pi (2 pi x 2 x pi) or 4pi")
    transient = reader.real("channel_transient", 50.0, "time units (h / u_tau) skipped before the averages",
                            low=0.0)
    reference = reader.string("channel_reference", "", "CSV of reference profiles in wall units (columns named "
                              "y+, U+, u_rms+, v_rms+, w_rms+, uv+)")
    lengths = CHANNEL_BOXES[box]
    defaults = {**TURBULENT, "flow_t_end": transient + 50.0,
                **({"flow_checkpoint_file": os.path.join(directory, "flow_checkpoint.h5")} if directory else {})}
    try:
        with option_defaults("", defaults):
            da = PETSc.DMDA().create(dim=3, sizes=(32, 48, 32), stencil_width=1, comm=comm, setup=False,
                                     boundary_type=(PETSc.DM.BoundaryType.PERIODIC, PETSc.DM.BoundaryType.NONE,
                                                    PETSc.DM.BoundaryType.PERIODIC))
            da.setFromOptions()
            da.setMatType(mat_type)
            da.setUp()
            solver = FlowSolver.from_dmda(da, lengths, 1.0 / re_tau)
    except (BoundaryError, OptionError) as exc:
        exit_with(mpi, f"channel: {exc}")
    stats = PlaneStatistics(solver, start=transient)
    solver.keep(stats, ".stats.npz")
    PETSc.Sys.Print(f"channel: turbulent, Re_tau {re_tau:g}, box {box} ({' x '.join(f'{a:.3f}' for a in lengths)}), "
                    f"{' x '.join(map(str, da.getSizes()))} cells on {mpi.size} ranks; {solver.describe_conditions()}")
    if help_requested():
        raise SystemExit(0)
    try:
        state = solver.run(solver.initial_state(_disturbed_channel(solver.geometry), project=True), stats.sample)
    except FlowBlowUp as exc:
        PETSc.Sys.Print(str(exc))
        return 1
    except CheckpointError as exc:
        exit_with(mpi, f"channel: {exc}")
    solver.print_timing()
    summary = _turbulent_summary(stats, re_tau, box, da.getSizes(), state, solver)
    if directory:
        written = stats.write(directory, reference or None) if stats.time > 0 else []
        if mpi.rank == 0:
            with open(os.path.join(directory, "summary.json"), "w") as stream:
                json.dump(summary, stream, indent=1)
            print("channel: wrote " + ", ".join(os.path.abspath(w) for w in
                                                [os.path.join(directory, "summary.json"), *written]))
    return 0


def _disturbed_channel(g, amplitude=0.3, seed=1):
    """A 1/7-law mean profile (bulk velocity 15.7, MKM's U_b+) with random disturbances of ``amplitude``
    times it, largest mid-channel: the start of the turbulent case (projected before the first step)."""
    y = g.centroids[:, 1]
    eta = numpy.clip(1.0 - abs(y - 1.0), 0.0, 1.0)  # distance from the nearer wall, h = 1
    mean = 15.7 * 8.0 / 7.0 * eta ** (1.0 / 7.0)
    rng = numpy.random.default_rng(seed + g.cell_ranges[g.rank])
    noise = rng.uniform(-1.0, 1.0, (3, y.size)) * amplitude * mean
    return numpy.vstack([mean + noise[0], noise[1], noise[2]])


def _turbulent_summary(stats, re_tau, box, sizes, state, solver):
    """The figures of the turbulent case: those of the statistics in wall units (None before any)."""
    summary = {"case": "turbulent", "re_tau_target": re_tau, "box": box, "cells": list(sizes), "t": state.t,
               "steps": state.step, "averaged_time": stats.time, "Re_tau": None, "Ub_plus": None, "Uc_plus": None,
               "u_rms_plus_peak": None, "y_plus_of_peak": None,
               "reference_mkm_1999": {"Re_tau": 178.12, "Ub_plus": 15.68, "Uc_plus": 18.30, "u_rms_plus_peak": 2.66,
                                      "y_plus_of_peak": 15.0}}
    if stats.time > 0:
        u_tau, measured, table = stats.wall_units()
        y, U = stats.profiles()[:2]
        weights = stats.plane_volumes / stats.plane_volumes.sum()
        peak = int(numpy.argmax(table[:, 3]))
        summary.update(Re_tau=float(measured), Ub_plus=float(weights @ U / u_tau), Uc_plus=float(U[len(U) // 2] / u_tau),
                       u_rms_plus_peak=float(table[peak, 3]), y_plus_of_peak=float(table[peak, 1]))
    if solver.mpi.rank == 0:
        figures = ", ".join(f"{k} {v:.4g}" for k, v in summary.items() if k in ("Re_tau", "Ub_plus", "Uc_plus",
                                                                                   "u_rms_plus_peak", "y_plus_of_peak")
                            and v is not None) or "no statistics yet (the run ended within the transient)"
        print(f"channel: turbulent, t = {state.t:.4g}, averaged over {stats.time:.4g}: {figures} (Moser, Kim and "
              "Mansour 1999: Re_tau 178.12, Ub_plus 15.68, Uc_plus 18.30, u_rms_plus_peak 2.66 at y+ about 15)")
    return summary


def _gmsh_mesh(directory, case, cells, h, mpi):
    """A gmsh mesh of the case's rectangle (demos/meshes.py), made on rank 0."""
    path = os.path.join(directory, f"{case}-{cells}-{h:g}.msh")

    def make():
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import meshes  # gmsh: an optional extra

        meshes.make(cells, h, path, domain=DOMAINS[case][1])

    try:
        on_rank_zero(mpi, make)
    except RankZeroError as exc:
        exit_with(mpi, f"channel: cannot make the gmsh mesh ({exc}); give a mesh with -flow_mesh")
    return path


def _run_level(case, path, h, nu, kovasznay, mat_type, partitioner, comm, directory, level):
    """One mesh: (cells, the case's figures on rank 0); None after a blow-up."""
    mpi = comm.tompi4py()
    box = path is None
    defaults = {**STEADY, **({"flow_checkpoint_file": os.path.join(directory, "flow_checkpoint.h5")} if directory else {})}
    try:
        with option_defaults("", defaults):
            if box:
                (x0, y0, width, height), _, _ = DOMAINS[case]
                da = PETSc.DMDA().create(dim=2, sizes=(round(width / h), round(height / h)), stencil_width=1,
                                         comm=comm, setup=False)
                da.setMatType(mat_type)
                da.setUp()
                solver = FlowSolver.from_dmda(da, (width, height), nu, conditions(case, True, kovasznay),
                                              origin=(x0, y0))
            else:
                parts = distribute(path, mpi, partitioner)
                solver = FlowSolver(parts.geometry, comm, mat_type, nu, conditions(case, False, kovasznay))
    except (MeshError, BoundaryError, OptionError) as exc:
        exit_with(mpi, f"channel: {exc}")
    g = solver.geometry
    PETSc.Sys.Print(f"channel: {case}, level {level}: {g.num_global_cells} cells ({'DMDA box' if box else path}) on "
                    f"{mpi.size} ranks; {solver.describe_conditions()}")
    if help_requested():
        raise SystemExit(0)  # the options are listed: nothing to run
    start = kovasznay.velocity(g.centroids).T if case == "kovasznay" else None
    try:
        state = solver.run(solver.initial_state(start, project=start is not None))
    except FlowBlowUp as exc:
        PETSc.Sys.Print(str(exc))
        return None
    except CheckpointError as exc:
        exit_with(mpi, f"channel: {exc}")
    solver.print_timing()
    if box:
        (x0, y0, width, height), _, _ = DOMAINS[case]
        fields = [output.natural_field(mpi, dmda_partition(da), solver.xp, a) for a in (state.u, state.p)]
        fields = [None if f is None else f.reshape(*f.shape[:-2], -1) for f in fields]  # natural order, x fastest
        whole = box_geometry(da.getSizes(), (width, height), (False, False), (x0, y0))
    else:
        fields = [output.mesh_field(mpi, g, solver.xp, a) for a in (state.u, state.p)]
        whole = parts.whole
    if mpi.rank != 0:
        return g.num_global_cells, None
    u, p = fields
    figures = _figures(case, whole, u, p, nu, kovasznay, solver.boundary_conditions)
    if directory and not box:
        output.write_mesh_xdmf(os.path.join(directory, f"{case}-level{level}.xdmf"), parts.mesh, u, p)
    return g.num_global_cells, figures


def _figures(case, whole, u, p, nu, kovasznay, conditions):
    """The case's figures from the velocity (dim, cells) and pressure of the one-rank geometry ``whole``."""
    if case == "kovasznay":
        error = u - kovasznay.velocity(whole.centroids).T
        area = whole.volumes.sum()
        return {"l2_error": float(numpy.sqrt((whole.volumes * (error**2).sum(axis=0)).sum() / area)),
                "h": float(numpy.sqrt(area / whole.num_cells))}
    y = numpy.linspace(0.0, 1.0, 101)
    profile = output.sample(whole, u, conditions, numpy.column_stack([numpy.full(y.size, 3.0), y]))[:, 0]
    exact = 4 * y * (1 - y)
    middle = (whole.centroids[:, 0] > 1.5) & (whole.centroids[:, 0] < 3.5)
    slope = numpy.polyfit(whole.centroids[middle, 0], p[middle], 1)[0]
    return {"profile_y": y.tolist(), "profile_u": profile.tolist(), "profile_error": float(abs(profile - exact).max()),
            "pressure_gradient": float(slope), "pressure_gradient_exact": -8 * nu}


def _report(case, cells, re, results, directory):
    summary = {"case": case, "cells": cells, "re": re, "levels": []}
    for level, (count, figures) in enumerate(results):
        summary["levels"].append({"level": level, "cells": count, **figures})
    if case == "poiseuille":
        last = summary["levels"][-1]
        print(f"channel: Poiseuille, Re = {re:g}, {last['cells']} cells of {cells}: profile at x = 3 within "
              f"{last['profile_error']:.4f} of 4 y (1 - y) (U = 1); dp/dx {last['pressure_gradient']:.5f}, "
              f"exact {last['pressure_gradient_exact']:.5f} ({abs(last['pressure_gradient'] / last['pressure_gradient_exact'] - 1):.2%} off)")
    else:
        rows = summary["levels"]
        for previous, row in zip([None] + rows[:-1], rows, strict=True):
            row["order"] = (math.log(previous["l2_error"] / row["l2_error"]) / math.log(previous["h"] / row["h"])
                            if previous else None)
        print(f"channel: Kovasznay, Re = {re:g}, {cells}: level, cells, h, L2 error of u, observed order")
        for row in rows:
            order = f"{row['order']:.2f}" if row["order"] is not None else "-"
            print(f"channel:   {row['level']}  {row['cells']:7d}  {row['h']:.4f}  {row['l2_error']:.4e}  {order}")
    if directory:
        _write(summary, directory)


def _write(summary, directory):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = [os.path.join(directory, "summary.json")]
    with open(written[0], "w") as stream:
        json.dump(summary, stream, indent=1)
    figure, axes = plt.subplots(figsize=(5, 4))
    if summary["case"] == "poiseuille":
        last = summary["levels"][-1]
        y, u = numpy.array(last["profile_y"]), numpy.array(last["profile_u"])
        written.append(os.path.join(directory, "profile.csv"))
        numpy.savetxt(written[-1], numpy.column_stack([y, u, 4 * y * (1 - y)]), delimiter=",", header="y,u,exact",
                      comments="")
        axes.plot(4 * y * (1 - y), y, "k-", label="4 y (1 - y)")
        axes.plot(u, y, "o", markersize=3, label=f"{last['cells']} cells")
        axes.set_xlabel("u at x = 3")
        axes.set_ylabel("y")
        axes.set_title(f"Poiseuille flow, Re = {summary['re']:g}, {summary['cells']}")
    else:
        rows = summary["levels"]
        written.append(os.path.join(directory, "errors.csv"))
        numpy.savetxt(written[-1], [[r["level"], r["cells"], r["h"], r["l2_error"],
                                     numpy.nan if r["order"] is None else r["order"]] for r in rows],
                      delimiter=",", header="level,cells,h,l2_error,order", comments="")
        h, e = numpy.array([r["h"] for r in rows]), numpy.array([r["l2_error"] for r in rows])
        axes.loglog(h, e, "o-", label=f"{summary['cells']}")
        for order in (1, 2):
            axes.loglog(h, e[0] * (h / h[0])**order, "--", label=f"order {order}")
        axes.set_xlabel("h")
        axes.set_ylabel("L2 error of u")
        axes.set_title(f"Kovasznay flow, Re = {summary['re']:g}")
    axes.legend()
    figure.tight_layout()
    written.append(os.path.join(directory, f"{summary['case']}.png"))
    figure.savefig(written[-1], dpi=120)
    print("channel: wrote " + ", ".join(os.path.abspath(w) for w in written))


if __name__ == "__main__":
    sys.exit(main())
