"""demos/hiemenz.py: Hiemenz's stagnation-point flow, an exact steady
Navier-Stokes solution with a no-slip wall, on two small meshes of gmsh
triangles (484 and 1,872 cells). The exact solution is checked on its own,
then the consistent scheme's errors in the cells and on the wall fall where
the symmetric scheme's wall errors do not (BENCHMARKS.md has larger meshes)."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def exact_solution(nu):
    sys.path.insert(0, os.path.join(ROOT, "demos"))  # the demo imports demos/convergence.py
    spec = importlib.util.spec_from_file_location("hiemenz_demo", os.path.join(ROOT, "demos", "hiemenz.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Hiemenz(nu)


def test_the_exact_solution_solves_the_steady_navier_stokes_equations():
    """Its residuals by central differences at points across the boundary layer, and f''(0) against
    Schlichting and Gersten's 1.2326."""
    exact, h = exact_solution(0.01), 1e-4
    x = numpy.array([[0.3, 0.01], [-0.7, 0.05], [0.5, 0.2], [0.9, 0.6]])
    steps = h * numpy.eye(2)

    def d(function, axis):
        return (function(x + steps[axis]) - function(x - steps[axis])) / (2 * h)

    def laplacian(function):
        return sum((function(x + steps[a]) - 2 * function(x) + function(x - steps[a])) / h**2 for a in range(2))

    u = exact.velocity(x)
    momentum = (u[:, :1] * d(exact.velocity, 0) + u[:, 1:] * d(exact.velocity, 1)
                + numpy.column_stack([d(exact.pressure, a) for a in range(2)]) - exact.nu * laplacian(exact.velocity))
    divergence = d(exact.velocity, 0)[:, 0] + d(exact.velocity, 1)[:, 1]
    # central differences are exact to O(h^2)
    assert abs(momentum).max() < 1e-6 and abs(divergence).max() < 1e-6, (momentum, divergence)
    assert exact.wall_curvature == pytest.approx(1.2326, abs=1e-4)


def errors(tmp_path, scheme):
    pytest.importorskip("gmsh")  # the meshes are gmsh's
    subprocess.run([sys.executable, os.path.join(ROOT, "demos", "hiemenz.py"), "-hiemenz_levels", "2",
                    "-flow_scheme", scheme, "-dm_mat_type", "aij", "-flow_output_dir", str(tmp_path)],
                   check=True, capture_output=True, text=True)
    with open(tmp_path / "summary.json") as stream:
        return json.load(stream)["levels"][-1]


def test_the_consistent_schemes_wall_errors_fall_where_the_symmetric_schemes_do_not(tmp_path):
    consistent, symmetric = errors(tmp_path / "consistent", "consistent"), errors(tmp_path / "symmetric", "symmetric")
    assert consistent["u_order"] > 1.8 and consistent["p_order"] > 1.5, consistent
    assert consistent["p_wall_order"] > 0.5 and consistent["shear_order"] > 1.5, consistent
    assert symmetric["p_wall_order"] < 0.5 and symmetric["shear_order"] < 0.5, symmetric
    assert consistent["p_wall_error"] < 0.5 * symmetric["p_wall_error"]
