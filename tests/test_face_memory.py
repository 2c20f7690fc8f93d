"""The consistent scheme's face memory (plugin.flow.integrator) with
-flow_face_memory_beta damping: each face's share beta is the factor by
which the step's diffusion damps the mode of the face's two cells, from
their D_ii / Omega_i summed (held against the geometry, serial and across
ranks); with it a Stokes flow on gmsh tetrahedra decays at a time step where
the default beta = 1 - Fo / (1 + Fo^2) lets a mode of a few cells grow
(BENCHMARKS.md)."""

import meshio
import numpy
import pytest
from petsc4py import PETSc

from meshes import MESHES, gmsh_mesh, shared_file, unit_mesh
from petsc_ext.options import option_defaults
from plugin.flow.boundary import Outflow, Wall
from plugin.flow.distribution import distribute
from plugin.flow.mesh import mesh_geometry
from plugin.flow.solver import FlowSolver

NU = 0.1


def _cell_rates(g, held):
    """nu (sum of A / delta over each cell's interior faces and its boundary
    faces in ``held``) / Omega: D_ii / Omega_i from the geometry alone."""
    total = numpy.zeros(len(g.volumes))
    conductance = g.face_areas / g.face_distances
    numpy.add.at(total, g.face_cells[:, 0], conductance)
    numpy.add.at(total, g.face_cells[:, 1], conductance)
    on = numpy.isin(g.boundary_tags, [g.boundary_names[name] for name in held])
    numpy.add.at(total, g.boundary_cells[on], g.boundary_areas[on] / g.boundary_distances[on])
    return NU * total / g.volumes


def _solver(g, comm, diffusion):
    conditions = {"lid": Wall(), "wall": Outflow()}
    with option_defaults("", {"flow_scheme": "consistent", "flow_diffusion": diffusion, "flow_dt": 1e-3,
                              "flow_max_steps": 1, "flow_face_memory_beta": "damping"}):
        return FlowSolver(g, comm, "aij", NU, conditions)


@pytest.mark.parametrize("diffusion", ["implicit", "explicit"])
def test_each_faces_memory_is_its_two_cells_diffusion_damping(diffusion):
    """mode_rate is r_i + r_j on each interior face and 2 r_i on an outflow
    face, r = D_ii / Omega_i; beta is Crank-Nicolson's (2 - x) / (2 + x) or
    explicit diffusion's 1 - x, x = dt mode_rate."""
    g = mesh_geometry(unit_mesh(MESHES["tetrahedra"][0], n=3, jitter=MESHES["tetrahedra"][1]))
    solver = _solver(g, PETSc.COMM_SELF, diffusion)
    rates = _cell_rates(g, ["lid"])
    outflow = numpy.isin(g.boundary_tags, [g.boundary_names["wall"]])
    expected = numpy.concatenate((rates[g.face_cells].sum(axis=1), 2 * rates[g.boundary_cells[outflow]]))
    stepper = solver.stepper
    numpy.testing.assert_allclose(stepper.mode_rate, expected, rtol=1e-13)
    solver.run(solver.initial_state())
    x = 1e-3 * expected
    numpy.testing.assert_allclose(stepper.memory_share, (2 - x) / (2 + x) if diffusion == "implicit" else 1 - x,
                                  rtol=1e-13)
    solver.destroy()


@pytest.mark.mpi
def test_the_memory_rates_of_faces_between_ranks_take_the_other_ranks_cells(tmp_path):
    """Under MPI a face's second cell may be another rank's: its r comes
    through the halo, as the serial geometry gives it."""
    comm = PETSc.COMM_WORLD.tompi4py()
    kind, jitter = MESHES["tetrahedra"]
    path, _ = shared_file(tmp_path, lambda: unit_mesh(kind, n=4, jitter=jitter), "tetrahedra.msh")
    whole = mesh_geometry(meshio.read(path))
    g = distribute(path, comm, "metis").geometry
    solver = _solver(g, PETSc.COMM_WORLD, "implicit")
    rates = _cell_rates(whole, ["lid"])  # by the file's cell numbers
    natural = numpy.concatenate(comm.allgather(g.cell_numbers))  # global cell number -> the file's
    own = (g.face_ids >= g.face_start) & (g.face_ids < g.face_start + g.num_faces)
    rows = solver.operators.faces.ids[own] - solver.operators.faces.start
    expected = rates[natural[g.face_cells[own]]].sum(axis=1)
    second = g.face_cells[own, 1]
    elsewhere = (second < g.cell_start) | (second >= g.cell_start + g.num_cells)
    assert comm.size == 1 or comm.allreduce(int(elsewhere.sum())) > 0
    numpy.testing.assert_allclose(solver.stepper.mode_rate[rows], expected, rtol=1e-13)
    solver.destroy()


@pytest.mark.parametrize("beta", ["fourier", "damping"])
def test_a_stokes_flow_on_gmsh_tetrahedra_decays_with_the_damping_memory(tmp_path, beta):
    """gmsh tetrahedra of the unit cube (size 0.1, 4,979 cells), walls at
    rest, nu 0.1, a random start of 1e-8 (convection negligible: the step is
    linear), 100 steps of dt = 3.5e-3 (face diffusion numbers nu dt /
    delta^2 0.06 to 1.3): with damping's beta the kinetic energy falls over
    every ten steps and by more than ten times after the first ten; with
    fourier's a mode of a few cells grows (by about 1.03 a step)."""
    g = mesh_geometry(gmsh_mesh(tmp_path, "tetrahedra", 0.1))
    with option_defaults("", {"flow_scheme": "consistent", "flow_diffusion": "implicit", "flow_dt": 3.5e-3,
                              "flow_max_steps": 100, "flow_t_end": 1.0, "pressure_ksp_rtol": 1e-10,
                              "flow_face_memory_beta": beta}):
        solver = FlowSolver(g, PETSc.COMM_SELF, "aij", NU, {"lid": Wall(), "wall": Wall()})
    start = 1e-8 * numpy.random.default_rng(1).standard_normal((3, g.num_cells))
    energies = []
    state = solver.run(solver.initial_state(start, project=True),
                       lambda s: energies.append(solver.stepper.kinetic_energy(s)))
    assert state.step == 100
    if beta == "damping":
        assert all(later < earlier for earlier, later in zip(energies[::10], energies[10::10]))
        assert energies[-1] < 0.1 * energies[9]
    else:
        assert energies[-1] > 10 * energies[49], energies[-1] / energies[49]
    solver.destroy()


@pytest.mark.parametrize("beta", ["fourier", "damping"])
def test_the_fourier_memory_holds_dt_to_its_diffusion_limit(beta):
    """With Crank-Nicolson and the fourier memory dt times max(D_ii /
    Omega_i) stays at or below -flow_memory_fourier (4) where the CFL limit
    is above it; the damping memory has no such limit (dt goes to the
    CFL's, twice as long here)."""
    g = mesh_geometry(unit_mesh(MESHES["tetrahedra"][0], n=3, jitter=MESHES["tetrahedra"][1]))
    with option_defaults("", {"flow_scheme": "consistent", "flow_diffusion": "implicit", "flow_cfl": 1.5,
                              "flow_max_steps": 10, "flow_face_memory_beta": beta}):
        solver = FlowSolver(g, PETSc.COMM_SELF, "aij", 2 * NU, {"lid": Wall((1.0, 0.0, 0.0)), "wall": Wall()})
    numbers = []
    solver.run(solver.initial_state(), lambda s: numbers.append(s.dt_old * solver.diffusion_rate))
    if beta == "fourier":
        assert 3.5 < max(numbers) <= 4.0 * (1 + 1e-12), numbers
    else:
        assert max(numbers) > 8.0
    solver.destroy()
