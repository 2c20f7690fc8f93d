"""demos/beltrami.py: Ethier and Steinman's 3D Beltrami flow on gmsh
tetrahedra, two small meshes (184 and 734 cells). The consistent scheme's
errors fall at second order, where the symmetric scheme's velocity falls at
first order and its pressure hardly at all (BENCHMARKS.md has three larger
meshes)."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("gmsh")  # the meshes are gmsh's
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def orders(tmp_path, scheme, mat_type="aij"):
    subprocess.run([sys.executable, os.path.join(ROOT, "demos", "beltrami.py"), "-beltrami_size", "0.4",
                    "-beltrami_levels", "2", "-flow_scheme", scheme, "-dm_mat_type", mat_type, "-flow_output_dir",
                    str(tmp_path)], check=True, capture_output=True, text=True)
    with open(tmp_path / "summary.json") as stream:
        last = json.load(stream)["levels"][-1]
    return last["u_order"], last["p_order"], last["u_error"], last["p_error"]


def test_the_consistent_scheme_is_second_order_on_tetrahedra(tmp_path):
    u_order, p_order, u_error, p_error = orders(tmp_path / "consistent", "consistent")
    symmetric = orders(tmp_path / "symmetric", "symmetric")
    assert u_order > 1.8 and p_order > 1.5, (u_order, p_order)
    assert symmetric[0] < 1.5 and symmetric[1] < 1.0, symmetric
    assert u_error < 0.6 * symmetric[2] and p_error < 0.4 * symmetric[3]


@pytest.mark.gpu
def test_the_demo_runs_on_the_gpu_as_on_the_host(tmp_path):
    """With the project's GPU types (gpusell: the operators and fields in
    device memory) the demo measures its errors as with AIJ on the host, to
    the solvers' tolerances."""
    on_gpu = orders(tmp_path / "gpu", "consistent", "gpusell")
    on_host = orders(tmp_path / "host", "consistent")
    assert on_gpu == pytest.approx(on_host, rel=1e-4)
