"""Boundary conditions of the flow driver, one per boundary group.

A geometry names its boundary groups (``FiniteVolumeGeometry.boundary_names``,
tag by name); the operators take a condition for every tag:

  Wall     the velocity held (no slip; a moving wall slides with its
           velocity), no normal flux; Neumann for the pressure.
  Inflow   the velocity given, a function of position and time; its normal
           flux is known and enters the divergence, the momentum it carries
           enters the convection; Neumann for the pressure.
  Outflow  the pressure given (Dirichlet), zero normal gradient of the
           velocity. The normal velocity on its faces is an unknown of the
           projection like an interior face's. Where fluid flows back in, it
           brings no momentum (the face convects max(F, 0) u of its cell:
           the kinetic energy cannot grow through it).
  Slip     symmetry: no normal velocity, no shear (the tangential velocity
           has zero normal gradient); Neumann for the pressure.

Programs give conditions as objects; ``-flow_bc_<group> <kind>[:<values>]``
overrides them per group (``conditions_from_options``).
"""

from dataclasses import dataclass

import numpy
from petsc4py import PETSc

from petsc_ext.options import OptionError


def _vector(values, dim, what):
    vector = numpy.asarray(values, dtype=float)
    if vector.shape != (dim,):
        raise ValueError(f"{what} in {dim}D needs {dim} components, got {values}")
    return vector


@dataclass(frozen=True)
class Wall:
    """A fixed wall, or a wall sliding with ``velocity`` (a vector, or None: at rest)."""

    velocity: tuple = None
    holds_velocity = True

    def velocity_at(self, x, t):
        """The velocity on faces with centroids x (k, d) at time t: (k, d)."""
        dim = x.shape[1]
        velocity = numpy.zeros(dim) if self.velocity is None else _vector(self.velocity, dim, "a wall velocity")
        return numpy.broadcast_to(velocity, x.shape)

    def describe(self):
        return "wall" if self.velocity is None else f"wall moving at {tuple(self.velocity)}"


@dataclass(frozen=True)
class Inflow:
    """The velocity given on the group: a constant vector, or a function
    ``velocity(x, t)`` of the face centroids x (k, d) returning (k, d);
    ``steady``: it does not depend on t (evaluated once)."""

    velocity: object
    steady: bool = True
    holds_velocity = True

    def velocity_at(self, x, t):
        if callable(self.velocity):
            values = numpy.asarray(self.velocity(x, t), dtype=float)
            if values.shape != x.shape:
                raise ValueError(f"an inflow velocity function gave an array of shape {values.shape} for "
                                 f"{x.shape[0]} faces in {x.shape[1]}D: it must give {x.shape}")
            return values
        return numpy.broadcast_to(_vector(self.velocity, x.shape[1], "an inflow velocity"), x.shape)

    def describe(self):
        return "inflow" if callable(self.velocity) else f"inflow at {tuple(self.velocity)}"


@dataclass(frozen=True)
class Outflow:
    """The pressure ``pressure`` on the group, zero normal gradient of the velocity."""

    pressure: float = 0.0
    holds_velocity = False

    def describe(self):
        return f"outflow at pressure {self.pressure:g}"


@dataclass(frozen=True)
class Slip:
    """No normal velocity and no shear (a symmetry plane, a free-slip wall)."""

    holds_velocity = False

    def describe(self):
        return "slip"


class BoundaryError(ValueError):
    """Conditions that do not fit the mesh's boundary groups."""


KINDS = {"wall": Wall, "inflow": Inflow, "outflow": Outflow, "slip": Slip}


def conditions_by_tag(geometry, conditions):
    """{tag: condition} for every boundary group of ``geometry`` from ``conditions``,
    keyed by tag or by group name; every group needs one, and every key must
    name a group."""
    names = geometry.boundary_names
    tag_names = {tag: name for name, tag in names.items()}
    by_tag = {}
    for key, condition in conditions.items():
        tag = names.get(key, key)
        if tag not in tag_names:
            raise BoundaryError(f"boundary condition for {key!r}: the mesh has no such boundary group "
                                f"(groups: {_listed(names)})")
        by_tag[tag] = condition
    missing = [f"{tag_names[tag]} (tag {tag})" for tag in sorted(tag_names) if tag not in by_tag]
    if missing:
        raise BoundaryError(f"no boundary condition for the boundary groups {', '.join(missing)}")
    return by_tag


def _listed(names):
    return ", ".join(f"{n} (tag {t})" for n, t in names.items()) or "none"


def walls_at_rest(geometry):
    """A fixed wall on every boundary group of ``geometry``, by tag."""
    return {tag: Wall() for tag in geometry.boundary_names.values()}


OPTION = "flow_bc_"
LARGEST = 1e150  # a velocity or pressure whose square stays finite in double precision


def conditions_from_options(geometry, conditions, prefix=""):
    """``conditions`` (by tag or name) with the groups named in options
    ``-<prefix>flow_bc_<group> <kind>[:<values>]`` replaced: ``wall``,
    ``wall:1,0`` (moving), ``slip``, ``outflow``, ``outflow:<pressure>``,
    ``inflow:<velocity components>`` (uniform). A group the mesh lacks is an
    error listing the groups it has."""
    names = geometry.boundary_names
    chosen = dict(conditions)
    start, options = f"{prefix}{OPTION}", PETSc.Options()
    for key in sorted(options.getAll()):
        if not key.startswith(start):
            continue
        group = key[len(start):]
        if group not in names:
            raise OptionError(f"-{key}: the mesh has no boundary group {group!r} (groups: {_listed(names)})")
        for name in (group, names[group]):
            chosen.pop(name, None)
        chosen[group] = parse_condition(f"-{key}", options.getString(key), geometry.dim)  # read: marked used
    return chosen


def parse_condition(option, text, dim):
    """The condition written ``<kind>[:<comma-separated values>]`` (see conditions_from_options)."""
    kind, _, values = text.partition(":")
    if kind not in KINDS:
        raise OptionError(f"{option} {text}: the kind must be one of {', '.join(KINDS)}")
    try:
        numbers = tuple(float(v) for v in values.split(",")) if values else ()
    except ValueError:
        raise OptionError(f"{option} {text}: the values after ':' must be numbers separated by commas") from None
    if not all(abs(v) <= LARGEST for v in numbers):  # NaN fails too
        raise OptionError(f"{option} {text}: the values must be finite numbers of magnitude at most {LARGEST:g}")
    wanted = {"wall": (0, dim), "inflow": (dim,), "outflow": (0, 1), "slip": (0,)}[kind]
    if len(numbers) not in wanted:
        counts = " or ".join(str(n) for n in wanted)
        raise OptionError(f"{option} {text}: {kind} takes {counts} values in {dim}D, got {len(numbers)}")
    if kind == "outflow":
        return Outflow(*numbers)
    if kind == "slip":
        return Slip()
    return KINDS[kind](numbers or None)
