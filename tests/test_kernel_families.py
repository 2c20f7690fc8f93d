"""Every kernel family implements its written interface twice: the CUDA
driver (cuda.py) and the NumPy twin (host.py), with the same functions and
parameters. Read from the sources, so that it holds on a machine without
CuPy too; the GPU tests compare what the twins compute."""

import ast
import pathlib

import numpy
import pytest

import gpu_mats.kernels
from gpu_mats.kernels import FAMILIES, family

KERNELS = pathlib.Path(gpu_mats.kernels.__file__).parent


def functions(path):
    """{name: (parameter names, body)} of the public module-level functions in ``path``."""
    tree = ast.parse(path.read_text())
    return {node.name: ([a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs], node.body)
            for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}


@pytest.mark.parametrize("name", FAMILIES)
def test_the_interface_is_written_down(name):
    interface = functions(KERNELS / name / "__init__.py")
    assert interface, f"family {name} declares no functions"
    for function, (_, body) in interface.items():
        docstring_only = len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        assert docstring_only, f"{name}.{function}: an interface function has a docstring and no body"
    assert list((KERNELS / name).glob("*.cu")), f"family {name} has no CUDA source"


@pytest.mark.parametrize("twin", ["cuda", "host"])
@pytest.mark.parametrize("name", FAMILIES)
def test_each_twin_implements_the_interface(name, twin):
    interface = functions(KERNELS / name / "__init__.py")
    implemented = functions(KERNELS / name / f"{twin}.py")
    for function, (parameters, _) in interface.items():
        assert function in implemented, f"{name}/{twin}.py lacks {function}"
        assert implemented[function][0] == parameters, f"{name}/{twin}.py: {function}{tuple(parameters)} differs"


def test_family_dispatches_by_array_module():
    from gpu_mats.kernels.sell import host

    assert family("sell", numpy) is host
    with pytest.raises(ValueError, match="unknown kernel family 'lapack'"):
        family("lapack", numpy)
