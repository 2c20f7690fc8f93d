"""2D Taylor-Green vortex on a periodic DMDA: errors against the exact
decaying solution on several grids, and the observed orders of accuracy.

    u = (-cos x sin y, sin x cos y) exp(-2 nu t),  p = -(cos 2x + cos 2y) exp(-4 nu t) / 4

on (0, 2 pi)^2. The time step follows the CFL number, so it shrinks with the
grid and the observed order is that of the whole method (space and time).

    python demos/taylor_green.py -tg_grids 16,32,64 -flow_re 100 -flow_t_end 1

Prints, per grid, the L2 errors of velocity and pressure (pressure up to its
mean) and the order between successive grids.
"""

import sys

import petsc4py

petsc4py.init(sys.argv)

import numpy  # noqa: E402
from mpi4py import MPI  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import plugin  # noqa: E402,F401  (registers gpusell, ainv, cacg)
from gpu_mats.backend import to_host  # noqa: E402
from petsc_ext.device import gpu_available  # noqa: E402
from petsc_ext.options import OptionsReader, help_requested  # noqa: E402
from plugin.flow.solver import CPU_NOTICE, FlowSolver  # noqa: E402

LENGTHS = (2 * numpy.pi, 2 * numpy.pi)


def exact(x, y, t, nu):
    decay = numpy.exp(-2 * nu * t)
    u = numpy.array([-numpy.cos(x) * numpy.sin(y), numpy.sin(x) * numpy.cos(y)]) * decay
    return u, -(numpy.cos(2 * x) + numpy.cos(2 * y)) / 4 * decay**2


def errors(n, nu):
    """L2 errors (velocity, pressure) at -flow_t_end on an n x n grid, and the steps taken."""
    periodic = PETSc.DM.BoundaryType.PERIODIC
    da = PETSc.DMDA().create(dim=2, sizes=(n, n), boundary_type=(periodic, periodic), stencil_width=1, setup=False)
    da.setMatType("gpusell" if gpu_available() else "aij")
    da.setFromOptions()
    da.setUp()
    solver = FlowSolver.from_dmda(da, LENGTHS, nu)
    if help_requested():
        raise SystemExit(0)  # the options are listed: nothing to run
    g = solver.geometry
    x, y = g.centroids.T
    state = solver.run(solver.initial_state(exact(x, y, 0.0, nu)[0]))
    u_exact, p_exact = exact(x, y, state.t, nu)
    u, p = to_host(solver.xp, state.u), to_host(solver.xp, state.p)
    comm = da.getComm().tompi4py()

    def total(values):
        return comm.allreduce(float(values.sum()), op=MPI.SUM)

    volume = total(g.volumes)
    p_shift = total(p * g.volumes) / volume - total(p_exact * g.volumes) / volume
    error_u = numpy.sqrt(total(((u - u_exact) ** 2).sum(axis=0) * g.volumes))
    error_p = numpy.sqrt(total((p - p_exact - p_shift) ** 2 * g.volumes))
    steps = state.step
    solver.destroy()
    da.destroy()
    return error_u, error_p, steps


def main():
    if not gpu_available() and PETSc.Options().getString("dm_mat_type", "aij") == "aij":
        PETSc.Sys.Print(f"taylor_green: {CPU_NOTICE}")
    reader = OptionsReader("", "Taylor-Green vortex demo")
    text = reader.string("tg_grids", "16,32,64", "grids (cells per side), comma-separated, increasing")
    try:
        grids = [int(n) for n in text.split(",")]
    except ValueError:
        raise SystemExit(f"taylor_green: -tg_grids {text}: give cells per side as integers, e.g. 16,32,64") from None
    if min(grids) < 2 or any(b <= a for a, b in zip(grids, grids[1:])):
        raise SystemExit(f"taylor_green: -tg_grids {text}: the grids must have at least 2 cells per side and "
                         "increase (an order needs two different grids)")
    re = reader.real("flow_re", 100.0, "Reynolds number 1 / nu (velocity amplitude and wavelength / 2 pi are 1)",
                     low=1e-12)
    if PETSc.Options().hasName("da_grid_x") or PETSc.Options().hasName("da_grid_y"):
        raise SystemExit("taylor_green: the grids come from -tg_grids, not -da_grid_x/-da_grid_y")
    results = []
    for n in grids:
        error_u, error_p, steps = errors(n, 1.0 / re)
        line = f"taylor-green: {n}x{n}: {steps} steps, L2 error velocity {error_u:.4e}, pressure {error_p:.4e}"
        if results:
            previous_n, previous_u, previous_p = results[-1]
            ratio = numpy.log(n / previous_n)
            line += (f"; order velocity {numpy.log(previous_u / error_u) / ratio:.2f}, "
                     f"pressure {numpy.log(previous_p / error_p) / ratio:.2f}")
        PETSc.Sys.Print(line)
        results.append((n, error_u, error_p))


if __name__ == "__main__":
    main()
