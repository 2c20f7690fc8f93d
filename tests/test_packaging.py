"""The conda recipe and pyproject.toml ask for the same packages."""

import os
import re
import tomllib

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# PyPI name -> conda-forge name where they differ
CONDA_NAMES = {"cupy-cuda13x": "cupy"}


def requirement(text):
    """('name', 'spec') from 'name>=1.0' or 'name >=1.0'."""
    name, spec = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(.*?)\s*", text).groups()
    return CONDA_NAMES.get(name.lower(), name.lower()), spec.replace(" ", "")


def load():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    with open(os.path.join(ROOT, "conda-recipe", "recipe.yaml")) as f:
        recipe = yaml.safe_load(f)
    return pyproject, recipe


def test_run_requirements_match_pyproject():
    pyproject, recipe = load()
    project = pyproject["project"]
    run = dict(requirement(r) for r in recipe["requirements"]["run"])
    assert run.pop("python") == project["requires-python"]
    assert run == dict(requirement(r) for r in project["dependencies"])
    constraints = dict(requirement(r) for r in recipe["requirements"]["run_constraints"])
    assert constraints == dict(requirement(r) for r in project["optional-dependencies"]["gpu"])


def test_recipe_tests_import_every_package_and_run_a_solve():
    pyproject, recipe = load()
    imports = next(t["python"]["imports"] for t in recipe["tests"] if "python" in t)
    layers = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert set(imports) == {p.removesuffix("*") for p in layers}
    scripts = [line for t in recipe["tests"] for line in t.get("script", [])]
    assert any("demos/poisson3d.py" in line and "gpusell" in line and "gpuamg" in line for line in scripts)
    assert any("demos/cavity.py" in line and "-flow_mesh" in line for line in scripts)


def test_the_build_floor_is_the_one_the_spdx_license_needs():
    """``license = "BSD-2-Clause"`` (an SPDX expression) needs setuptools 77."""
    pyproject, recipe = load()
    assert pyproject["build-system"]["requires"] == ["setuptools>=77"]
    assert "setuptools >=77" in recipe["requirements"]["host"]
    assert recipe["context"]["version"] == pyproject["project"]["version"]
