"""Test meshes for the flow driver, made with gmsh's Python API: the unit
square (unstructured triangles, unstructured quadrilaterals, or both) and the
unit cube (tetrahedra, or prisms extruded from triangles), with the boundary
groups the cavity demo uses: "lid" (y = 1 in 2D, z = 1 in 3D) and "wall";
and the unit disk (triangles, its circle the group "wall"). ``--order 2``
gives second-order cells (triangle6, quad9, tetra10) whose edge nodes lie on
curved boundaries.

    python demos/meshes.py --kind triangles --size 0.02 --out square-tri.msh
    python demos/cavity.py -flow_mesh square-tri.msh -flow_re 100
"""

import argparse

import gmsh

KINDS = ("triangles", "quads", "mixed", "tetrahedra", "prisms", "disk")
PLANE = ("triangles", "quads", "mixed", "disk")


def make(kind, size, path, order=1):
    """Write a mesh of ``kind`` with cells of about ``size`` (and geometry
    ``order``) to ``path`` (gmsh .msh 4); return its cell count."""
    gmsh.initialize()
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.option.setNumber("Mesh.MeshSizeMin", size)
        gmsh.option.setNumber("Mesh.MeshSizeMax", size)
        gmsh.model.add(kind)
        occ = gmsh.model.occ
        if kind == "disk":
            occ.addDisk(0, 0, 0, 1, 1)
            occ.synchronize()
            _groups(2, lambda x, y, z: False)
        elif kind in PLANE:
            _square(occ, kind)
        else:
            _cube(occ, kind, size)
        dim = 2 if kind in PLANE else 3
        gmsh.model.mesh.generate(dim)
        gmsh.model.mesh.setOrder(order)
        gmsh.write(path)
        types, tags, _ = gmsh.model.mesh.getElements(dim)
        return sum(len(t) for t in tags)
    finally:
        gmsh.finalize()


def _square(occ, kind):
    if kind == "mixed":  # quadrilaterals on the left half, triangles on the right
        left, right = occ.addRectangle(0, 0, 0, 0.5, 1), occ.addRectangle(0.5, 0, 0, 0.5, 1)
        occ.fragment([(2, left)], [(2, right)])
        occ.synchronize()
        surfaces = [tag for _, tag in gmsh.model.getEntities(2)]
        quad_side = min(surfaces, key=lambda s: gmsh.model.occ.getCenterOfMass(2, s)[0])
        gmsh.model.mesh.setRecombine(2, quad_side)
    else:
        occ.addRectangle(0, 0, 0, 1, 1)
        occ.synchronize()
        if kind == "quads":
            gmsh.option.setNumber("Mesh.RecombineAll", 1)
            gmsh.option.setNumber("Mesh.Algorithm", 8)  # frontal-Delaunay for quads
    _groups(2, lambda x, y, z: abs(y - 1) < 1e-9)


def _cube(occ, kind, size):
    if kind == "prisms":
        square = occ.addRectangle(0, 0, 0, 1, 1)
        occ.extrude([(2, square)], 0, 0, 1, numElements=[max(1, round(1 / size))], recombine=True)
    else:
        occ.addBox(0, 0, 0, 1, 1, 1)
    occ.synchronize()
    _groups(3, lambda x, y, z: abs(z - 1) < 1e-9)


def _groups(dim, on_lid):
    """Physical groups: the domain, and its boundary split into "lid" and "wall"."""
    domain = gmsh.model.getEntities(dim)
    gmsh.model.addPhysicalGroup(dim, [tag for _, tag in domain], name="fluid")
    lid, wall = [], []
    for _, tag in gmsh.model.getBoundary(domain, combined=True, oriented=False):
        (lid if on_lid(*gmsh.model.occ.getCenterOfMass(dim - 1, tag)) else wall).append(tag)
    if lid:
        gmsh.model.addPhysicalGroup(dim - 1, lid, name="lid")
    gmsh.model.addPhysicalGroup(dim - 1, wall, name="wall")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=KINDS, default="triangles")
    parser.add_argument("--size", type=float, default=0.05, help="cell size")
    parser.add_argument("--order", type=int, choices=(1, 2), default=1, help="geometry order of the cells")
    parser.add_argument("--out", required=True, help="the .msh file to write")
    args = parser.parse_args()
    cells = make(args.kind, args.size, args.out, args.order)
    print(f"meshes: {args.out}: {cells} cells ({args.kind}, size {args.size:g}, order {args.order})")


if __name__ == "__main__":
    main()
