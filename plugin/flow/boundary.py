"""Boundary conditions of the flow driver, one per boundary tag.

A geometry names its boundary groups (``FiniteVolumeGeometry.boundary_names``,
tag by name); the operators take a condition for every tag. Walls hold the
velocity (Dirichlet, no slip; a moving wall slides with its velocity) and
carry no normal flux; the pressure sees them as Neumann boundaries.
"""

from dataclasses import dataclass

import numpy


@dataclass(frozen=True)
class Wall:
    """A fixed wall, or a wall sliding with ``velocity`` (a vector, or None: at rest)."""

    velocity: tuple = None

    def velocity_in(self, dim):
        if self.velocity is None:
            return numpy.zeros(dim)
        velocity = numpy.asarray(self.velocity, dtype=float)
        if velocity.shape != (dim,):
            raise ValueError(f"a wall velocity in {dim}D needs {dim} components, got {self.velocity}")
        return velocity


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
            raise ValueError(f"boundary condition for {key!r}: the mesh has no such boundary group "
                             f"(groups: {', '.join(f'{n} (tag {t})' for n, t in names.items()) or 'none'})")
        by_tag[tag] = condition
    missing = [f"{tag_names[tag]} (tag {tag})" for tag in sorted(tag_names) if tag not in by_tag]
    if missing:
        raise ValueError(f"no boundary condition for the boundary groups {', '.join(missing)}")
    return by_tag


def walls_at_rest(geometry):
    """A fixed wall on every boundary group of ``geometry``, by tag."""
    return {tag: Wall() for tag in geometry.boundary_names.values()}
