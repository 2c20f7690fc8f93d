"""The transition of the 3D Taylor-Green vortex at Re 1600 (Brachet, Meiron,
Orszag, Nickel, Morf and Frisch, J. Fluid Mech. 130, 1983; case C3.5 of the
high-order CFD workshops: Wang et al., "High-order CFD methods: current
status and perspective", Int. J. Numer. Methods Fluids 72, 2013) on a
periodic DMDA box (0, 2 pi)^3 of -da_grid_x x -da_grid_y x -da_grid_z cells
(64^3 by default):

    u = sin x cos y cos z,  v = -cos x sin y cos z,  w = 0,
    p = (cos 2x + cos 2y) (cos 2z + 2) / 16,

nu = 1 / -flow_re (1600), to t = -flow_t_end (20). After every step the
kinetic energy E = sum 1/2 |u|^2 Omega / |box| (inside the step's CUDA
graph on the GPU, read back with the step's other values); the dissipation
rate -dE/dt by central differences. With -tg_reference CSV (columns t, energy,
dissipation: this demo's energy.csv of a finer run, or the published
spectral DNS), the L2 difference of the dissipation rate over the run's
times within the reference's, relative to the reference's L2 norm over
them, and the curves in one PNG. A subgrid model: -flow_les.

    python demos/taylor_green_3d.py -da_grid_x 256 -da_grid_y 256 -da_grid_z 256 -flow_output_dir fine
    python demos/taylor_green_3d.py -flow_les wale -tg_reference fine/energy.csv -flow_output_dir wale

With -flow_output_dir DIR it writes summary.json (the cells, the model, the
steps, the time per step, the dissipation's peak and its time, the L2
difference), energy.csv (t, energy, dissipation) and dissipation.png.
-help lists every option.
"""

import json
import math
import os
import sys

import petsc4py

petsc4py.init(sys.argv)

import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import plugin  # noqa: E402,F401  (registers gpusell, ainv, cacg)
from petsc_ext.options import OptionError, OptionsReader, help_requested, option_defaults  # noqa: E402
from gpu_mats.backend import to_host  # noqa: E402
from gpu_mats.kernels import family  # noqa: E402
from plugin.flow import output  # noqa: E402
from plugin.flow.collective import exit_with  # noqa: E402
from plugin.flow.solver import FlowBlowUp, FlowSolver, program_mat_type  # noqa: E402

LENGTHS = (2 * math.pi,) * 3


def vortex(x):
    """The starting velocity (3, n) at the cell centroids x (n, 3)."""
    sx, sy, cx, cy, cz = numpy.sin(x[:, 0]), numpy.sin(x[:, 1]), numpy.cos(x[:, 0]), numpy.cos(x[:, 1]), \
        numpy.cos(x[:, 2])
    return numpy.array([sx * cy * cz, -cx * sy * cz, numpy.zeros(len(x))])


class KineticEnergy:
    """``energy(state)``: the kinetic energy per unit volume, its sums queued
    after each step (FractionalStep.watch: allocation-free dot products,
    which the step's CUDA graph replays) and read with the step's values."""

    def __init__(self, solver):
        xp, n = solver.xp, solver.geometry.num_cells
        self.solver, self.xp = solver, xp
        self.volumes = xp.asarray(solver.geometry.volumes)
        self.volume = solver.mpi.allreduce(float(solver.geometry.volumes.sum()))
        self.kernels = family("pcg", xp)
        self.weighted, self.partials = xp.empty((3, n)), xp.empty((3, self.kernels.partial_count(n)))
        self.out = xp.zeros(3)
        solver.stepper.watch(self._queue, self.out)

    def _queue(self, state):
        u = state.u
        self.xp.multiply(u, self.volumes, out=self.weighted)
        self.kernels.partial_dots(self.partials, u[0], self.weighted[0], u[1], self.weighted[1], u[2],
                                  self.weighted[2])
        self.kernels.sum_partials(self.out, self.partials)

    def __call__(self, state):
        sums = self.solver.stepper.watched(self.out, state)
        if sums is None:
            self._queue(state)
            sums = to_host(self.xp, self.out)
        mpi, total = self.solver.mpi, float(sums.sum())
        return 0.5 * (total if mpi.Get_size() == 1 else mpi.allreduce(total)) / self.volume  # each step: no pickle


def dissipation(t, energy):
    """-dE/dt at each time (central differences inside, one-sided at the ends)."""
    return -numpy.gradient(energy, t) if len(t) > 1 else numpy.zeros_like(t)


def relative_l2_difference(t, rate, reference):
    """||rate - reference's||_2 / ||reference's||_2 over the times of ``t``
    within the reference's (the reference's rate interpolated linearly,
    the integrals by the trapezoidal rule); None where they do not overlap."""
    inside = (t >= reference[0, 0]) & (t <= reference[-1, 0])
    if inside.sum() < 2:
        return None
    t, rate = t[inside], rate[inside]
    wanted = numpy.interp(t, reference[:, 0], reference[:, 2])
    return math.sqrt(numpy.trapezoid((rate - wanted) ** 2, t) / numpy.trapezoid(wanted**2, t))


def read_reference(path):
    """(k, 3) rows of t, energy, dissipation from a CSV with a header line (this demo's energy.csv)."""
    try:
        rows = numpy.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except (OSError, ValueError) as exc:
        raise OptionError(f"-tg_reference {path}: {exc}") from exc
    if rows.shape[1] < 3 or len(rows) < 2:
        raise OptionError(f"-tg_reference {path}: give a CSV with a header and at least two rows of t, energy, "
                          "dissipation")
    return rows[:, :3]


def main():
    reader = OptionsReader("", "3D Taylor-Green vortex demo")
    re = reader.real("flow_re", 1600.0, "Reynolds number 1 / nu (velocity amplitude and wavelength / 2 pi are 1)",
                     low=1e-12)
    reference_path = reader.string("tg_reference", "", "CSV of t, energy, dissipation (a header line first) to "
                                   "compare the dissipation rate with")
    directory = reader.string("flow_output_dir", "", "directory for summary.json, energy.csv and dissipation.png "
                              "(none: no files)")
    comm = PETSc.COMM_WORLD
    mpi = comm.tompi4py()
    if directory:
        output.prepare_directory(directory, mpi)
    periodic = PETSc.DM.BoundaryType.PERIODIC
    try:
        reference = read_reference(reference_path) if reference_path else None
        with option_defaults("", {"flow_t_end": 20.0}):
            da = PETSc.DMDA().create(dim=3, sizes=(64, 64, 64), boundary_type=(periodic,) * 3, stencil_width=1,
                                     comm=comm, setup=False)
            da.setFromOptions()
            da.setMatType(program_mat_type("taylor_green_3d"))
            da.setUp()
            solver = FlowSolver.from_dmda(da, LENGTHS, 1.0 / re)
    except OptionError as exc:
        exit_with(mpi, f"taylor_green_3d: {exc}")
    if help_requested():
        raise SystemExit(0)
    sizes = da.getSizes()
    PETSc.Sys.Print(f"taylor_green_3d: Re {re:g}, {' x '.join(map(str, sizes))} cells on {mpi.size} ranks, "
                    f"subgrid model {solver.stepper.eddy.model if solver.stepper.eddy else 'none'}")
    energy_of = KineticEnergy(solver)
    history = []

    def sample(state):
        history.append((state.t, energy_of(state)))

    try:
        start = solver.initial_state(vortex(solver.geometry.centroids), project=True)
        sample(start)
        solver.run(start, sample, watched_only=True)  # the energy: watched
    except FlowBlowUp as exc:
        PETSc.Sys.Print(str(exc))
        return 1
    solver.print_timing()
    t, energy = numpy.array(history).T
    rate = dissipation(t, energy)
    peak = int(numpy.argmax(rate))
    timing = solver.timing()
    summary = {"case": "taylor_green_3d", "re": re, "cells": list(sizes), "les": solver.stepper.eddy.model
               if solver.stepper.eddy else "none", "steps": solver.steps_run, "t": float(t[-1]),
               "ms_per_step": 1e3 * timing["seconds_per_step"], "pressure_iterations_per_step":
               solver.pressure_iterations / max(solver.steps_run, 1),
               "peak_dissipation": float(rate[peak]), "t_of_peak": float(t[peak]),
               "reference": reference_path or None,
               "dissipation_l2_difference": None if reference is None else relative_l2_difference(t, rate, reference)}
    PETSc.Sys.Print(f"taylor_green_3d: t = {t[-1]:.4g} in {solver.steps_run} steps; peak dissipation "
                    f"{rate[peak]:.5g} at t = {t[peak]:.4g}" +
                    ("" if summary["dissipation_l2_difference"] is None else
                     f"; L2 difference from the reference's {summary['dissipation_l2_difference']:.4f}"))
    if directory and mpi.rank == 0:
        _write(directory, summary, t, energy, rate, reference)
    return 0


def _write(directory, summary, t, energy, rate, reference):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = [os.path.join(directory, name) for name in ("summary.json", "energy.csv", "dissipation.png")]
    with open(written[0], "w") as stream:
        json.dump(summary, stream, indent=1)
    numpy.savetxt(written[1], numpy.column_stack([t, energy, rate]), delimiter=",", header="t,energy,dissipation",
                  comments="")
    figure, axes = plt.subplots(figsize=(6, 4))
    if reference is not None:
        axes.plot(reference[:, 0], reference[:, 2], "k-", label=os.path.basename(summary["reference"]))
    axes.plot(t, rate, label=f"{' x '.join(map(str, summary['cells']))}, LES {summary['les']}")
    axes.set_xlabel("t")
    axes.set_ylabel("-dE/dt")
    axes.set_title(f"Taylor-Green vortex, Re {summary['re']:g}")
    axes.legend()
    figure.tight_layout()
    figure.savefig(written[2], dpi=120)
    print("taylor_green_3d: wrote " + ", ".join(os.path.abspath(w) for w in written))


if __name__ == "__main__":
    sys.exit(main())
