"""The package as ``pip install .`` ships it: the wheel, built from a copy of
the checkout and installed into a folder of its own, holds every module and
every kernel family's CUDA sources, and from a directory outside the
repository it solves with each of the project's types and runs the cavity
on a mesh. PETSc and the other dependencies come from the test's own
environment; the project's modules must come from the wheel."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYERS = ("plugin", "petsc_ext", "gpu_mats")
SOLVES = {  # what each project type is asked for on poisson3d.py's DMDA matrix (boxfft: below)
    "gpusell + cg": ["-ksp_type", "cg", "-pc_type", "jacobi"],
    "cacg": ["-ksp_type", "cacg", "-pc_type", "jacobi"],
    "ainv": ["-ksp_type", "cg", "-pc_type", "ainv"],
    "wbilu": ["-ksp_type", "gmres", "-pc_type", "wbilu"],
    "gpuamg": ["-ksp_type", "cg", "-pc_type", "gpuamg"],
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(site folder holding the installed wheel, the wheel's file names)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"  # a copy, so that the build leaves nothing in the checkout
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv", ".gpu", "build", "*.egg-info",
                                                                "__pycache__", "benchmarks", "out", "cavity-*"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(base / "dist"), str(source)], check=True, capture_output=True)
    (wheel,) = (base / "dist").glob("petsc_gpu_fv-*.whl")
    site = base / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    return site, set(zipfile.ZipFile(wheel).namelist())


def _run(site, cwd, *arguments):
    """python ARGUMENTS in ``cwd`` with the wheel's folder first on the path."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, *arguments], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_wheel_holds_every_module_and_kernel_source_of_the_checkout(installed):
    _, names = installed
    in_checkout = {path.relative_to(ROOT).as_posix() for layer in LAYERS for path in (ROOT / layer).rglob("*")
                   if path.suffix in (".py", ".cu")}
    assert in_checkout - names == set()
    assert {name for name in in_checkout if name.endswith(".cu")} >= {
        f"gpu_mats/kernels/{family}/{family}.cu" for family in ("csr", "stencil", "sell", "blas", "multigrid", "flow")}


def test_the_modules_come_from_the_wheel_outside_the_checkout(installed, tmp_path):
    site, _ = installed
    out = _run(site, tmp_path, "-c", "import plugin, plugin.flow.solver, petsc_ext.gpuamg, gpu_mats.kernels.csr, "
               "gpu_mats.kernels.stencil as m; print(plugin.__file__); print(m.__file__)")
    assert out.returncode == 0, out.stderr
    assert all(pathlib.Path(line).is_relative_to(site) for line in out.stdout.split()), out.stdout


@pytest.mark.parametrize("solve", SOLVES)
def test_the_installed_types_solve_poisson(installed, tmp_path, solve):
    site, _ = installed
    out = _run(site, tmp_path, str(ROOT / "demos" / "poisson3d.py"), "-n", "6", "-dm_mat_type", "gpusell",
               "-ksp_rtol", "1e-10", *SOLVES[solve])
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(r"matrix seqaijgpusell", out.stdout)
    assert re.search(r"converged reason [1-9]", out.stdout), out.stdout
    assert float(re.search(r"max error against the exact solution: (\S+)", out.stdout).group(1)) < 1e-3


def test_the_installed_boxfft_solves_the_pressure_of_a_3d_box(installed, tmp_path):
    """boxfft inverts a box's Neumann Laplacian (poisson3d.py's is Dirichlet): the 3D cavity's pressure."""
    site, _ = installed
    out = _run(site, tmp_path, str(ROOT / "demos" / "cavity.py"), "-flow_dim", "3", "-da_grid_x", "4", "-da_grid_y",
               "4", "-da_grid_z", "6", "-flow_max_steps", "2", "-dm_mat_type", "gpusell", "-pressure_pc_type", "boxfft")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "pressure cg + boxfft" in out.stdout and "flow: 2 steps of" in out.stdout, out.stdout


def test_the_installed_flow_driver_runs_the_cavity_on_a_mesh(installed, tmp_path):
    site, _ = installed
    mesh = ROOT / "demos" / "data" / "square-triangles.msh"
    out = _run(site, tmp_path, str(ROOT / "demos" / "cavity.py"), "-flow_mesh", str(mesh), "-flow_max_steps", "4",
               "-pressure_pc_type", "gpuamg")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "pressure cg + gpuamg" in out.stdout and "flow: 4 steps of" in out.stdout, out.stdout
