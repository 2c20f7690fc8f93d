"""Running plane and time averages of a channel (plugin.flow.statistics):
the Reynolds stresses of manufactured fields, the laminar parabola in wall
units, a save and load that go on as one run, the CSV and plot, and ranks
against one rank."""

import types

import numpy
import pytest
from mpi4py import MPI
from petsc4py import PETSc

import plugin  # noqa: F401
from plugin.flow.statistics import COLUMNS, PlaneStatistics
from test_flow_solver import make_solver


def box(comm=PETSc.COMM_SELF, sizes=(8, 6, 4), **options):
    periodic = (True, False, True)[:len(sizes)]
    return make_solver(sizes, periodic, 0.1, {"flow_max_steps": 0, **options}, comm=comm,
                       lengths=(2.0, 1.0, 1.0)[:len(sizes)])


def manufactured(solver, t, a, b):
    """u = U(y) + a cos(pi x), v = b sin(pi x) (one period along x = 2), w = 0.1 y: a state at time t."""
    x, y = solver.geometry.centroids[:, 0], solver.geometry.centroids[:, 1]
    u = numpy.zeros((solver.geometry.dim, x.size))
    u[0] = 4 * y * (1 - y) + a * numpy.cos(numpy.pi * x)
    u[1] = b * numpy.sin(numpy.pi * x)
    if solver.geometry.dim == 3:
        u[2] = 0.1 * y
    return types.SimpleNamespace(t=t, u=solver.xp.asarray(u))


def test_the_stresses_of_manufactured_fields_are_their_time_averages():
    _, solver = box()
    stats = PlaneStatistics(solver, start=1.0)
    for t, a, b in ((0.5, 9.0, 9.0), (1.0, 0.0, 0.0), (2.0, 1.0, 2.0), (4.0, 2.0, 0.0)):  # before start: left out
        stats.sample(manufactured(solver, t, a, b))
    y, U, uu, vv, ww, uv = stats.profiles()
    numpy.testing.assert_allclose(y, (numpy.arange(6) + 0.5) / 6)
    numpy.testing.assert_allclose(U, 4 * y * (1 - y), atol=1e-14)
    # weights 1 (to t = 2) and 2 (to t = 4): <a^2 / 2> = (1 * 1 + 2 * 4) / 3 / 2, <b^2 / 2> = (1 * 4) / 3 / 2
    numpy.testing.assert_allclose(uu, 1.5, rtol=1e-13)
    numpy.testing.assert_allclose(vv, 2.0 / 3.0, rtol=1e-13)
    numpy.testing.assert_allclose(ww, 0.0, atol=1e-15)  # w = 0.1 y is each plane's mean
    numpy.testing.assert_allclose(uv, 0.0, atol=1e-14)
    assert stats.time == 3.0


def test_laminar_poiseuille_flow_in_wall_units():
    """A settled laminar channel under -dP/dx = f: U the parabola, no
    stresses, u_tau = sqrt(f h) with h the half height, to the first cells'
    slope (one-sided, so within their share of the height)."""
    _, solver = make_solver((4, 16), (True, False), 0.1, {"flow_forcing": "pressure_gradient", "flow_forcing_value": 0.6,
                                                          "flow_diffusion": "implicit", "flow_t_end": 8.0},
                            lengths=(2.0, 1.0))
    stats = PlaneStatistics(solver, start=6.0)
    solver.run(solver.initial_state(), stats.sample)
    y, U, uu, vv, ww, uv = stats.profiles()
    numpy.testing.assert_allclose(U, 0.6 / 0.2 * y * (1 - y), rtol=0, atol=0.01 * 0.75)  # 1% of the peak
    assert max(abs(s).max() for s in (uu, vv, ww, uv)) < 1e-6  # what is left of the settling, not turbulence
    u_tau, re_tau, table = stats.wall_units()
    assert u_tau == pytest.approx(numpy.sqrt(0.6 * 0.5), rel=1.0 / 32)
    assert re_tau == pytest.approx(u_tau * 0.5 / 0.1)
    assert table.shape == (8, len(COLUMNS))
    numpy.testing.assert_allclose(table[:, 1], table[:, 0] * u_tau / 0.1)


def test_saved_statistics_go_on_as_one_run(tmp_path):
    _, solver = box(sizes=(6, 5))
    whole, first = PlaneStatistics(solver), PlaneStatistics(solver)
    samples = [manufactured(solver, t, a, 1.0) for t, a in ((0.0, 1.0), (0.5, 2.0), (1.5, 0.5), (2.0, 3.0))]
    for s in samples:
        whole.sample(s)
    for s in samples[:2]:
        first.sample(s)
    first.save(tmp_path / "stats.npz")
    restarted = PlaneStatistics(solver)
    restarted.load(tmp_path / "stats.npz")
    for s in samples[2:]:
        restarted.sample(s)
    for got, expected in zip(restarted.profiles(), whole.profiles()):
        numpy.testing.assert_allclose(got, expected, rtol=1e-14)
    _, other = box(sizes=(6, 7))
    with pytest.raises(ValueError, match="are of 5 planes, not 7"):
        PlaneStatistics(other).load(tmp_path / "stats.npz")


def test_the_profiles_are_written_with_a_reference(tmp_path):
    _, solver = box(sizes=(6, 8))
    stats = PlaneStatistics(solver)
    for t, a in ((0.0, 1.0), (1.0, 1.0)):
        stats.sample(manufactured(solver, t, a, 0.5))
    reference = tmp_path / "dns.csv"
    numpy.savetxt(reference, [[1.0, 1.0, 0.4], [10.0, 7.0, 2.6]], delimiter=",", header="y+,U+,u_rms+", comments="")
    csv, png = stats.write(str(tmp_path), str(reference))
    table = numpy.genfromtxt(csv, delimiter=",", names=True, deletechars="")
    assert table.dtype.names == COLUMNS and len(table) == 4
    assert (tmp_path / "profiles.png").stat().st_size > 10000


@pytest.mark.mpi
def test_ranks_agree_with_one_rank():
    results = []
    for comm in (PETSc.COMM_WORLD, PETSc.COMM_SELF):
        _, solver = box(comm=comm, sizes=(8, 9, 4))
        stats = PlaneStatistics(solver)
        for t, a in ((0.0, 1.0), (1.0, 2.0), (3.0, 0.5)):
            stats.sample(manufactured(solver, t, a, 1.0))
        results.append(stats.profiles())
    if MPI.COMM_WORLD.Get_rank() == 0:
        for got, expected in zip(*results):
            numpy.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


def test_statistics_on_a_flow_without_homogeneous_planes_are_refused():
    from meshes import unit_mesh
    from plugin.flow.boundary import Wall
    from plugin.flow.mesh import mesh_geometry
    from plugin.flow.solver import FlowSolver

    g = mesh_geometry(unit_mesh(("quad", "triangle"), n=4, jitter=0.2))
    mesh = FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.1, {"lid": Wall((1.0, 0.0)), "wall": Wall()})
    with pytest.raises(ValueError, match="average over the planes normal to y of a DMDA box"):
        PlaneStatistics(mesh)
    _, periodic = make_solver((4, 4), (True, True), 0.1, {})
    with pytest.raises(ValueError, match="this flow has no such homogeneous planes"):
        PlaneStatistics(periodic)
