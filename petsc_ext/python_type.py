"""One base for the contexts of the project's Python PC and KSP types.

petsc4py calls methods of a context object (``setUp(pc)``, ``apply(pc, x,
y)``, ...; its demo/python_types keeps one class per hook). What every such
context of this project needs is written here once:

* a class-level table of options (``OPTIONS``, petsc_ext.options.Option),
  from which come setFromOptions, the ``-help`` lines, the options on the
  first ``-*_view`` line and the README's option table;
* a template ``setUp``: the type's log event and set-up timer around
  ``build``, the array backend found from the operator's vector type, and a
  device synchronize so that the viewed set-up time counts the GPU work;
* every protocol method wrapped once, so that an exception reaches PETSc as
  an error with its code and message (petsc_ext.callbacks).
"""

import numpy
from mpi4py import MPI
from petsc4py import PETSc

from .arrays import in_out_arrays, module_for_vec_type
from .callbacks import petsc_method
from .options import read_options
from .viewing import ascii_view

# The methods petsc4py calls on a Python PC or KSP context.
PROTOCOL = ("create", "destroy", "setUp", "reset", "setFromOptions", "view", "apply", "applyTranspose",
            "applySymmetricLeft", "applySymmetricRight", "preSolve", "postSolve", "solve", "step",
            "buildSolution", "buildResidual")


def _wrap_protocol(cls):
    for name in PROTOCOL:
        fn = cls.__dict__.get(name)
        if fn is not None and not getattr(fn, "_petsc_wrapped", False):
            wrapped = petsc_method(lambda self, name=name: f"{self.KIND}{name[0].upper()}{name[1:]}_"
                                                         f"{self.TYPE.upper()}")(fn)
            wrapped._petsc_wrapped = True
            setattr(cls, name, wrapped)


class PythonType:
    """The context of a Python PC or KSP type. Subclasses set ``TYPE`` (the
    PETSc type name), ``TITLE`` (the ``-help`` heading), ``SUMMARY`` (the
    words after the type name on the first view line), ``OPTIONS`` and
    ``EVENTS`` (log events besides ``<TYPE>Setup``), and write ``build``
    (the set-up proper), ``describe`` (view lines after the first) and
    ``release`` (drop what ``build`` made)."""

    KIND = ""
    TYPE = ""
    TITLE = ""
    SUMMARY = ""
    OPTIONS = ()
    EVENTS = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _wrap_protocol(cls)
        if cls.TYPE:
            cls.events = {name: PETSc.Log.Event(f"{cls.TYPE.upper()}{name}") for name in ("Setup", *cls.EVENTS)}

    def __init__(self):
        for option in self.OPTIONS:
            setattr(self, option.attr, option.default)
        self.xp, self.setup_seconds = None, 0.0

    # --- options -----------------------------------------------------------------

    def setFromOptions(self, obj):
        chosen = read_options(self, self.OPTIONS, obj.getOptionsPrefix(), self.TITLE, obj.getComm(),
                              self.option_default)
        changed = {attr for attr, value in chosen.items() if value != getattr(self, attr)}
        for attr, value in chosen.items():
            setattr(self, attr, value)
        if changed:
            self.options_changed(obj, changed)

    def option_default(self, option, chosen):
        """The default of ``option`` given the values ``chosen`` before it: the current value."""
        return getattr(self, option.attr)

    def options_changed(self, obj, changed):
        """Options named by their attributes in ``changed`` took new values."""

    # --- set-up ------------------------------------------------------------------

    def operator(self, obj):
        """The matrix whose vectors say where the type works."""
        raise NotImplementedError

    def setUp(self, obj):
        self.events["Setup"].begin()
        start = PETSc.Log.getTime()
        try:
            self.xp = module_for_vec_type(self.operator(obj).getVecType())
            self.build(obj)
            if self.xp is not numpy:
                self.xp.cuda.get_current_stream().synchronize()  # the set-up time includes the GPU work
        finally:
            self.setup_seconds = PETSc.Log.getTime() - start
            self.events["Setup"].end()

    def build(self, obj):
        """The set-up proper, in ``self.xp``'s memory."""

    def release(self):
        """Drop what ``build`` made."""

    def reset(self, obj):
        self.release()

    def destroy(self, obj):
        self.release()

    # --- viewing -----------------------------------------------------------------

    def view(self, obj, viewer):
        words = [self.SUMMARY] if self.SUMMARY else []
        words += [w for w in (option.shown(self) for option in self.OPTIONS) if w is not None]
        ascii_view(viewer, [f"{self.TYPE}: {', '.join(words)}"] + self.describe(obj))

    def describe(self, obj):
        """The view's lines after the first (options) line."""
        return []

    def max_over_ranks(self, obj, value):
        return obj.getComm().tompi4py().allreduce(value, op=MPI.MAX)

    def setup_line(self, obj):
        where = "GPU" if self.xp is not numpy else "host"
        return f"  setup time: {self.max_over_ranks(obj, self.setup_seconds):.4f} s ({where})"


class PythonPC(PythonType):
    """A Python PC: works where its preconditioning matrix's vectors live."""

    KIND = "PC"

    def operator(self, pc):
        return pc.getOperators()[1]


class ExactSolvePC(PythonPC):
    """A Python PC whose ``build`` sets ``solver``, an exact solve of a
    symmetric operator (``solver.solve(b, x)`` on arrays): its apply on
    PETSc vectors and on arrays (an ``Apply`` event each), its transpose the
    same (boxfft, layerfft)."""

    EVENTS = ("Apply",)

    def __init__(self):
        super().__init__()
        self.solver = None

    def release(self):
        self.solver = None

    def apply(self, pc, x, y):
        with in_out_arrays(x, y, self.xp, self.TYPE) as (xa, ya):
            self.apply_arrays(xa, ya)

    def apply_arrays(self, x, y):
        """y = S^+ x on arrays in the PC's memory (no PETSc dispatch)."""
        self.events["Apply"].begin()
        try:
            self.solver.solve(x, y)
        finally:
            self.events["Apply"].end()

    def applyTranspose(self, pc, x, y):
        self.apply(pc, x, y)  # the operator is symmetric, and so its inverse

    def graph_key(self):
        """What a CUDA graph of apply_arrays reads; None: not capturable (a type whose solve allocates or
        reads back says so by keeping this)."""
        return None


class PythonKSP(PythonType):
    """A Python KSP: works where its operator's vectors live."""

    KIND = "KSP"

    def operator(self, ksp):
        return ksp.getOperators()[0]


_wrap_protocol(PythonType)
