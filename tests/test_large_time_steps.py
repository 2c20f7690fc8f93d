"""Crank-Nicolson steps far beyond the explicit diffusion limit on tetrahedra
(-flow_implicit_rhie_chow, plugin.flow.integrator): the incremental
predictor's pressure guess must not feed back into the next pressure.

Without the guess's face term a lid-driven cavity at Re 1 on tetrahedra
blows up within a few steps of a fixed dt hundreds of times the explicit
limit in the symmetric scheme (the default, where it is on): on tetrahedra
L^-1 Ms Gamma G has eigenvalues above 1, and where a face's Crank-Nicolson
diffusion number a is large u^p carries the guess's -G q* almost whole."""

import numpy
import pytest
from petsc4py import PETSc

from meshes import MESHES, unit_mesh
from petsc_ext.options import option_defaults
from plugin.flow.boundary import Wall
from plugin.flow.mesh import mesh_geometry
from plugin.flow.solver import FlowBlowUp, FlowSolver

SELF = PETSc.COMM_SELF
KINDS, JITTER = MESHES["tetrahedra"]
TETRAHEDRA = mesh_geometry(unit_mesh(KINDS, n=4, jitter=JITTER))


def _cavity(coupled, steps, dt, tmp_path):
    options = {"flow_diffusion": "implicit", "flow_dt": dt, "flow_max_steps": steps, "flow_t_end": 1e6,
               "flow_cfl_max": 1e6, "flow_implicit_rhie_chow": coupled, "pressure_ksp_rtol": 1e-10,
               "flow_checkpoint_file": str(tmp_path / "blow-up.h5")}
    with option_defaults("", options):
        solver = FlowSolver(TETRAHEDRA, SELF, "aij", 1.0, {"lid": Wall((1.0, 0.0, 0.0)), "wall": Wall()})
    return solver, solver.run(solver.initial_state())


def test_a_stokes_cavity_on_tetrahedra_settles_with_steps_far_past_the_explicit_limit(tmp_path):
    """dt hundreds of times the explicit limit: the run settles with the guess's
    face term, and the same steps blow up without it."""
    solver, state = _cavity(True, 400, 0.05, tmp_path)
    assert solver.diffusion_rate * 0.05 > 50  # 0.5 is the explicit limit
    assert solver.stepper.change_rate(state) * 0.05 < 1e-5  # max |u^{n+1} - u^n|
    assert 0.5 < abs(state.u).max() < 1.0  # the lid drives it, below the lid's speed
    with pytest.raises(FlowBlowUp):
        _cavity(False, 400, 0.05, tmp_path)


def test_steps_thousands_of_times_the_explicit_limit_stay_bounded(tmp_path):
    """Where a is in the thousands each step carries the guess almost whole:
    the pressure converges slowly (about 1 / a a step), but the step does not
    grow it; without the face term it blows up."""
    solver, state = _cavity(True, 100, 5.0, tmp_path)
    assert solver.diffusion_rate * 5.0 > 5000
    assert numpy.isfinite(state.u).all() and abs(state.u).max() < 1.0
    with pytest.raises(FlowBlowUp):
        _cavity(False, 100, 5.0, tmp_path)
