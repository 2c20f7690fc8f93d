"""Meshes of the DFG "flow around a cylinder" channels (Schäfer and Turek,
"Benchmark computations of laminar flow around a cylinder", Notes on
Numerical Fluid Mechanics 52, 1996), made with gmsh's Python API.

2D: the channel (0, 2.2) x (0, 0.41) less the disk of diameter 0.1 centred
at (0.2, 0.2), in triangles. 3D: the channel (0, 2.5) x (0, 0.41) x (0,
0.41) less the cylinder of diameter 0.1 whose axis runs along z through
(0.5, 0.2), in tetrahedra. Groups: "inlet" (x = 0), "outlet" (the far
end), "wall" (the channel's sides) and "cylinder". Level K has cells of
about H / 2^K away from the cylinder (H = 0.04 in 2D, 0.08 in 3D) and a
quarter of that on it, growing linearly over 0.15 from its surface; with
``order`` 2 the cells are quadratic, their edges on the cylinder on the
circle.

    python demos/cylinder_mesh.py --dim 2 --level 2 --out cylinder-2.msh
"""

import argparse

import gmsh

import gmsh_session

LENGTH = {2: 2.2, 3: 2.5}
HEIGHT, DIAMETER = 0.41, 0.1
CENTRE = {2: (0.2, 0.2), 3: (0.5, 0.2)}
SIZE = {2: 0.04, 3: 0.08}
REFINEMENT, REACH = 4.0, 0.15  # on the cylinder the cells are SIZE / 2^K / REFINEMENT, over REACH from it
CELLS = ("tetrahedra", "prisms")  # of a 3D mesh
LAYERS = 20  # of prisms along z at level 0


def make(dim, level, path, order=2, cells="tetrahedra", scale=1.0, algorithm=None, layers=None, wall_layer=None):
    """Write the channel of ``dim`` at refinement ``level`` to ``path`` (gmsh .msh 4); return its cell
    count. In 3D ``cells`` "prisms" extrudes the 2D mesh of the cross-section at 2D's size (SIZE[2] / 2^K,
    a quarter of it on the cylinder) along z in 20 * 2^K equal layers (or ``layers``: with one,
    benchmarks/extrude_prisms.py repeats it where gmsh is not, a fine level's file being too large to
    carry), so the cells are as orthogonal as 2D's triangles; "tetrahedra" meshes the volume at SIZE[3] /
    2^K. ``scale`` multiplies the cells' sizes and ``algorithm`` is gmsh's 2D one (Mesh.Algorithm; None:
    gmsh's default, Frontal-Delaunay): meshes as fine as a level's that place their cells otherwise
    (benchmarks/mesh_noise.py). ``wall_layer`` = (first, ratio, thickness), in units of the cells' size on
    the cylinder: a layer of quadrilaterals split in two triangles on it, the first ``first`` thick, each next
    ``ratio`` times the last, to ``thickness`` in all."""
    if cells not in CELLS:
        raise ValueError(f"cells must be one of {', '.join(CELLS)}, not {cells!r}")
    prisms = dim == 3 and cells == "prisms"
    size = scale * SIZE[2 if prisms else dim] / 2**level
    with gmsh_session.session(f"cylinder{dim}d") as occ:
        if algorithm is not None:
            gmsh.option.setNumber("Mesh.Algorithm", algorithm)
        (cx, cy), length = CENTRE[dim], LENGTH[dim]
        if dim == 2 or prisms:
            channel = occ.addRectangle(0, 0, 0, length, HEIGHT)
            body = occ.addDisk(cx, cy, 0, DIAMETER / 2, DIAMETER / 2)
            occ.cut([(2, channel)], [(2, body)])
            if prisms:
                surface = occ.getEntities(2)
                occ.extrude(surface, 0, 0, HEIGHT, numElements=[layers or LAYERS * 2**level], recombine=True)
        else:
            channel = occ.addBox(0, 0, 0, length, HEIGHT, HEIGHT)
            body = occ.addCylinder(cx, cy, 0, 0, 0, HEIGHT, DIAMETER / 2)
            occ.cut([(dim, channel)], [(dim, body)])
        occ.synchronize()
        groups = _groups(dim, length)
        _size_field(dim, groups["cylinder"], size)
        if wall_layer is not None:
            first, ratio, thickness = wall_layer
            wall = size / REFINEMENT  # the cells' size on the cylinder
            _boundary_layer(groups["cylinder"], first * wall, ratio, thickness * wall)
        return gmsh_session.write(dim, order, path)


def _groups(dim, length):
    """Physical groups: "fluid", and the boundary entities by where their centres lie."""
    domain = gmsh.model.getEntities(dim)
    gmsh.model.addPhysicalGroup(dim, [tag for _, tag in domain], name="fluid")
    groups = {"inlet": [], "outlet": [], "wall": [], "cylinder": []}
    for _, tag in gmsh.model.getBoundary(domain, combined=True, oriented=False):
        x, y, z = gmsh.model.occ.getCenterOfMass(dim - 1, tag)
        if abs(x) < 1e-9:
            groups["inlet"].append(tag)
        elif abs(x - length) < 1e-9:
            groups["outlet"].append(tag)
        elif min(abs(y), abs(y - HEIGHT)) < 1e-9 or (dim == 3 and min(abs(z), abs(z - HEIGHT)) < 1e-9):
            groups["wall"].append(tag)
        else:
            groups["cylinder"].append(tag)
    for name, tags in groups.items():
        gmsh.model.addPhysicalGroup(dim - 1, tags, name=name)
    return groups


def _size_field(dim, cylinder, size):
    """Cells of size / REFINEMENT on the cylinder, growing to ``size`` at REACH from it."""
    distance = gmsh.model.mesh.field.add("Distance")
    gmsh.model.mesh.field.setNumbers(distance, "CurvesList" if dim == 2 else "SurfacesList", cylinder)
    gmsh.model.mesh.field.setNumber(distance, "Sampling", 200)
    threshold = gmsh.model.mesh.field.add("Threshold")
    gmsh.model.mesh.field.setNumber(threshold, "InField", distance)
    gmsh.model.mesh.field.setNumber(threshold, "SizeMin", size / REFINEMENT)
    gmsh.model.mesh.field.setNumber(threshold, "SizeMax", size)
    gmsh.model.mesh.field.setNumber(threshold, "DistMin", 0.0)
    gmsh.model.mesh.field.setNumber(threshold, "DistMax", REACH)
    gmsh.model.mesh.field.setAsBackgroundMesh(threshold)
    for option in ("Mesh.MeshSizeFromPoints", "Mesh.MeshSizeFromCurvature", "Mesh.MeshSizeExtendFromBoundary"):
        gmsh.option.setNumber(option, 0)


def _boundary_layer(curves, first, ratio, thickness, quads=False):
    """gmsh's BoundaryLayer field on ``curves``: layers the first ``first`` thick, each next ``ratio`` times
    the last, to ``thickness`` in all; quadrilaterals, or each split in two triangles."""
    field = gmsh.model.mesh.field
    layer = field.add("BoundaryLayer")
    field.setNumbers(layer, "CurvesList", curves)
    for option, value in zip(("Size", "Ratio", "Thickness"), (first, ratio, thickness)):
        field.setNumber(layer, option, value)
    field.setNumber(layer, "Quads", int(quads))
    field.setAsBoundaryLayer(layer)


# The spanwise-periodic cylinder of demos/cylinder_les.py (diameter 1 at the origin): its cross-section, span
# and the box of its wake, where cells are a quarter of the far field's.
SPANWISE_BOX, SPAN, WAKE = (-10.0, -10.0, 30.0, 20.0), 3.141592653589793, (0.0, 10.0, -1.5, 1.5)


def make_spanwise(path, size, layers, refinement=8.0, order=1, wall_layer=None):
    """Write the spanwise-periodic cylinder (cylinder_les.py's) to ``path``; return its cell count. The
    cross-section SPANWISE_BOX less the unit-diameter disk at the origin, in triangles of ``size`` far away,
    ``size`` / ``refinement`` on the cylinder growing over two diameters, ``size`` / 4 in the WAKE box;
    with ``wall_layer`` = (first, ratio, thickness) a boundary layer of quadrilaterals on the cylinder, the
    first ``first`` thick, each next ``ratio`` times the last, to ``thickness`` (gmsh's BoundaryLayer
    field): extruded along z over SPAN in ``layers`` equal layers of prisms (and hexahedra). Groups:
    "inlet" (x = -10), "outlet" (x = 20), "sides" (y = -10 and 10), "cylinder", "front" (z = 0) and "back"
    (z = SPAN), back the front moved along z, so that the two can be joined as periodic."""
    with gmsh_session.session("cylinder-spanwise") as occ:
        x0, y0, width, height = SPANWISE_BOX
        section = occ.addRectangle(x0, y0, 0, width, height)
        occ.cut([(2, section)], [(2, occ.addDisk(0, 0, 0, 0.5, 0.5))])
        occ.synchronize()
        circle = [tag for _, tag in gmsh.model.getBoundary(occ.getEntities(2), oriented=False)
                  if max(abs(c) for c in gmsh.model.occ.getCenterOfMass(1, tag)[:2]) < 0.5]
        occ.extrude(occ.getEntities(2), 0, 0, SPAN, numElements=[layers], recombine=True)
        occ.synchronize()
        domain = gmsh.model.getEntities(3)
        gmsh.model.addPhysicalGroup(3, [tag for _, tag in domain], name="fluid")
        groups = {"inlet": [], "outlet": [], "sides": [], "front": [], "back": [], "cylinder": []}
        for _, tag in gmsh.model.getBoundary(domain, combined=True, oriented=False):
            x, y, z = gmsh.model.occ.getCenterOfMass(2, tag)
            name = ("inlet" if abs(x - x0) < 1e-9 else "outlet" if abs(x - x0 - width) < 1e-9 else
                    "sides" if min(abs(y - y0), abs(y - y0 - height)) < 1e-9 else "front" if abs(z) < 1e-9 else
                    "back" if abs(z - SPAN) < 1e-9 else "cylinder")
            groups[name].append(tag)
        for name, tags in groups.items():
            gmsh.model.addPhysicalGroup(2, tags, name=name)
        field = gmsh.model.mesh.field
        distance = field.add("Distance")
        field.setNumbers(distance, "SurfacesList", groups["cylinder"])
        near = field.add("Threshold")
        for option, value in (("InField", distance), ("SizeMin", size / refinement), ("SizeMax", size),
                              ("DistMin", 0.0), ("DistMax", 2.0)):
            field.setNumber(near, option, value)
        wake = field.add("Box")
        for option, value in zip(("XMin", "XMax", "YMin", "YMax"), WAKE):
            field.setNumber(wake, option, value)
        for option, value in (("ZMin", -1.0), ("ZMax", SPAN + 1.0), ("VIn", size / 4), ("VOut", size)):
            field.setNumber(wake, option, value)
        smallest = field.add("Min")
        field.setNumbers(smallest, "FieldsList", [near, wake])
        field.setAsBackgroundMesh(smallest)
        if wall_layer is not None:
            _boundary_layer(circle, *wall_layer, quads=True)
        for option in ("Mesh.MeshSizeFromPoints", "Mesh.MeshSizeFromCurvature", "Mesh.MeshSizeExtendFromBoundary"):
            gmsh.option.setNumber(option, 0)
        return gmsh_session.write(3, order, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, choices=(2, 3), default=2)
    parser.add_argument("--level", type=int, default=0, help="refinement level K: cells of SIZE / 2^K")
    parser.add_argument("--order", type=int, choices=(1, 2), default=2, help="geometry order of the cells")
    parser.add_argument("--cells", choices=CELLS, default="tetrahedra", help="3D: tetrahedra, or prisms "
                        "extruded from the cross-section's triangles")
    parser.add_argument("--layers", type=int, help="3D prisms: their layers along z (default 20 * 2^K)")
    parser.add_argument("--out", required=True, help="the .msh file to write")
    args = parser.parse_args()
    cells = make(args.dim, args.level, args.out, args.order, args.cells, layers=args.layers)
    print(f"cylinder_mesh: {args.out}: {cells} cells ({args.dim}D, level {args.level}, order {args.order}, "
          f"{args.cells if args.dim == 3 else 'triangles'})")


if __name__ == "__main__":
    main()
