"""The README's demo at small sizes, with its own validation: second-order error."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_demo(n, *options):
    out = subprocess.run([sys.executable, "demos/poisson3d.py", "-n", str(n), "-dm_mat_type", "gpusell",
                          "-ksp_type", "cg", "-pc_type", "jacobi", "-ksp_rtol", "1e-10", *options],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert re.search(r"matrix (seq|mpi)aijgpusell", out)
    return out, float(re.search(r"max error against the exact solution: (\S+)", out).group(1))


def test_poisson_demo_converges_at_second_order_and_logs_gpusell():
    _, coarse = run_demo(7)
    out, fine = run_demo(15, "-log_view")
    assert 3.5 < coarse / fine < 4.5  # h halves: the error falls by 4
    assert re.search(r"^GPUSELLMult\s+\d+", out, re.MULTILINE)
    assert re.search(r"^GPUSELLBuild\s+1 ", out, re.MULTILINE)


def run_script(script, *options, cwd=ROOT):
    return subprocess.run([sys.executable, os.path.join(ROOT, "demos", script), *options],
                          capture_output=True, text=True, cwd=cwd, check=True).stdout


def test_cavity_demo_matches_ghia_at_re100_and_writes_its_outputs(tmp_path):
    """The README's `make demo` run, with its validation: Ghia et al.'s
    centrelines within 2% of the lid speed, and every promised file."""
    out = run_script("cavity.py", "-flow_re", "100", "-da_grid_x", "64", "-da_grid_y", "64",
                     "-flow_output_dir", str(tmp_path), "-log_view")
    assert re.search(r"flow: steady at step \d+", out)
    du, dv = map(float, re.search(r"largest difference from Ghia .*: u (\S+), v (\S+)", out).groups())
    assert du < 0.02 and dv < 0.02
    for phase in ("FlowExplicit", "FlowMomentum", "FlowPressure", "FlowCorrect"):
        assert re.search(rf"^{phase}\s+\d+", out, re.MULTILINE)
    assert (tmp_path / "centerline_u.csv").read_text().splitlines()[0] == "y,u"
    assert (tmp_path / "centerline_v.csv").read_text().splitlines()[0] == "x,v"
    assert (tmp_path / "centerlines.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "cavity.h5").stat().st_size > 64 * 64 * 8
    assert "cavity.h5" in (tmp_path / "cavity.xdmf").read_text()
    assert str(tmp_path / "cavity.xdmf") in out


def test_cavity_demo_help_lists_the_flow_and_solver_options():
    out = run_script("cavity.py", "-help", "-flow_max_steps", "1", "-da_grid_x", "8", "-da_grid_y", "8")
    for option in ("-flow_re", "-flow_output_dir", "-flow_cfl", "-flow_diffusion", "-flow_checkpoint_every",
                   "-flow_restart", "-pressure_ksp_type", "-momentum_ksp_type"):
        assert option in out


def test_taylor_green_demo_is_second_order_in_velocity():
    """At Re = 1 the O(h^2) diffusion error dominates and dt follows h^2,
    so the splitting's O(dt h^2) part falls out of the way."""
    out = run_script("taylor_green.py", "-flow_re", "1", "-tg_grids", "8,16,32")
    orders = [tuple(map(float, m)) for m in re.findall(r"order velocity (\S+), pressure (\S+)", out)]
    assert len(orders) == 2
    assert all(1.8 < velocity < 2.2 and pressure > 1.8 for velocity, pressure in orders)


def test_the_3d_taylor_green_demo_tracks_the_energy_and_compares_dissipation_rates(tmp_path):
    """The vortex's kinetic energy starts at 1/8 and falls after the first
    step (whose explicit Euler convection adds O(dt^2)); the dissipation
    rate against a reference run: none from the run's own energy.csv, some
    from a coarser grid's; a missing reference is refused before the run."""
    import numpy

    runs = {}
    for n in (8, 12):
        run_script("taylor_green_3d.py", *[a for axis in "xyz" for a in (f"-da_grid_{axis}", str(n))],
                   "-flow_t_end", "1", "-flow_output_dir", str(tmp_path / str(n)))
        runs[n] = numpy.loadtxt(tmp_path / str(n) / "energy.csv", delimiter=",", skiprows=1)
    t, energy, rate = runs[12].T
    assert t[0] == 0.0 and t[-1] == pytest.approx(1.0) and abs(energy[0] - 0.125) < 0.01 * 0.125
    assert (numpy.diff(energy)[1:] < 0).all() and (rate[2:] > 0).all() and energy[-1] < energy[0]
    assert (tmp_path / "12" / "dissipation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    differences = {}
    for n in (12, 8):
        out = run_script("taylor_green_3d.py", *[a for axis in "xyz" for a in (f"-da_grid_{axis}", "12")],
                         "-flow_t_end", "1", "-tg_reference", str(tmp_path / str(n) / "energy.csv"),
                         "-flow_output_dir", str(tmp_path / f"12-against-{n}"))
        summary = json.loads((tmp_path / f"12-against-{n}" / "summary.json").read_text())
        differences[n] = summary["dissipation_l2_difference"]
        assert f"L2 difference from the reference's {differences[n]:.4f}" in out
    assert differences[12] == 0.0 and differences[8] > 0.01
    assert "-tg_reference" in _refused("taylor_green_3d.py", "-tg_reference", str(tmp_path / "missing.csv"))


def test_cavity_output_directory_is_made_and_checked_before_the_first_step(tmp_path):
    """A new directory with checkpoints on the way works; a file in its place is
    refused before the run, naming it."""
    directory = tmp_path / "new" / "run"
    run_script("cavity.py", "-da_grid_x", "8", "-da_grid_y", "8", "-flow_max_steps", "4",
                     "-flow_checkpoint_every", "2", "-flow_output_dir", str(directory))
    assert (directory / "flow_checkpoint.h5").exists() and (directory / "centerline_u.csv").exists()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    failed = subprocess.run([sys.executable, os.path.join(ROOT, "demos", "cavity.py"), "-da_grid_x", "8",
                             "-da_grid_y", "8", "-flow_max_steps", "4", "-flow_output_dir", str(blocker)],
                            capture_output=True, text=True, cwd=ROOT)
    assert failed.returncode != 0 and f"-flow_output_dir {blocker}" in failed.stderr
    assert "step 1" not in failed.stdout and "flow:" not in failed.stdout


def _refused(script, *options):
    failed = subprocess.run([sys.executable, os.path.join(ROOT, "demos", script), *options],
                            capture_output=True, text=True, cwd=ROOT)
    assert failed.returncode != 0
    return failed.stderr


def test_demos_refuse_grids_they_cannot_run():
    assert "needs at least 2 cells along every axis" in _refused("cavity.py", "-da_grid_x", "1", "-da_grid_y", "8")
    assert "give cells per side as integers" in _refused("taylor_green.py", "-tg_grids", "bogus")
    assert "must have at least 2 cells per side and increase" in _refused("taylor_green.py", "-tg_grids", "16,16")


def test_cavity_demo_without_a_gpu_runs_petsc_types_and_says_so_first():
    """Where no GPU is usable the demo's defaults are PETSc's own types (the
    fastest measured on the CPU), named in the first line with how to choose
    the project's; with those options the project's types run."""
    from petsc4py import PETSc

    if PETSc.Sys.hasExternalPackage("cuda"):
        pytest.skip("a PETSc with CUDA: the demo's defaults are the project's types")
    small = ("-da_grid_x", "8", "-da_grid_y", "8", "-flow_max_steps", "3")
    first, second = run_script("cavity.py", *small).splitlines()[:2]
    assert first.startswith("cavity: no usable GPU: PETSc's own types on the CPU")
    assert "matrices seqaij, pressure cg + gamg" in second
    project = run_script("cavity.py", *small, *first.split("; ", 1)[1].split(" runs")[0].split())
    assert "matrices seqaijgpusell, pressure graphcg + gpuamg" in project


@pytest.mark.parametrize("kind", ["triangles", "quads", "mixed"])
def test_cavity_demo_on_a_gmsh_mesh_matches_ghia_at_re100(tmp_path, kind):
    """demos/meshes.py makes an unstructured mesh of the unit square with gmsh
    (a few hundred cells); the cavity on it reaches Ghia's centrelines within
    0.03 of the lid speed and writes its fields and profiles."""
    mesh = str(tmp_path / f"{kind}.msh")
    made = run_script("meshes.py", "--kind", kind, "--size", "0.08", "--out", mesh)
    assert int(re.search(r"(\d+) cells", made).group(1)) > 150
    out = run_script("cavity.py", "-flow_mesh", mesh, "-flow_re", "100", "-flow_output_dir", str(tmp_path / "out"))
    assert re.search(rf"mesh .*{kind}\.msh: \d+ cells", out) and re.search(r"flow: steady at step \d+", out)
    du, dv = map(float, re.search(r"largest difference from Ghia .*: u (\S+), v (\S+)", out).groups())
    assert du < 0.03 and dv < 0.03
    assert (tmp_path / "out" / "centerline_u.csv").read_text().splitlines()[0] == "y,u"
    assert "cavity.h5" in (tmp_path / "out" / "cavity.xdmf").read_text()


@pytest.mark.parametrize("kind", ["tetrahedra", "prisms"])
def test_cavity_demo_runs_on_a_3d_gmsh_mesh(tmp_path, kind):
    mesh = str(tmp_path / f"{kind}.msh")
    run_script("meshes.py", "--kind", kind, "--size", "0.34", "--out", mesh)
    out = run_script("cavity.py", "-flow_mesh", mesh, "-flow_re", "100", "-flow_max_steps", "3",
                     "-flow_output_dir", str(tmp_path / "out"))
    assert re.search(r"cavity: 3D, Re = 100, mesh .*: \d+ cells", out) and "flow: 3 steps" in out
    assert (tmp_path / "out" / "cavity.xdmf").exists()


def test_cavity_demo_names_a_mesh_it_cannot_read(tmp_path):
    missing = tmp_path / "nowhere.msh"
    result = subprocess.run([sys.executable, "demos/cavity.py", "-flow_mesh", str(missing)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert f"cannot read the mesh {missing}" in result.stderr


def test_channel_demo_recovers_poiseuille_flow_on_triangles_and_writes_its_outputs(tmp_path):
    """The parabola flows in, develops and leaves through the outflow: on gmsh
    triangles of size 0.1 (about 1,000 cells) the profile at x = 3 is within
    2.5% of 4 y (1 - y) and the pressure gradient within 4% of -8 nu
    (BENCHMARKS.md: within 1% from 3,700 triangles)."""
    out = run_script("channel.py", "-channel_cells", "triangles", "-channel_size", "0.1", "-flow_output_dir",
                     str(tmp_path))
    error, gradient, exact = map(float, re.search(
        r"profile at x = 3 within (\S+) of 4 y \(1 - y\) \(U = 1\); dp/dx (\S+), exact (\S+)", out).groups())
    assert error < 0.025 and abs(gradient / exact - 1) < 0.04
    assert (tmp_path / "profile.csv").read_text().splitlines()[0] == "y,u,exact"
    assert json.loads((tmp_path / "summary.json").read_text())["levels"][0]["profile_error"] == pytest.approx(error,
                                                                                                             abs=1e-4)
    assert (tmp_path / "poiseuille.png").exists() and (tmp_path / "poiseuille-level0.xdmf").exists()


def test_channel_demo_on_a_box_uses_the_same_conditions_on_the_dmda_sides():
    """16 cells across: the profile within 1% (the scheme's and the linear sampling's errors, each about h^2)."""
    out = run_script("channel.py", "-channel_cells", "box", "-channel_size", "0.0625")
    assert "xmin: inflow, xmax: outflow at pressure 0, ymin: wall, ymax: wall" in out
    error = float(re.search(r"profile at x = 3 within (\S+)", out).group(1))
    assert error < 0.01


def test_kovasznay_flow_converges_at_second_order_on_quadrilaterals(tmp_path):
    """Two gmsh quadrilateral meshes (sizes 0.2 and 0.1): the L2 error of the
    velocity falls by at least 2^1.5 (BENCHMARKS.md has three levels of
    quadrilaterals and of triangles)."""
    out = run_script("channel.py", "-channel_case", "kovasznay", "-channel_cells", "quads", "-channel_size", "0.2",
                     "-channel_levels", "2", "-flow_output_dir", str(tmp_path))
    rows = re.findall(r"channel:\s+(\d)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)", out)
    assert len(rows) == 2
    assert float(rows[1][4]) >= 1.5
    errors = (tmp_path / "errors.csv").read_text().splitlines()
    assert errors[0] == "level,cells,h,l2_error,order" and len(errors) == 3


def test_channel_demo_names_a_group_the_mesh_lacks(tmp_path):
    mesh = str(tmp_path / "square.msh")
    run_script("meshes.py", "--kind", "triangles", "--size", "0.3", "--out", mesh)
    result = subprocess.run([sys.executable, "demos/channel.py", "-flow_mesh", mesh], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "channel: boundary condition for 'inlet': the mesh has no such boundary group (groups: lid (tag 2), "
        "wall (tag 3))")


def test_the_turbulent_channel_writes_its_summary_and_keeps_its_statistics_across_a_restart(tmp_path):
    """A few steps of the turbulent case at a toy size (no turbulence is
    claimed here): within the transient summary.json has no figures; past it
    the figures, profiles.csv and profiles.png; a restart from the last
    checkpoint goes on with the statistics it kept."""
    grid = ["-da_grid_x", "6", "-da_grid_y", "8", "-da_grid_z", "4", "-dm_mat_type", "gpusell"]
    short = tmp_path / "short"
    out = run_script("channel.py", "-channel_case", "turbulent", *grid, "-flow_max_steps", "3", "-flow_output_dir",
                     str(short))
    assert "no statistics yet" in out
    summary = json.loads((short / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["Re_tau"] is None and summary["cells"] == [6, 8, 4]
    longer = tmp_path / "longer"
    run = ["channel.py", "-channel_case", "turbulent", *grid, "-channel_transient", "0.005", "-flow_output_dir",
           str(longer), "-flow_checkpoint_every", "5"]
    run_script(*run, "-flow_max_steps", "10")
    first = json.loads((longer / "summary.json").read_text())
    assert first["steps"] == 10 and first["Re_tau"] > 0 and first["averaged_time"] > 0
    assert (longer / "flow_checkpoint.h5.stats.npz").exists() and (longer / "profiles.png").exists()
    run_script(*run, "-flow_max_steps", "5", "-flow_restart", str(longer / "flow_checkpoint.h5"))
    second = json.loads((longer / "summary.json").read_text())
    assert second["steps"] == 15 and second["averaged_time"] > first["averaged_time"]
    assert (longer / "profiles.csv").read_text().splitlines()[0] == "y,y+,U+,u_rms+,v_rms+,w_rms+,uv+"
