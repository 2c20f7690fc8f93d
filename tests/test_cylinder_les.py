"""demos/cylinder_les.py, the spanwise-periodic cylinder at Re 3900, at a
size that runs in seconds: its gmsh mesh with front and back joined as
periodic, a short run's outputs; and the Strouhal number it reads from a
lift of known frequency."""

import json
import os
import re
import sys

import numpy
import pytest

from test_demo import ROOT, run_script

pytest.importorskip("gmsh")


def test_a_short_run_on_a_coarse_mesh_writes_its_forces_and_summary(tmp_path):
    out = run_script("cylinder_les.py", "-les_size", "4", "-les_layers", "3", "-les_wall_cell", "0", "-flow_max_steps", "6",
                     "-les_average_from", "0", "-flow_output_dir", str(tmp_path))
    assert "441 cells" in out and "cylinder: wall" in out and "front" not in out  # front and back: joined
    assert re.search(r"1\.0 pressure, \d+\.\d momentum iterations per step", out)  # layerfft: the exact solve
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == 6 and summary["cells"] == 441 and summary["c_D"] > 0 and summary["St"] is None
    rows = numpy.loadtxt(tmp_path / "forces.csv", delimiter=",", skiprows=1)
    assert rows.shape == (6, 3) and numpy.isclose(rows[:, 1].mean(), summary["c_D"], rtol=1e-9)
    assert (tmp_path / "forces.png").read_bytes()[:4] == b"\x89PNG"


def test_the_strouhal_number_is_the_lifts_frequency():
    sys.path.insert(0, os.path.join(ROOT, "demos"))
    from cylinder_les import strouhal  # its petsc4py.init: PETSc is up already

    t = numpy.linspace(0.0, 40.0, 4001)
    assert strouhal(t, 0.3 + numpy.sin(2 * numpy.pi * 0.21 * t + 0.4)) == pytest.approx(0.21, rel=1e-4)
    assert strouhal(t[:200], numpy.sin(2 * numpy.pi * 0.21 * t[:200])) is None  # under two periods
