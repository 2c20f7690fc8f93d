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
    packages = pyproject["tool"]["setuptools"]["packages"]
    assert set(imports) == {p for p in packages if "." not in p}
    scripts = [line for t in recipe["tests"] for line in t.get("script", [])]
    assert any("demos/poisson3d.py" in line and "gpusell" in line for line in scripts)
    assert recipe["context"]["version"] == pyproject["project"]["version"]
