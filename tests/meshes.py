"""Small meshio meshes of the unit square and cube for the tests, of every cell
type the flow driver reads, with their boundary faces in two gmsh physical
groups: "lid" (y = 1 in 2D, z = 1 in 3D) and "wall" (the other sides).

Written without plugin.flow.mesh, so that the tests check it against an
independent description: the faces of each cell type in meshio's (gmsh's)
vertex order. ``gmsh_mesh`` runs demos/meshes.py (gmsh) for meshes these
cannot make: curved, second order.
"""

import dataclasses
import itertools
import os
import subprocess
import sys

import meshio
import numpy

# The faces of each cell type in meshio's vertex order.
FACES = {
    "triangle": [(0, 1), (1, 2), (2, 0)],
    "quad": [(0, 1), (1, 2), (2, 3), (3, 0)],
    "tetra": [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)],
    "hexahedron": [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7)],
    "wedge": [(0, 2, 1), (3, 4, 5), (0, 1, 4, 3), (1, 2, 5, 4), (2, 0, 3, 5)],
    "pyramid": [(0, 3, 2, 1), (0, 1, 4), (1, 2, 4), (2, 3, 4), (3, 0, 4)],
}
LID, WALL = 1, 2
MESHES = {  # name -> (cell kinds, vertex jitter): the unstructured meshes the tests run on
    "triangles": ("triangle", 0.3),
    "quads": ("quad", 0.3),
    "triangles-and-quads": (("quad", "triangle"), 0.3),
    "tetrahedra": ("tetra", 0.25),
    "hexahedra": ("hexahedron", 0.25),
    "prisms": ("wedge", 0.25),
    "pyramids": ("pyramid", 0.25),
    "hexahedra-and-prisms": (("hexahedron", "wedge"), 0.25),
}


def _grid(n, dim, jitter, rng):
    axes = [numpy.linspace(0.0, 1.0, n + 1)] * dim
    points = numpy.stack([a.ravel() for a in numpy.meshgrid(*axes, indexing="ij")], axis=1)
    inside = ((points > 0) & (points < 1)).all(axis=1)
    points[inside] += jitter / n * rng.uniform(-1, 1, (inside.sum(), dim))
    index = numpy.arange(len(points)).reshape((n + 1,) * dim)
    return points, index


def _boxes(index, dim):
    """The corners of each grid box, in the meshio order of a quad or hexahedron."""
    n = index.shape[0] - 1
    boxes = []
    for ijk in itertools.product(range(n), repeat=dim):
        corner = [index[tuple(numpy.add(ijk, offset))] for offset in
                  ([(0, 0), (1, 0), (1, 1), (0, 1)] if dim == 2 else
                   [(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (0, 0, 1), (1, 0, 1), (1, 1, 1), (0, 1, 1)])]
        boxes.append((ijk, corner))
    return boxes


def _split(kind, c, centre):
    """The cells of type ``kind`` that fill one box with meshio corners c."""
    if kind in ("quad", "hexahedron"):
        return [c]
    if kind == "triangle":
        return [[c[0], c[1], c[2]], [c[0], c[2], c[3]]]
    if kind == "wedge":
        return [[c[0], c[1], c[2], c[4], c[5], c[6]], [c[0], c[2], c[3], c[4], c[6], c[7]]]
    if kind == "tetra":  # Kuhn's six tetrahedra about the diagonal c[0]-c[6]
        return [[c[0], a, b, c[6]] for a, b in ((c[1], c[2]), (c[2], c[3]), (c[3], c[7]), (c[7], c[4]),
                                                 (c[4], c[5]), (c[5], c[1]))]
    if kind == "pyramid":  # a pyramid on each face, apex at the centre
        return [[c[f[0]], c[f[1]], c[f[2]], c[f[3]], centre] for f in FACES["hexahedron"]]
    raise ValueError(kind)


def _signed_volume(points, kind, cell):
    """Six times a tetrahedron's volume, or twice a triangle's, from the first corners (for orientation)."""
    x = points[cell]
    if kind in ("triangle", "quad"):
        a, b = x[1] - x[0], x[2] - x[0]
        return a[0] * b[1] - a[1] * b[0]
    if kind == "pyramid":
        base = x[:4].mean(axis=0)
        return numpy.cross(x[2] - x[0], x[3] - x[1]) @ (x[4] - base)
    apex = {"tetra": 3, "hexahedron": 4, "wedge": 3}[kind]
    return numpy.linalg.det(numpy.stack([x[1] - x[0], x[2] - x[0], x[apex] - x[0]]))


_FLIP = {"triangle": [0, 2, 1], "quad": [0, 3, 2, 1], "tetra": [0, 2, 1, 3], "pyramid": [0, 3, 2, 1, 4],
         "wedge": [0, 2, 1, 3, 5, 4], "hexahedron": [0, 3, 2, 1, 4, 7, 6, 5]}


def unit_mesh(kinds, n=4, jitter=0.0, seed=0):
    """The unit square (2D kinds) or cube cut into n boxes per side, each box
    filled with cells of ``kinds[i]`` (one kind, or a kind per half along x),
    interior vertices moved by up to ``jitter`` of a box."""
    rng = numpy.random.default_rng(seed)
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    dim = 2 if kinds[0] in ("triangle", "quad") else 3
    points, index = _grid(n, dim, jitter, rng)
    if "pyramid" in kinds:
        centres = {}
    cells = {kind: [] for kind in kinds}
    for ijk, corners in _boxes(index, dim):
        kind = kinds[min(ijk[0] * len(kinds) // n, len(kinds) - 1)]
        centre = None
        if kind == "pyramid":
            centre = len(points) + len(centres)
            centres[centre] = points[corners].mean(axis=0)
        for cell in _split(kind, corners, centre):
            cells[kind].append(cell)
    if "pyramid" in kinds:
        points = numpy.concatenate([points, numpy.array(list(centres.values()))])
    blocks = []
    for kind, block in cells.items():
        block = numpy.array(block)
        flip = numpy.array([_signed_volume(points, kind, c) < 0 for c in block])
        block[flip] = block[flip][:, _FLIP[kind]]
        blocks.append((kind, block))
    faces = _boundary_faces(blocks)
    groups = []
    for kind, block in faces.items():
        on_lid = numpy.isclose(points[block][:, :, dim - 1], 1.0).all(axis=1)
        blocks.append((kind, block))
        groups.append(numpy.where(on_lid, LID, WALL))
    cell_data = {"gmsh:physical": [numpy.zeros(len(b), dtype=int) for _, b in blocks[:len(cells)]] + groups}
    field_data = {"lid": numpy.array([LID, dim - 1]), "wall": numpy.array([WALL, dim - 1])}
    return meshio.Mesh(points, blocks, cell_data=cell_data, field_data=field_data)


def _boundary_faces(blocks):
    """The faces that only one cell has, by face type."""
    seen = {}
    for kind, block in blocks:
        for cell in block:
            for face in FACES[kind]:
                vertices = tuple(int(cell[v]) for v in face)
                key = tuple(sorted(vertices))
                seen[key] = None if key in seen else vertices
    faces = {}
    for vertices in seen.values():
        if vertices is not None:
            faces.setdefault({2: "line", 3: "triangle", 4: "quad"}[len(vertices)], []).append(vertices)
    return {kind: numpy.array(block) for kind, block in faces.items()}


def gmsh_mesh(directory, kind, size, order=1):
    """A mesh of demos/meshes.py (gmsh) written in ``directory``, read back by meshio."""
    path = os.path.join(str(directory), f"{kind}-{size}-{order}.msh")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, os.path.join(root, "demos", "meshes.py"), "--kind", kind, "--size", str(size),
                    "--order", str(order), "--out", path], check=True, capture_output=True)
    return meshio.read(path)


def regrouped(geometry, group):
    """A one-rank geometry with its boundary faces in new groups:
    ``group(x)`` names the group of the face whose centroid is x."""
    names = [group(x) for x in geometry.boundary_centroids]
    tags = {name: tag for tag, name in enumerate(sorted(set(names)))}
    boundary_tags = numpy.array([tags[name] for name in names], dtype=numpy.int64)
    return dataclasses.replace(geometry, boundary_tags=boundary_tags, boundary_names=tags,
                               boundary_counts=numpy.bincount(boundary_tags, minlength=len(tags))[None, :])


def channel_groups(x):
    """The unit square or cube as a channel along x: "inlet" at x = 0, "outlet"
    at x = 1, "slip" at y = 0, "wall" on the other sides."""
    if x[0] < 1e-9:
        return "inlet"
    if x[0] > 1 - 1e-9:
        return "outlet"
    return "slip" if x[1] < 1e-9 else "wall"


SIDES = ("xmin", "xmax", "ymin", "ymax", "zmin", "zmax")


def sided(mesh, lengths=(1.0, 1.0, 1.0), names=SIDES):
    """``mesh`` (unit_mesh's) stretched to ``lengths``, its boundary faces in one gmsh group per side of the box,
    named by ``names`` (xmin, xmax, ymin, ...)."""
    points = mesh.points * numpy.asarray(lengths)[: mesh.points.shape[1]]
    dim = points.shape[1]
    cells, physical = [], []
    for block in mesh.cells:
        cells.append((block.type, block.data))
        if block.type in ("quad", "triangle") and dim == 3 or block.type == "line":
            centre = points[block.data].mean(axis=1)
            side = numpy.full(len(block.data), -1)
            for d in range(dim):
                side[numpy.isclose(centre[:, d], 0.0)] = 2 * d
                side[numpy.isclose(centre[:, d], lengths[d])] = 2 * d + 1
            physical.append(side + 1)
        else:
            physical.append(numpy.zeros(len(block.data), dtype=int))
    field_data = {name: numpy.array([k + 1, dim - 1]) for k, name in enumerate(names[:2 * dim])}
    return meshio.Mesh(points, cells, cell_data={"gmsh:physical": physical}, field_data=field_data)


def prism_layers_mesh(n=4, lengths=(1.0, 1.0, 2.0)):
    """sided prisms in n layers along z (their triangles in x-y), the x-y nodes moved, the same in every layer:
    a mesh extruded along z in equal layers."""
    mesh = sided(unit_mesh("wedge", n=n), lengths)
    side = numpy.array(lengths[:2])
    inside = (mesh.points[:, :2] > 1e-9).all(axis=1) & (mesh.points[:, :2] < side - 1e-9).all(axis=1)
    shift = numpy.random.default_rng(3).uniform(-0.2, 0.2, (n + 1, n + 1, 2)) / n  # the same in every layer
    ij = numpy.round(mesh.points[:, :2] * n / side).astype(int)
    mesh.points[inside, :2] += shift[ij[inside, 0], ij[inside, 1]]
    return mesh


def shared_file(tmp_path, make, name):
    """The mesh ``make()`` makes on rank 0 of PETSc's world, written (gmsh 2.2) to a path every rank sees;
    (path, the mesh on rank 0, None elsewhere)."""
    from petsc4py import PETSc

    comm = PETSc.COMM_WORLD.tompi4py()
    path = comm.bcast(os.path.join(str(tmp_path), name) if comm.rank == 0 else None)
    mesh = None
    if comm.rank == 0:
        mesh = make()
        mesh.write(path, file_format="gmsh22", binary=False)
    comm.Barrier()
    return path, mesh
