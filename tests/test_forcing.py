"""The mean flow's forcing of a periodic channel (-flow_forcing): a constant
pressure gradient drives plane Poiseuille flow to its parabola; a constant
flow rate holds the bulk velocity after every step and settles to the same
parabola with the mean pressure gradient 12 nu U_b / h^2; on several ranks
as on one."""

import numpy
import pytest
from mpi4py import MPI
from petsc4py import PETSc

import plugin  # noqa: F401
from gpu_mats.backend import to_host
from petsc_ext.options import OptionError
from plugin.flow.boundary import Inflow, Outflow
from plugin.flow.box import dmda_partition
from plugin.flow.output import natural_field
from test_flow_solver import make_solver

NU = 0.1


def channel(forcing, value, steps=None, comm=PETSc.COMM_SELF, t_end=8.0, start=None, shape=(6, 16),
            diffusion="implicit", **extra):
    """The periodic channel 0 < y < 1 (x periodic, walls at y = 0 and 1) under a forcing; Crank-Nicolson
    by default (dt at the CFL limit: few steps)."""
    options = {"flow_forcing": forcing, "flow_forcing_value": value, "flow_t_end": t_end,
               "pressure_ksp_rtol": 1e-12, "flow_diffusion": diffusion, **({"flow_max_steps": steps} if steps else {}),
               **extra}
    da, solver = make_solver(shape, (True, False), NU, options, comm=comm, lengths=(2.0, 1.0))
    u0 = None if start is None else start(solver.geometry)
    states = []
    state = solver.run(solver.initial_state(u0), lambda s: states.append(
        (float(to_host(solver.xp, s.u)[0] @ solver.geometry.volumes), solver.stepper.mean_pressure_gradient(s))))
    return da, solver, state, states


def parabola(y, mean_gradient):
    return mean_gradient / (2 * NU) * y * (1 - y)


def test_a_constant_pressure_gradient_drives_poiseuille_flow():
    _, solver, state, history = channel("pressure_gradient", 0.6)
    y = solver.geometry.centroids[:, 1]
    u = to_host(solver.xp, state.u)
    assert state.t == pytest.approx(8.0)
    assert abs(u[0] - parabola(y, 0.6)).max() < 0.01 * parabola(0.5, 0.6)  # settled within 1%
    assert abs(u[1]).max() < 1e-10
    assert {g for _, g in history} == {0.6}


def test_a_constant_flow_rate_is_held_every_step_and_settles_to_its_pressure_gradient():
    """Explicit diffusion: each step's uniform correction kinks the wall cells' profile, which Crank-Nicolson
    at the CFL limit's dt (diffusion numbers near 3) damps too little to settle in few steps."""
    _, solver, state, history = channel("flow_rate", 1.0, t_end=6.0, shape=(4, 10), diffusion="explicit")
    volume = solver.geometry.volumes.sum()
    assert all(abs(flux / volume - 1.0) < 1e-12 for flux, _ in history)  # U_b = 1 after every step
    y = solver.geometry.centroids[:, 1]
    u = to_host(solver.xp, state.u)
    assert abs(u[0] - parabola(y, 12 * NU)).max() < 0.015 * parabola(0.5, 12 * NU)  # 10 cells across
    gradients = [g for _, g in history]
    assert gradients[0] > 10 * 12 * NU  # from rest it first pushes harder
    assert gradients[-1] == pytest.approx(12 * NU, rel=0.03)  # U_b = -dP/dx h^2 / (12 nu), to 10 cells' accuracy


def test_a_flow_rate_through_inflows_and_outflows_is_refused():
    inflow = Inflow(lambda x, t: numpy.column_stack([x[:, 1] * (1 - x[:, 1]), 0 * x[:, 1]]))
    with pytest.raises(OptionError, match="flow_forcing flow_rate holds the flow rate of a closed or periodic flow"):
        make_solver((6, 6), (False, False), NU, {"flow_forcing": "flow_rate", "flow_forcing_value": 1.0},
                    walls={"xmin": inflow, "xmax": Outflow()})


@pytest.mark.mpi
def test_ranks_agree_with_one_rank_under_a_flow_rate():
    def disturbed(g):
        x, y = g.centroids.T
        return numpy.array([numpy.sin(numpy.pi * y) * (1 + 0.3 * numpy.cos(numpy.pi * x)),
                            0.1 * numpy.sin(numpy.pi * x) * numpy.sin(2 * numpy.pi * y)])

    fields = []
    for comm in (PETSc.COMM_WORLD, PETSc.COMM_SELF):
        da, solver, state, history = channel("flow_rate", 1.0, steps=5, comm=comm, start=disturbed)
        fields.append((natural_field(comm.tompi4py(), dmda_partition(da), solver.xp, state.u), history[-1][1]))
    if MPI.COMM_WORLD.Get_rank() == 0:
        numpy.testing.assert_allclose(fields[0][0], fields[1][0], rtol=0, atol=1e-9)
        assert fields[0][1] == pytest.approx(fields[1][1], rel=1e-9)
