"""Python functions called by PETSc: C callbacks and methods of Python types.

An exception becomes a PETSc error carrying its message (so it shows in
PETSc's error trace and in petsc4py's ``PETSc.Error``), with the code the
exception names or one that fits its kind. PETSc errors raised inside pass
through unchanged.
"""

import functools
import traceback

from petsc4py import PETSc

from gpu_mats import BackendError

from . import libpetsc as lp

PETSC_ERR_SUP_SYS = 57


def error_code(exc):
    if getattr(exc, "petsc_code", None):
        return exc.petsc_code
    if isinstance(exc, BackendError):
        return PETSC_ERR_SUP_SYS
    if isinstance(exc, (TypeError, ValueError)):
        return lp.PETSC_ERR_ARG_WRONG
    return lp.PETSC_ERR_PYTHON


def push_error(exc, name):
    """Put ``exc`` on PETSc's error stack as raised in ``name``; return its code."""
    code = error_code(exc)
    message = str(exc) if code != lp.PETSC_ERR_PYTHON else traceback.format_exc()
    return lp.set_error(code, name, message)


def petsc_callback(fntype, name):
    """Decorator: wrap ``fn`` as a C function pointer of ``fntype`` named ``name`` in tracebacks."""

    def decorate(fn):
        @functools.wraps(fn)
        def call(*args):
            try:
                fn(*args)
            except PETSc.Error as exc:
                return exc.ierr
            except Exception as exc:  # every failure must reach PETSc as an error code
                return push_error(exc, name)
            return 0

        return fntype(call)

    return decorate


def petsc_method(name_of):
    """Decorator for a method of a petsc4py Python type (PC, KSP): errors reach
    PETSc's trace under the name ``name_of(self)`` gives ("PCSetUp_AINV")."""

    def decorate(fn):
        @functools.wraps(fn)
        def call(self, *args):
            try:
                return fn(self, *args)
            except PETSc.Error:
                raise
            except Exception as exc:
                raise PETSc.Error(push_error(exc, name_of(self))) from exc

        return call

    return decorate
