"""Prefix-aware options that print PETSc's ``-help`` lines and check ranges.

petsc4py's Options only reads values and petsctools manages option
dictionaries; neither prints ``-help`` entries with their defaults nor refuses
out-of-range values, which every option of this project must do.
"""

import contextlib

from petsc4py import PETSc

from . import libpetsc as lp


@contextlib.contextmanager
def options_set(prefix, values):
    """``-<prefix>name value`` for each item, for the length of a block (say, a
    setFromOptions call), then removed again."""
    db = PETSc.Options(prefix)
    for name, value in values.items():
        db[name] = value
    try:
        yield
    finally:
        for name in values:
            db.delValue(name)


class OptionError(ValueError):
    """A bad option value; surfaces as a PETSc error with this code."""

    petsc_code = lp.PETSC_ERR_ARG_OUTOFRANGE


class OptionsReader:
    """Reads the options of one object (one prefix), as its setFromOptions does."""

    def __init__(self, prefix, title, comm=None):
        self.prefix = prefix or ""
        self._db = PETSc.Options(self.prefix)
        self._comm = comm or PETSc.COMM_WORLD
        self._help = PETSc.Options().hasName("help")
        if self._help:
            self._print(f"{title} options -------------------------------------------------")

    def _print(self, text):
        PETSc.Sys.Print(text, comm=self._comm)

    def _show(self, name, value, default, text):
        if self._help:
            self._print(f"  -{self.prefix}{name} <now {value} : formerly {default}>: {text}")

    def int(self, name, default, text, *, low, high):
        value = self._db.getInt(name, default)
        self._show(name, value, default, f"{text} ({low} to {high})")
        if not low <= value <= high:
            raise OptionError(f"-{self.prefix}{name} {value} is out of range: valid values are {low} to {high}")
        return value

    def real(self, name, default, text, *, low, high=float("inf")):
        value = self._db.getReal(name, default)
        self._show(name, value, default, f"{text} ({low:g} to {high:g})")
        if not low <= value <= high:
            raise OptionError(f"-{self.prefix}{name} {value:g} is out of range: valid values are {low:g} to {high:g}")
        return value

    def bool(self, name, default, text):
        value = self._db.getBool(name, default)
        self._show(name, str(value).lower(), str(default).lower(), f"{text} (true or false)")
        return value

    def string(self, name, default, text):
        value = self._db.getString(name, default)
        self._show(name, value, default, text)
        return value

    def choice(self, name, default, choices, text):
        value = self._db.getString(name, default)
        self._show(name, value, default, f"{text} (one of {' '.join(choices)})")
        if value not in choices:
            raise OptionError(f"-{self.prefix}{name} {value} is not valid: choose one of {', '.join(choices)}")
        return value
