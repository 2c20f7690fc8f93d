"""Hiemenz's plane stagnation-point flow on gmsh triangles: the errors of
velocity and pressure, in the cells and on the no-slip wall, against an
exact steady Navier-Stokes solution, on several meshes, and the observed
orders (Hiemenz, "Die Grenzschicht an einem in den gleichförmigen
Flüssigkeitsstrom eingetauchten geraden Kreiszylinder", Dinglers
Polytechnisches Journal 326, 1911; Schlichting and Gersten, "Boundary-Layer
Theory", 2017, section 5.2). With strain rate a = 1:

    u = x f'(eta), v = -sqrt(nu) f(eta), eta = y / sqrt(nu),
    p = -x^2 / 2 - nu (f^2 / 2 + f'),
    f''' + f f'' - f'^2 + 1 = 0, f(0) = f'(0) = 0, f'(inf) = 1

in (-1, 1) x (0, 1) (demos/meshes.py's domain "hiemenz"), the wall y = 0
(group "wall"), the exact velocity held on the other sides (group
"inflow"; the exact values at the faces' centroids less their net flux,
spread along the sides' normals). The flow starts from the exact velocity,
made discretely divergence-free, and runs to its steady state (max |du/dt|
below 1e-6), or to t = 6, past which the solvers' tolerances keep the
finest meshes' |du/dt| above that (the coarse ones settle by t = 2 to 5).

It is the one exact solution here with a no-slip wall and a stagnation
point, where the DFG cylinders' delta_p is read (Kovasznay's and
Beltrami's boundaries hold the velocity everywhere): its pressure's
normal gradient at the wall, -sqrt(nu) f''(0), is not zero. Besides the
cells' errors it reports, each as an L2 error over the wall, the wall's
pressure (the wall cell's pressure carried to the face's centroid along
its cell gradient, as plugin.flow.forces reads it with the least-squares
gradient; up to its mean) and the wall's shear nu du/dy (the two-point
flux, to the centroid's foot on the face's normal where the scheme
corrects the diffusion, as the forces take it).

    python demos/hiemenz.py -hiemenz_levels 4 -flow_output_dir out    (-flow_scheme symmetric: the other scheme)

Prints, as each mesh is done, its errors and the orders against the mesh
before; with -flow_output_dir DIR writes them to DIR/summary.json
(demos/convergence.py). -help lists every option.
"""

import math
import sys

import numpy
import petsc4py

petsc4py.init(sys.argv)

from petsc4py import PETSc  # noqa: E402
from scipy.integrate import solve_bvp  # noqa: E402

import plugin  # noqa: E402,F401  (registers gpusell, gpuamg, ...)
from gpu_mats.backend import to_host  # noqa: E402
from convergence import (balanced_velocity, gmsh_meshes, l2, less_mean, level_options,  # noqa: E402
                         observed_orders, refuse_bad_input)
from petsc_ext.options import OptionsReader, help_requested, option_defaults  # noqa: E402
from plugin.flow.boundary import Inflow, Wall  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402
from plugin.flow.solver import FlowSolver, program_mat_type  # noqa: E402

DEFAULTS = {"flow_t_end": 6.0, "flow_steady_tol": 1e-6, "flow_diffusion": "implicit", "pressure_ksp_rtol": 1e-11,
            "flow_velocity_scale": 1.0, "flow_scheme": "consistent"}
ETA_END = 12.0  # f' is 1 to 1e-12 past it; f grows as eta there
ERRORS = ("u", "p", "p_wall", "shear")


class Hiemenz:
    """The exact solution for viscosity nu: f from its boundary-value problem, solved to 1e-10."""

    def __init__(self, nu):
        self.nu, self.scale = nu, math.sqrt(nu)
        eta = numpy.linspace(0.0, ETA_END, 1201)
        guess = numpy.vstack([eta - 1 + numpy.exp(-eta), 1 - numpy.exp(-eta), numpy.exp(-eta)])
        solution = solve_bvp(lambda e, f: numpy.vstack([f[1], f[2], -f[0] * f[2] + f[1] ** 2 - 1]),
                             lambda f0, f1: numpy.array([f0[0], f0[1], f1[1] - 1.0]), eta, guess, tol=1e-10,
                             max_nodes=100000)
        if not solution.success:
            raise RuntimeError(f"hiemenz: f's boundary-value problem: {solution.message}")
        self.f = solution.sol
        self.wall_curvature = float(self.f(0.0)[2])  # f''(0)

    def profile(self, y):
        """f and f' at heights y."""
        eta = numpy.asarray(y) / self.scale
        inside = numpy.minimum(eta, ETA_END)
        f = self.f(inside)
        return f[0] + (eta - inside), f[1]

    def velocity(self, x, t=0.0):
        f, df = self.profile(x[:, 1])
        return numpy.column_stack([x[:, 0] * df, -self.scale * f])

    def pressure(self, x):
        f, df = self.profile(x[:, 1])
        return -0.5 * x[:, 0] ** 2 - self.nu * (0.5 * f * f + df)

    def wall_shear(self, x):
        """nu du/dy at the wall points x."""
        return self.scale * self.wall_curvature * x[:, 0]


def box_normals(x):
    """The outward normals of the sides x = -1, x = 1 and y = 1 at points x on them."""
    normals = numpy.zeros_like(x)
    normals[x[:, 0] < -1 + 1e-9, 0] = -1.0
    normals[x[:, 0] > 1 - 1e-9, 0] = 1.0
    normals[x[:, 1] > 1 - 1e-9, 1] = 1.0
    return normals


def errors(exact, solver, state, mpi):
    """The L2 errors of the cells' u and p (p up to its mean), and of the wall's pressure (up to its mean) and shear."""
    g, xp = solver.geometry, solver.xp
    u, p = to_host(xp, state.u), to_host(xp, state.p)
    v = g.volumes
    result = {"u": l2(v, (u - exact.velocity(g.centroids).T).T, mpi),
              "p": l2(v, less_mean(v, p - exact.pressure(g.centroids), mpi), mpi)}
    wall = numpy.flatnonzero(g.boundary_tags == g.boundary_names["wall"])
    rows = g.boundary_cells[wall] - g.cell_start
    area, normal, delta = g.boundary_areas[wall], g.boundary_normals[wall], g.boundary_distances[wall]
    centres = g.boundary_centroids[wall]
    reach = centres - g.centroids[rows]
    gradient = to_host(xp, solver.stepper.pressure_gradient(state.p))
    p_wall = p[rows] + numpy.einsum("fe,ef->f", reach, gradient[:, rows])
    result["p_wall"] = l2(area, less_mean(area, p_wall - exact.pressure(centres), mpi), mpi)
    tangential = u[0, rows]  # the wall is y = 0: u is its tangential velocity
    if solver.operators.diffusion_correction is not None:  # the forces' flux: to the foot of the centroid
        grad_u = to_host(xp, solver.stepper.velocity_gradients(state.u, state.t)).reshape(g.dim, g.dim, -1)
        tangential = tangential + numpy.einsum("fe,ef->f", reach - delta[:, None] * normal, grad_u[0][:, rows])
    result["shear"] = l2(area, exact.nu * tangential / delta - exact.wall_shear(centres), mpi)
    return result


def run_level(path, exact, mat_type, comm):
    mpi = comm.tompi4py()
    g = distribute(path, mpi, "metis").geometry
    with option_defaults("", DEFAULTS):
        held = balanced_velocity(exact.velocity, g, mpi, g.boundary_tags == g.boundary_names["inflow"], box_normals)
        solver = FlowSolver(g, comm, mat_type, exact.nu, {"wall": Wall(), "inflow": Inflow(held, steady=True)})
    if help_requested():
        raise SystemExit(0)  # the options are listed: nothing to run
    state = solver.run(solver.initial_state(exact.velocity(g.centroids).T, project=True))
    solver.print_timing()
    cells = g.num_global_cells
    return {"cells": cells, "h": (2.0 / cells) ** 0.5, "steps": state.step, "t": state.t,
            **{f"{key}_error": value for key, value in errors(exact, solver, state, mpi).items()}}


def main():
    reader = OptionsReader("", "Hiemenz's stagnation-point flow")
    size, levels, directory, mesh_dir = level_options(reader, "hiemenz", 0.1, 7)
    nu = reader.real("hiemenz_nu", 0.01, "viscosity (the strain rate is 1: the boundary layer is 2.4 sqrt(nu) "
                     "thick, the box 1 high)", low=1e-5, high=0.1)
    comm = PETSc.COMM_WORLD
    mat_type = program_mat_type("hiemenz")
    exact = Hiemenz(nu)
    PETSc.Sys.Print(f"hiemenz: nu {nu:g}, f''(0) {exact.wall_curvature:.6f}: cells, L2 errors (orders) of the cells' "
                    "u and p, the wall's p and shear")
    observed_orders("hiemenz", levels, size, _mesh, lambda path: run_level(path, exact, mat_type, comm), ERRORS,
                    directory, mesh_dir, {"nu": nu, "size": size, "wall_curvature": exact.wall_curvature})
    return 0


def _mesh(h, path):
    gmsh_meshes().make("triangles", h, path, domain="hiemenz")


if __name__ == "__main__":
    sys.exit(refuse_bad_input("hiemenz", main))
