"""Test meshes for the flow driver, made with gmsh's Python API: the unit
square (unstructured triangles, unstructured quadrilaterals, or both) and the
unit cube (tetrahedra, or prisms extruded from triangles), with the boundary
groups the cavity demo uses: "lid" (y = 1 in 2D, z = 1 in 3D) and "wall";
and the unit disk (triangles, its circle the group "wall"). ``--order 2``
gives second-order cells (triangle6, quad9, tetra10) whose edge nodes lie on
curved boundaries. ``--domain`` makes the plane kinds on the rectangles of
demos/channel.py instead: ``channel`` (0, 4) x (0, 1) with the groups
"inlet" (x = 0), "outlet" (x = 4) and "wall"; ``kovasznay`` (-0.5, 1) x
(-0.5, 1.5) with the group "boundary"; ``hiemenz`` (-1, 1) x (0, 1) with
the groups "wall" (y = 0) and "inflow" (demos/hiemenz.py).

    python demos/meshes.py --kind triangles --size 0.02 --out square-tri.msh
    python demos/cavity.py -flow_mesh square-tri.msh -flow_re 100
    python demos/meshes.py --kind quads --domain kovasznay --size 0.05 --out kovasznay.msh
"""

import argparse

import gmsh

import gmsh_session

KINDS = ("triangles", "quads", "mixed", "tetrahedra", "prisms", "disk")
PLANE = ("triangles", "quads", "mixed", "disk")
# domain -> (rectangle (x0, y0, width, height), the group of a boundary curve from its centre)
DOMAINS = {
    "unit": ((0.0, 0.0, 1.0, 1.0), lambda x, y: "lid" if abs(y - 1) < 1e-9 else "wall"),
    "channel": ((0.0, 0.0, 4.0, 1.0),
                lambda x, y: "inlet" if abs(x) < 1e-9 else "outlet" if abs(x - 4) < 1e-9 else "wall"),
    "kovasznay": ((-0.5, -0.5, 1.5, 2.0), lambda x, y: "boundary"),
    "hiemenz": ((-1.0, 0.0, 2.0, 1.0), lambda x, y: "wall" if abs(y) < 1e-9 else "inflow"),
}


def make(kind, size, path, order=1, domain="unit"):
    """Write a mesh of ``kind`` with cells of about ``size`` (and geometry
    ``order``) on ``domain`` (DOMAINS; only the unit square or cube in 3D) to
    ``path`` (gmsh .msh 4); return its cell count."""
    if domain != "unit" and kind not in PLANE[:3]:
        raise SystemExit(f"meshes: --domain {domain} takes the plane kinds {', '.join(PLANE[:3])}, not {kind}")
    with gmsh_session.session(kind) as occ:
        gmsh.option.setNumber("Mesh.MeshSizeMin", size)
        gmsh.option.setNumber("Mesh.MeshSizeMax", size)
        if kind == "disk":
            occ.addDisk(0, 0, 0, 1, 1)
            occ.synchronize()
            _groups(2, lambda x, y, z: "wall")
        elif kind in PLANE:
            _rectangle(occ, kind, *DOMAINS[domain])
        else:
            _cube(occ, kind, size)
        return gmsh_session.write(2 if kind in PLANE else 3, order, path)


def _rectangle(occ, kind, box, group):
    x0, y0, width, height = box
    if kind == "mixed":  # quadrilaterals on the left half, triangles on the right
        left = occ.addRectangle(x0, y0, 0, width / 2, height)
        right = occ.addRectangle(x0 + width / 2, y0, 0, width / 2, height)
        occ.fragment([(2, left)], [(2, right)])
        occ.synchronize()
        surfaces = [tag for _, tag in gmsh.model.getEntities(2)]
        quad_side = min(surfaces, key=lambda s: gmsh.model.occ.getCenterOfMass(2, s)[0])
        gmsh.model.mesh.setRecombine(2, quad_side)
    else:
        occ.addRectangle(x0, y0, 0, width, height)
        occ.synchronize()
        if kind == "quads":
            gmsh.option.setNumber("Mesh.RecombineAll", 1)
            gmsh.option.setNumber("Mesh.Algorithm", 8)  # frontal-Delaunay for quads
    _groups(2, lambda x, y, z: group(x, y))


def _cube(occ, kind, size):
    if kind == "prisms":
        square = occ.addRectangle(0, 0, 0, 1, 1)
        occ.extrude([(2, square)], 0, 0, 1, numElements=[max(1, round(1 / size))], recombine=True)
    else:
        occ.addBox(0, 0, 0, 1, 1, 1)
    occ.synchronize()
    _groups(3, lambda x, y, z: "lid" if abs(z - 1) < 1e-9 else "wall")


def _groups(dim, group):
    """Physical groups: the domain "fluid", and its boundary split into the
    groups that ``group(x, y, z)`` names from each boundary entity's centre."""
    domain = gmsh.model.getEntities(dim)
    gmsh.model.addPhysicalGroup(dim, [tag for _, tag in domain], name="fluid")
    groups = {}
    for _, tag in gmsh.model.getBoundary(domain, combined=True, oriented=False):
        groups.setdefault(group(*gmsh.model.occ.getCenterOfMass(dim - 1, tag)), []).append(tag)
    for name, tags in sorted(groups.items()):
        gmsh.model.addPhysicalGroup(dim - 1, tags, name=name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=KINDS, default="triangles")
    parser.add_argument("--size", type=float, default=0.05, help="cell size")
    parser.add_argument("--order", type=int, choices=(1, 2), default=1, help="geometry order of the cells")
    parser.add_argument("--domain", choices=tuple(DOMAINS), default="unit",
                        help="the unit square or cube, or a rectangle of demos/channel.py or demos/hiemenz.py "
                        "(plane kinds)")
    parser.add_argument("--out", required=True, help="the .msh file to write")
    args = parser.parse_args()
    cells = make(args.kind, args.size, args.out, args.order, args.domain)
    print(f"meshes: {args.out}: {cells} cells ({args.kind} on {args.domain}, size {args.size:g}, order {args.order})")


if __name__ == "__main__":
    main()
