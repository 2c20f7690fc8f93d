"""Flow around a cylinder: the DFG benchmark of Schäfer and Turek
("Benchmark computations of laminar flow around a cylinder", Notes on
Numerical Fluid Mechanics 52, 1996), the drag, lift, pressure difference and
Strouhal number against the published reference values.

-cyl_case 2d1 (Re 20, steady), 2d2 (Re 100, periodic), 2d3 (Re 100 at its
peak, the inflow 1.5 sin(pi t / 8) for 0 <= t <= 8), 3d1z (Re 20, steady, the
cylinder across the width of a square channel). nu = 1e-3, rho = 1; a
parabolic inflow at "inlet" (in 3D the product of two parabolas), no slip on
"wall" and "cylinder", the outflow at "outlet" held at pressure 0. The mesh
is gmsh's (demos/cylinder_mesh.py) at -cyl_level K (in 3D -cyl_cells prisms,
the cross-section's triangles extruded, or tetrahedra), or any mesh given
with -flow_mesh that has those four groups. The scheme is the consistent one
(-flow_scheme consistent: second order on these non-orthogonal cells, where
the symmetric scheme's drag converges to another value than the reference's,
BENCHMARKS.md; -flow_scheme symmetric takes that one).

    python demos/cylinder.py -cyl_case 2d1 -cyl_level 2 -flow_output_dir out

Drag and lift are the forces of plugin.flow.forces (the momentum the
cylinder's faces take in the discrete balance), as coefficients c = 2 F /
(rho U_mean^2 D) (in 3D also divided by the height); delta_p the pressure
at the front of the cylinder less that at its back; St = D f / U_mean from
the period of the lift. With -flow_output_dir DIR it writes forces.csv (t,
c_D, c_L, delta_p every step), summary.json (the case's quantities, the
reference values and the errors), forces.png (c_D and c_L against time
with the references) and the last fields as XDMF. -help lists every option.
"""

import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy
import petsc4py

petsc4py.init(sys.argv)

from petsc4py import PETSc  # noqa: E402

import plugin  # noqa: E402,F401  (registers gpusell, gpuamg, ...)
from petsc_ext.options import OptionError, OptionsReader, help_requested, option_defaults  # noqa: E402
from plugin.flow import output  # noqa: E402
from plugin.flow.boundary import BoundaryError, Inflow, Outflow, Wall  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402
from plugin.flow.forces import GroupForce, PointPressure  # noqa: E402
from plugin.flow.checkpoint import CheckpointError  # noqa: E402
from plugin.flow.collective import RankZeroError, exit_with, on_rank_zero  # noqa: E402
from plugin.flow.mesh import MeshError  # noqa: E402
from plugin.flow.partition import PARTITIONERS  # noqa: E402
from plugin.flow.solver import FlowBlowUp, FlowSolver, program_mat_type  # noqa: E402

HEIGHT, DIAMETER, NU = 0.41, 0.1, 1e-3
GROUPS = ("inlet", "outlet", "wall", "cylinder")
CELLS = ("prisms", "tetrahedra")  # of demos/cylinder_mesh.py's 3D meshes (imported only where gmsh is)


@dataclass(frozen=True)
class Case:
    dim: int
    peak: float  # U_m, the inflow's largest velocity
    u_mean: float  # of the coefficients
    t_end: float
    steady: bool
    probes: tuple  # the points of delta_p, front then back
    reference: dict
    pulsed: bool = False  # 2d3: U_m sin(pi t / 8)


# Reference values. 2D-1: John and Matthies, "Higher-order finite element discretizations in a
# benchmark problem for incompressible flows", Int. J. Numer. Meth. Fluids 37, 2001 (the digits of the
# issue). 2D-2: Schäfer and Turek 1996, the middle of their intervals (c_D max 3.22-3.24, c_L max
# 0.99-1.01, St 0.295-0.305). 2D-3: John, Int. J. Numer. Meth. Fluids 44, 2004. 3D-1Z: c_D and c_L the
# reference values of Bayraktar, Mierka and Turek, "Benchmark computations of 3D laminar flow around a
# cylinder with CFX, OpenFOAM and FeatFlow", Int. J. Comput. Sci. Eng. 7, 2012 (as FeatFlow's results page
# for the benchmark lists them, with FeatFlow's own 6.18465 and 0.009397 on 3.1M cells); they give no
# delta_p, and 0.170 is the middle of Schäfer and Turek's interval 0.165-0.175 (quoted, not checked here).
CASES = {
    "2d1": Case(2, 0.3, 0.2, 30.0, True, ((0.15, 0.2), (0.25, 0.2)),
                {"c_D": 5.57953523384, "c_L": 0.010618948146, "delta_p": 0.11752016697}),
    "2d2": Case(2, 1.5, 1.0, 10.0, False, ((0.15, 0.2), (0.25, 0.2)),
                {"c_D_max": 3.23, "c_L_max": 1.00, "St": 0.300}),
    "2d3": Case(2, 1.5, 1.0, 8.0, False, ((0.15, 0.2), (0.25, 0.2)),
                {"c_D_max": 2.950921575, "c_L_max": 0.47795, "delta_p_t8": -0.1116}, pulsed=True),
    "3d1z": Case(3, 0.45, 0.2, 30.0, True, ((0.45, 0.2, 0.205), (0.55, 0.2, 0.205)),
                 {"c_D": 6.18533, "c_L": 0.009401, "delta_p": 0.170}),
}
# The consistent scheme: gmsh's triangles, prisms and tetrahedra are not orthogonal, and with the symmetric
# scheme the errors of the two-point face gradients and of the cell gradient -Omega^-1 M^T do not vanish with
# h (BENCHMARKS.md, "Flow around a cylinder"); every case here is a resolved viscous flow, which its face
# memory holds. Its diffusion's non-orthogonal correction stays on with -flow_scheme symmetric.
COMMON = {"flow_diffusion": "implicit", "flow_scheme": "consistent", "flow_nonorthogonal": True}
STEADY = {**COMMON, "flow_steady_tol": 1e-5, "pressure_ksp_rtol": 1e-10}
UNSTEADY = {**COMMON, "flow_cfl": 0.5}


class CylinderError(ValueError):
    """A mesh or inflow the benchmark cannot run on, found before the first step."""


def inflow(case):
    """The inflow velocity u(x, t) of ``case``: 4 U y (H - y) / H^2 in 2D, 16 U y z (H - y)(H - z) / H^4 in 3D."""

    def velocity(x, t):
        peak = case.peak * math.sin(math.pi * t / 8) if case.pulsed else case.peak
        y = x[:, 1]
        profile = 4 * y * (HEIGHT - y) / HEIGHT**2
        if case.dim == 3:
            profile = profile * 4 * x[:, 2] * (HEIGHT - x[:, 2]) / HEIGHT**2
        out = numpy.zeros_like(x)
        out[:, 0] = peak * profile
        return out

    return velocity


def check_groups(names):
    """A CylinderError where the mesh's boundary groups ``names`` lack one of the four, listing those it has."""
    missing = [name for name in GROUPS if name not in names]
    if missing:
        raise CylinderError(f"the mesh has no group {', '.join(missing)} (it has: {', '.join(names)}); "
                            f"the benchmark needs {', '.join(GROUPS)}")


def check_mesh(solver, case):
    """A cylinder that closes and an inflow that enters everywhere: CylinderErrors. A closed curve's
    outward vector areas sum to 0; so do the x and y parts of those of a 3D cylinder from wall to wall
    (its axis along z), whose ends are curves in the planes z = 0 and z = H: half (x dy - y dx, ...)
    around them. Its z part is the difference of its two end polygons' areas, not 0 on a mesh."""
    g, mpi = solver.geometry, solver.mpi
    on = g.boundary_tags == g.boundary_names["cylinder"]
    area = mpi.allreduce(float(g.boundary_areas[on].sum()))
    vector = mpi.allreduce((g.boundary_areas[on, None] * g.boundary_normals[on]).sum(axis=0))
    if area == 0 or numpy.linalg.norm(vector[:2]) > 1e-6 * area:
        raise CylinderError(f"the group cylinder is not a closed {'curve' if case.dim == 2 else 'surface'}: its "
                            f"faces' outward vector areas sum to {numpy.round(vector, 8).tolist()} over an area of "
                            f"{area:.6g}")
    inlet = g.boundary_tags == g.boundary_names["inlet"]
    x, n = g.boundary_centroids[inlet], g.boundary_normals[inlet]
    for t in numpy.linspace(0.0, case.t_end, 33):
        leaving = (inflow(case)(x, t) * n).sum(axis=1) > 0
        if mpi.allreduce(int(leaving.sum())):
            where = x[leaving][0].tolist() if leaving.any() else None
            raise CylinderError(f"the inflow leaves the domain at t = {t:g} (at {where} on some rank): it must "
                                "enter through the inlet")


def main():
    reader = OptionsReader("", "Flow around a cylinder (DFG benchmark)")
    name = reader.choice("cyl_case", "2d1", tuple(CASES), "the benchmark case")
    case = CASES[name]
    level = reader.int("cyl_level", 1, "refinement level of the gmsh mesh: cells of 0.04 / 2^K (2D and 3D prisms, "
                       "20 * 2^K layers) or 0.08 / 2^K (3D tetrahedra), a quarter of that on the cylinder", low=0,
                       high=8)
    order = reader.int("cyl_order", 2, "geometry order of the gmsh mesh's cells (2: the cylinder curved)", low=1,
                       high=2)
    cells = reader.choice("cyl_cells", "prisms", CELLS, "3D: prisms extruded from the cross-section's triangles, "
                          "or tetrahedra")
    t_end = reader.real("cyl_t_end", case.t_end, "time to run to (steady cases stop earlier at a steady state)",
                        low=0.0, above=0.0)
    mesh_path = reader.string("flow_mesh", "", "run on this mesh (groups inlet, outlet, wall, cylinder) instead")
    partitioner = reader.choice("flow_mesh_partitioner", "metis", tuple(PARTITIONERS), "how a mesh is cut among ranks")
    directory = reader.string("flow_output_dir", "", "directory for forces.csv, summary.json, forces.png and XDMF")
    case = Case(**{**case.__dict__, "t_end": t_end})
    comm = PETSc.COMM_WORLD
    mpi = comm.tompi4py()
    if directory:
        output.prepare_directory(directory, mpi)
    mat_type = program_mat_type("cylinder")
    with tempfile.TemporaryDirectory() as scratch:
        path = mesh_path or _gmsh_mesh(scratch, case.dim, level, order, cells, mpi)
        try:
            result = run(name, case, path, mat_type, partitioner, comm, directory)
        except (MeshError, BoundaryError, CylinderError, OptionError, CheckpointError) as exc:
            exit_with(mpi, f"cylinder: {exc}")
    return 0 if result is not None else 1


def _gmsh_mesh(directory, dim, level, order, cells, mpi):
    path = os.path.join(directory, f"cylinder{dim}d-{level}.msh")

    def make():
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import cylinder_mesh  # gmsh: an optional extra

        cylinder_mesh.make(dim, level, path, order, cells)

    try:
        on_rank_zero(mpi, make)
    except RankZeroError as exc:
        exit_with(mpi, f"cylinder: cannot make the gmsh mesh ({exc}); give a mesh with -flow_mesh")
    return path


def run(name, case, path, mat_type, partitioner, comm, directory):
    """The case on the mesh at ``path``: its summary (on every rank), None after a blow-up."""
    mpi = comm.tompi4py()
    parts = distribute(path, mpi, partitioner)
    if parts.geometry.dim != case.dim:
        raise CylinderError(f"the case {name} is {case.dim}D and the mesh {path} is {parts.geometry.dim}D")
    conditions = {"inlet": Inflow(inflow(case), steady=not case.pulsed), "outlet": Outflow(), "wall": Wall(),
                  "cylinder": Wall()}
    check_groups(parts.geometry.boundary_names)  # before the solver, which would refuse conditions on no group
    defaults = {**(STEADY if case.steady else UNSTEADY), "flow_t_end": case.t_end,
                "flow_velocity_scale": case.peak,
                **({"flow_checkpoint_file": os.path.join(directory, "flow_checkpoint.h5")} if directory else {})}
    with option_defaults("", defaults):
        solver = FlowSolver(parts.geometry, comm, mat_type, NU, conditions)
    check_mesh(solver, case)
    g = solver.geometry
    PETSc.Sys.Print(f"cylinder: {name}, {g.num_global_cells} cells ({path}) on {mpi.size} ranks; "
                    f"{solver.describe_conditions()}")
    force, pressure = GroupForce(solver, "cylinder"), PointPressure(solver, case.probes)
    scale = 2.0 / (case.u_mean**2 * DIAMETER * (HEIGHT if case.dim == 3 else 1.0))
    rows = []

    def observe(state):
        F, p = force(state), pressure(state)
        rows.append((state.t, scale * F[0], scale * F[1], p[0] - p[1]))

    if help_requested():
        raise SystemExit(0)  # the options are listed: nothing to run
    start = time.perf_counter()
    state = solver.initial_state()
    earlier = _earlier_run(directory, state.t, mpi) if solver.restart_file else ([], 0.0)
    rows.extend(earlier[0])
    try:
        state = solver.run(state, observe, watched_only=True)  # the force and the probes: watched
    except FlowBlowUp as exc:
        PETSc.Sys.Print(str(exc))
        return None
    wall = time.perf_counter() - start
    solver.print_timing()
    summary = summarize(name, case, numpy.array(rows))
    summary.update({"cells": g.num_global_cells, "mesh": os.path.basename(path), "ranks": mpi.size,
                    "steps": state.step, "wall_s": wall, "wall_s_total": earlier[1] + wall,
                    "timing": solver.timing()})
    fields = [output.mesh_field(mpi, g, solver.xp, a) for a in (state.u, state.p)]
    if mpi.rank == 0:
        _print(summary)
        if directory:
            _write(directory, summary, numpy.array(rows), parts.mesh, *fields)
    return summary


def _earlier_run(directory, t, mpi):
    """After -flow_restart at time ``t``: the rows of DIR/forces.csv up to ``t`` and
    the wall time of DIR/summary.json, from the run that wrote the checkpoint
    (none where DIR holds no such run), so the outputs cover the whole run."""
    def read():
        if not directory or not os.path.exists(os.path.join(directory, "forces.csv")):
            return [], 0.0
        rows = numpy.atleast_2d(numpy.loadtxt(os.path.join(directory, "forces.csv"), delimiter=",", skiprows=1))
        with open(os.path.join(directory, "summary.json")) as stream:
            earlier = json.load(stream)
        return ([tuple(row) for row in rows if row[0] < t + 1e-9 * (1 + t)],  # forces.csv has 10 digits
                earlier.get("wall_s_total", earlier["wall_s"]))

    try:
        return on_rank_zero(mpi, read)
    except RankZeroError as exc:
        exit_with(mpi, f"cylinder: cannot continue the earlier run's forces.csv and summary.json in "
                       f"{os.path.abspath(directory)} after -flow_restart ({exc})")


def summarize(name, case, rows):
    """The case's quantities from the rows (t, c_D, c_L, delta_p), with the references and relative errors."""
    t, c_d, c_l, dp = rows.T
    if case.steady:
        values = {"c_D": c_d[-1], "c_L": c_l[-1], "delta_p": dp[-1]}
    elif case.pulsed:
        i, j = int(numpy.argmax(c_d)), int(numpy.argmax(c_l))
        values = {"c_D_max": c_d[i], "t_c_D_max": t[i], "c_L_max": c_l[j], "t_c_L_max": t[j],
                  "delta_p_t8": float(numpy.interp(8.0, t, dp))}
    else:
        values = periodic(t, c_d, c_l, dp, case)
    errors = {key: abs(values[key] / ref - 1) for key, ref in case.reference.items()
              if key in values and values[key] is not None}
    return {"case": name, "values": {k: (None if v is None else float(v)) for k, v in values.items()},
            "reference": case.reference, "relative_errors": errors, "t_end": float(t[-1])}


def periodic(t, c_d, c_l, dp, case):
    """2D-2 over the last lift periods: c_D max, c_L max, St = D f / U_mean, and delta_p half a period
    after the last lift maximum; None where the lift has not yet two maxima in the second half."""
    late = t >= t[-1] / 2
    tl, cl = t[late], c_l[late]
    peaks = numpy.flatnonzero((cl[1:-1] > cl[:-2]) & (cl[1:-1] >= cl[2:]) & (cl[1:-1] > 0)) + 1
    if peaks.size < 3:
        return {"c_D_max": float(c_d[late].max()), "c_L_max": float(cl.max()), "St": None, "delta_p": None}
    times = [_vertex(tl[k - 1:k + 2], cl[k - 1:k + 2]) for k in peaks]
    period = float(numpy.mean(numpy.diff(times[-4:])))
    last = t >= t[-1] - 2 * period
    return {"c_D_max": float(c_d[last].max()), "c_L_max": float(c_l[last].max()), "St": DIAMETER / period / case.u_mean,
            "period": period, "delta_p": float(numpy.interp(times[-2] + period / 2, t, dp))}


def _vertex(t, c):
    """Time of the top of the parabola through three samples."""
    a, b, _ = numpy.polyfit(t - t[1], c, 2)
    return float(t[1] - b / (2 * a)) if a < 0 else float(t[1])


def _print(summary):
    values, errors = summary["values"], summary["relative_errors"]
    listed = ", ".join(f"{k} {v:.6g}" + (f" ({errors[k]:.2%} off {summary['reference'][k]:g})" if k in errors else "")
                       for k, v in values.items() if v is not None)
    print(f"cylinder: {summary['case']}, {summary['cells']} cells, t = {summary['t_end']:.4g}: {listed}")


def _write(directory, summary, rows, mesh, u, p):
    written = [os.path.join(directory, "forces.csv"), os.path.join(directory, "summary.json"),
               os.path.join(directory, "forces.png")]
    numpy.savetxt(written[0], rows, delimiter=",", header="t,c_D,c_L,delta_p", comments="", fmt="%.10g")
    with open(written[1], "w") as stream:
        json.dump(summary, stream, indent=1)
    plot_forces(written[2], summary, rows)
    written.append(output.write_mesh_xdmf(os.path.join(directory, f"cylinder-{summary['case']}.xdmf"), mesh, u, p))
    print("cylinder: wrote " + ", ".join(os.path.abspath(w) for w in written))


def plot_forces(path, summary, rows):
    """c_D and c_L against time (rows of forces.csv), with the case's reference values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    reference = summary["reference"]
    late = rows[:, 0] >= 0.1 * rows[-1, 0]  # the axes leave out the start from rest (c_D near 2000 at t = 0)
    for ax, column, label in ((axes[0], 1, "c_D"), (axes[1], 2, "c_L")):
        ax.plot(rows[:, 0], rows[:, column], "-", label=f"{summary['cells']} cells")
        shown = list(rows[late, column])
        for key in (label, f"{label}_max"):
            if key in reference:
                ax.axhline(reference[key], color="k", linestyle="--", linewidth=0.8, label=f"reference {key}")
                shown.append(reference[key])
        low, high = min(shown), max(shown)
        ax.set_ylim(low - 0.1 * (high - low) - 1e-3, high + 0.1 * (high - low) + 1e-3)
        ax.set_ylabel(label)
        ax.legend(loc="best", fontsize=8)
    axes[1].set_xlabel("t")
    axes[0].set_title(f"DFG cylinder {summary['case']}")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    sys.exit(main())
