"""benchmarks/hypre_ij.py against a stand-in for hypre's ij driver that
prints what the real one printed on the GPU machine (its set-up and solve
sections twice, with -second_time 1), so that the parser and the JSON it
writes cannot rot between the runs where hypre is built."""

import json
import os
import stat
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import hypre_ij  # noqa: E402

RUN = """
     Complexity:   grid = {grid}
               operator = 2.786728
                 memory = 3.410728

=============================================
Setup phase times:
=============================================
PCG Setup:
  wall clock time = {setup} seconds
  wall MFLOPS     = 0.000000
  cpu clock time  = 5.989639 seconds
  cpu MFLOPS      = 0.000000

=============================================
Solve phase times:
=============================================
PCG Solve:
  wall clock time = {solve} seconds
  wall MFLOPS     = 0.000000

Iterations = {its}
Final Relative Residual Norm = 7.903625e-09
"""


def test_the_second_runs_set_up_and_solve_are_read_for_every_size_and_setting(tmp_path, monkeypatch):
    driver = tmp_path / "ij"
    first, second = RUN.format(grid=1.3, setup=5.991009, solve=0.17373, its=21), RUN.format(
        grid=1.353462, setup=6.156503, solve=0.169705, its=20)
    driver.write_text(f"#!{sys.executable}\nimport sys\nprint(' '.join(sys.argv[1:]))\nprint({first!r})\n"
                      f"print({second!r})\n")
    driver.chmod(driver.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "hypre.json"
    monkeypatch.setattr(sys, "argv", ["hypre_ij.py", "--ij", str(driver), "--sizes", "8", "16", "--json", str(out)])
    hypre_ij.main()
    runs = json.loads(out.read_text())["runs"]
    assert [(r["problem"], r["setting"]) for r in runs] == [
        (f"7-point {n}^3 Dirichlet", s) for n in (8, 16) for s in hypre_ij.SETTINGS]
    for r in runs:
        assert (r["setup_s"], r["solve_s"], r["iterations"]) == (6.156503, 0.169705, 20)
        assert (r["first_setup_s"], r["first_solve_s"]) == (5.991009, 0.17373)
        assert (r["grid_complexity"], r["operator_complexity"]) == (1.353462, 2.786728)
        assert r["us_per_iteration"] == 0.169705 / 20 * 1e6
        assert "-memory_device" in r["command"] and "-tol 1e-8" in r["command"]
    assert runs[1]["command"].endswith("-agg_nl 1")
