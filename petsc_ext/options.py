"""Prefix-aware options: tables of them, ``-help`` lines with defaults, range
checks, and defaults for inner objects that never touch a user's value.

petsc4py's Options only reads values, and petsctools manages defaults (used
here for them) but neither prints ``-help`` entries nor refuses out-of-range
values, which every option of this project must do. A type declares its
options once, as a table of ``Option`` rows; from the table come its
setFromOptions, its ``-help`` lines, the options on the first line of its
``-*_view`` and its rows in the README's option tables.
"""

import contextlib
from dataclasses import dataclass

import petsctools
from petsc4py import PETSc

from . import libpetsc as lp


def help_requested():
    """-help was given: a program lists its options as it reads them, then stops before its work."""
    return PETSc.Options().hasName("help")


@contextlib.contextmanager
def option_defaults(prefix, values):
    """``-<prefix>name value`` for each item as a default, for the length of a
    block (a setFromOptions call, say): a value the user gave wins and stays in
    the database; the defaults are gone after the block (petsctools'
    OptionsManager)."""
    with petsctools.OptionsManager(dict(values), options_prefix=prefix or "").inserted_options():
        yield


class OptionError(ValueError):
    """A bad option value; surfaces as a PETSc error with this code."""

    petsc_code = lp.PETSC_ERR_ARG_OUTOFRANGE


@dataclass(frozen=True)
class Option:
    """One option of a type: ``-<prefix><name>``, held in the owner's attribute ``attr``.

    The kind follows the default: bool, int (range ``low``..``high``), float
    (range), str with ``choices``, or free str. ``view`` formats the value on
    the type's first ``-*_view`` line ("levels {}", or a function of the
    value that returns the words; None: not shown there),
    ``applies`` = (attr, values) shows it only when that attribute has one of
    those values.
    """

    name: str
    attr: str
    default: object
    help: str
    choices: tuple = ()
    low: float = None
    high: float = None
    above: float = None  # an exclusive lower bound (reals)
    view: object = None
    applies: tuple = None

    def read(self, reader, current):
        if isinstance(self.default, bool):
            return reader.bool(self.name, current, self.help)
        if isinstance(self.default, int):
            return reader.int(self.name, current, self.help, low=self.low, high=self.high)
        if isinstance(self.default, float):
            return reader.real(self.name, current, self.help, low=-float("inf") if self.low is None else self.low,
                               high=float("inf") if self.high is None else self.high, above=self.above)
        if self.choices:
            return reader.choice(self.name, current, self.choices, self.help)
        return reader.string(self.name, current, self.help)

    def shown(self, owner):
        """The value as its ``-*_view`` words, or None."""
        if self.view is None or (self.applies and getattr(owner, self.applies[0]) not in self.applies[1]):
            return None
        value = getattr(owner, self.attr)
        if callable(self.view):
            return self.view(value)
        return self.view.format(str(value).lower() if isinstance(value, bool) else _plain(value))

    def readme_row(self):
        default = str(self.default).lower() if isinstance(self.default, bool) else _plain(self.default)
        values = f" ({', '.join(f'`{c}`' for c in self.choices)})" if self.choices else _range(self)
        text = self.help.replace("|", "\\|")  # a bar would end the Markdown cell
        return f"| `-{self.name} <{default}>` | {text}{values} |"


def _plain(value):
    return f"{value:g}" if isinstance(value, float) else str(value)


def _range(option):
    if option.above is not None:
        return f" (above {_plain(option.above)})" if option.high is None else (
            f" (above {_plain(option.above)} to {_plain(option.high)})")
    if option.low is None or isinstance(option.default, bool):
        return ""
    high = "" if option.high is None or option.high == float("inf") else _plain(option.high)
    return f" ({_plain(option.low)} to {high})" if high else f" (at least {_plain(option.low)})"


def read_options(owner, options, prefix, title, comm, default=None):
    """The values of ``options`` (a table) for ``owner``, read as its
    setFromOptions does: the current attribute values are the defaults
    (``default(option, chosen)`` may give another from the values read so
    far). Returns {attr: value}; the owner is not changed."""
    reader = OptionsReader(prefix, title, comm)
    chosen = {}
    for option in options:
        current = default(option, chosen) if default else getattr(owner, option.attr)
        chosen[option.attr] = option.read(reader, current)
    return chosen


def readme_table(options):
    """The README's table rows of ``options``."""
    return "\n".join(option.readme_row() for option in options)


class OptionsReader:
    """Reads the options of one object (one prefix), as its setFromOptions does."""

    def __init__(self, prefix, title, comm=None, show_help=True):
        self.prefix = prefix or ""
        self._db = PETSc.Options(self.prefix)
        self._comm = comm or PETSc.COMM_WORLD
        self._help = show_help and PETSc.Options().hasName("help")
        if self._help:
            self._print(f"{title} options -------------------------------------------------")

    def _print(self, text):
        PETSc.Sys.Print(text, comm=self._comm)

    def _show(self, name, value, default, text):
        if self._help:
            self._print(f"  -{self.prefix}{name} <now {value} : formerly {default}>: {text}")

    def _typed(self, read, name, default, kind):
        """``read(name, default)``, or an OptionError naming the option and the value that is not ``kind``."""
        try:
            return read(name, default)
        except PETSc.Error:
            raise OptionError(f"-{self.prefix}{name} {self._db.getString(name, '')!r} is not {kind}") from None

    def int(self, name, default, text, *, low, high):
        value = self._typed(self._db.getInt, name, default, "an integer")
        self._show(name, value, default, f"{text} ({low} to {high})")
        if not low <= value <= high:
            raise OptionError(f"-{self.prefix}{name} {value} is out of range: valid values are {low} to {high}")
        return value

    def real(self, name, default, text, *, low, high=float("inf"), above=None):
        value = self._typed(self._db.getReal, name, default, "a real number")
        lowest = f"above {above:g}" if above is not None else f"{low:g}"
        self._show(name, value, default, f"{text} ({lowest} to {high:g})")
        if not (low <= value <= high and (above is None or value > above)):
            raise OptionError(f"-{self.prefix}{name} {value:g} is out of range: valid values are {lowest} to {high:g}")
        return value

    def bool(self, name, default, text):
        value = self._typed(self._db.getBool, name, default, "true or false")
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
