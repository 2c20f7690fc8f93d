"""Ethier and Steinman's 3D Beltrami flow on gmsh tetrahedra: the errors of
velocity and pressure against the exact unsteady Navier-Stokes solution on
several meshes, and the observed orders of accuracy (Ethier and Steinman,
"Exact fully 3D Navier-Stokes solutions for benchmarking", Int. J. Numer.
Meth. Fluids 19, 1994; a = pi / 4, d = pi / 2):

    u = -a (e^{ax} sin(ay + dz) + e^{az} cos(ax + dy)) e^{-nu d^2 t}, v and w by cycling x, y, z
    p = -a^2 / 2 (e^{2ax} + e^{2ay} + e^{2az} + 2 sin(ax + dy) cos(az + dx) e^{a(y + z)} + ...) e^{-2 nu d^2 t}

in the unit cube (demos/meshes.py, -beltrami_levels meshes from cells of
about -beltrami_size, each with cells half the size of the last), the exact
velocity held on the whole boundary and the flow started from the exact
velocity at the centroids, made discretely divergence-free, run to
-flow_t_end. The time step follows the CFL number, so it shrinks with the
mesh and the order observed is that of the whole method. The held
velocities are the exact ones at the faces' centroids less their net flux
(O(h^2)) spread over the boundary along its normals, so that they balance.

    python demos/beltrami.py -beltrami_levels 3 -flow_output_dir out    (-flow_scheme symmetric: the other scheme)

The defaults are the consistent scheme with -flow_wall_pressure_gradient interior
and -flow_convection_skewness 1 (each can be turned off).

Prints, as each mesh is done, the L2 errors of velocity and pressure
(pressure up to its mean) and the orders against the mesh before; with
-flow_output_dir DIR writes them to DIR/summary.json (demos/convergence.py).
-help lists every option.
"""

import math
import sys

import numpy
import petsc4py

petsc4py.init(sys.argv)

from petsc4py import PETSc  # noqa: E402

import plugin  # noqa: E402,F401  (registers gpusell, gpuamg, ...)
from gpu_mats.backend import to_host  # noqa: E402
from convergence import (balanced_velocity, gmsh_meshes, l2, less_mean, level_options,  # noqa: E402
                         observed_orders, refuse_bad_input)  # noqa: E402
from petsc_ext.options import OptionsReader, help_requested, option_defaults  # noqa: E402
from plugin.flow.boundary import Inflow  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402
from plugin.flow.solver import FlowSolver, program_mat_type  # noqa: E402

A, D = math.pi / 4, math.pi / 2
# The consistent scheme (second order on tetrahedra, where the symmetric scheme is not) with the pressure's
# wall gradient from the interior and the convected velocity at the faces' centroids, which lift the
# pressure's order here (BENCHMARKS.md) and blow up on 3D-1Z's tetrahedra.
DEFAULTS = {"flow_t_end": 0.2, "flow_diffusion": "implicit", "pressure_ksp_rtol": 1e-10, "flow_velocity_scale": 2.0,
            "flow_scheme": "consistent", "flow_wall_pressure_gradient": "interior", "flow_convection_skewness": True}


class Beltrami:
    """The exact solution for viscosity nu."""

    def __init__(self, nu):
        self.nu = nu

    def velocity(self, x, t):
        decay = math.exp(-self.nu * D * D * t)
        return numpy.column_stack([-A * (numpy.exp(A * x[:, i]) * numpy.sin(A * x[:, j] + D * x[:, k])
                                         + numpy.exp(A * x[:, k]) * numpy.cos(A * x[:, i] + D * x[:, j])) * decay
                                   for i, j, k in ((0, 1, 2), (1, 2, 0), (2, 0, 1))])

    def pressure(self, x, t):
        terms = sum(numpy.exp(2 * A * x[:, i]) + 2 * numpy.sin(A * x[:, i] + D * x[:, j])
                    * numpy.cos(A * x[:, k] + D * x[:, i]) * numpy.exp(A * (x[:, j] + x[:, k]))
                    for i, j, k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)))
        return -A * A / 2 * terms * math.exp(-2 * self.nu * D * D * t)


def cube_normals(x):
    """The outward normals of the unit cube at points x of its boundary."""
    normals = numpy.zeros_like(x)
    for axis in range(x.shape[1]):
        normals[x[:, axis] < 1e-9, axis] = -1.0
        normals[x[:, axis] > 1.0 - 1e-9, axis] = 1.0
    return normals


def errors(exact, g, u, p, t, mpi):
    """(L2 error of u, L2 error of p up to its mean) at time t, volume-weighted over the whole mesh."""
    v = g.volumes
    return (l2(v, (u - exact.velocity(g.centroids, t).T).T, mpi),
            l2(v, less_mean(v, p - exact.pressure(g.centroids, t), mpi), mpi))


def run_level(path, exact, mat_type, comm):
    mpi = comm.tompi4py()
    parts = distribute(path, mpi, "metis")
    g = parts.geometry
    with option_defaults("", DEFAULTS):
        held = Inflow(balanced_velocity(exact.velocity, g, mpi, numpy.ones(len(g.boundary_tags), bool), cube_normals),
                      steady=False)
        solver = FlowSolver(g, comm, mat_type, exact.nu, {name: held for name in g.boundary_names})
    if help_requested():
        raise SystemExit(0)  # the options are listed: nothing to run
    state = solver.initial_state(exact.velocity(g.centroids, 0.0).T, project=True)
    state = solver.run(state)
    solver.print_timing()
    u_error, p_error = errors(exact, g, to_host(solver.xp, state.u), to_host(solver.xp, state.p), state.t, mpi)
    cells = g.num_global_cells
    return {"cells": cells, "h": (1.0 / cells) ** (1 / 3), "u_error": u_error, "p_error": p_error,
            "steps": state.step, "t": state.t}


def main():
    reader = OptionsReader("", "Ethier-Steinman Beltrami flow")
    size, levels, directory, mesh_dir = level_options(reader, "beltrami", 0.2, 6)
    nu = reader.real("beltrami_nu", 0.1, "viscosity (the velocity is about 1, the cube's side 1)", low=1e-6)
    comm = PETSc.COMM_WORLD
    mat_type = program_mat_type("beltrami")
    exact = Beltrami(nu)
    PETSc.Sys.Print(f"beltrami: nu {nu:g}: cells, L2 errors (orders) of u and p at the end of each run")
    observed_orders("beltrami", levels, size, _mesh, lambda path: run_level(path, exact, mat_type, comm), ("u", "p"),
                    directory, mesh_dir, {"nu": nu, "size": size})
    return 0


def _mesh(h, path):
    gmsh_meshes().make("tetrahedra", h, path)


if __name__ == "__main__":
    sys.exit(refuse_bad_input("beltrami", main))
