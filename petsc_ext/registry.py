"""Type names for the project's Python PC and KSP classes.

``-pc_type ainv`` selects what ``-pc_type python -pc_python_type
petsc_ext.ainv.ApproximateInversePC`` would: the creator registered under the
new name runs PETSc's own python-type creator, attaches the class, and names
the object after its type (``PCGetType`` says "ainv").
"""

import ctypes

from . import libpetsc as lp
from .callbacks import petsc_callback

_KINDS = {"PC": (lp.PCRegister, lp.PCPythonSetType), "KSP": (lp.KSPRegister, lp.KSPPythonSetType)}
_creators = []  # the C function pointers must live as long as the process


def register_python_type(kind, name, python_class):
    """Register ``name`` in PETSc's list of ``kind`` ("PC" or "KSP") types for ``module.Class``."""
    register, set_python_type = _KINDS[kind]
    python_creator = lp.CreateFn(lp.registered_function(f"{kind}List", "python"))

    @petsc_callback(lp.CreateFn, f"{kind}Create_{name}")
    def create(handle):
        lp.check(python_creator(handle))
        lp.check(set_python_type(handle, python_class.encode()))
        lp.check(lp.PetscObjectChangeTypeName(handle, name.encode()))

    _creators.append(create)
    lp.check(register(name.encode(), ctypes.cast(create, lp.c_ptr)))
