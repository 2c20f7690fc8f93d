"""Repeat a mesh of one layer of prisms along z into many equal layers.

gmsh extrudes a cross-section into layers of prisms, but a fine level's
file (demos/cylinder_mesh.py's 3D-1Z prisms at level 2: 2.4M quadratic
prisms, 0.9 GB) is too large to carry to the GPU machine, where gmsh is
not. The same mesh with one layer (``cylinder_mesh.py --layers 1``) is
small; this script repeats its layer in NumPy through meshio, each node
keeping its place in the layer (bottom, middle of a quadratic cell, top),
so that the cells, their node order and their groups are gmsh's own.

    python benchmarks/extrude_prisms.py one-layer.msh --layers 80 --out prisms.msh
"""

import argparse

import meshio
import numpy


def extrude(mesh, layers):
    """The one-layer ``mesh`` (its nodes on the planes z0, its top z1 and, for quadratic cells, halfway)
    repeated into ``layers`` equal layers between z0 and z1: a meshio.Mesh with the same cell types,
    groups and node order. Cells on the bottom plane stay, those on the top move to the new top."""
    z = mesh.points[:, 2]
    z0, z1 = z.min(), z.max()
    level = numpy.rint(2 * (z - z0) / (z1 - z0)).astype(numpy.int64)  # 0 bottom, 1 middle, 2 top
    if not numpy.allclose(z, z0 + level * (z1 - z0) / 2, rtol=0, atol=1e-9 * (z1 - z0)):
        raise ValueError("not one layer: nodes lie off the bottom, middle and top planes")
    xy, plane = numpy.unique(numpy.round(mesh.points[:, :2], 12), axis=0, return_inverse=True)
    plane = plane.ravel()  # each node's place in the cross-section
    heights = 2 * layers + 1
    points = numpy.empty((len(xy) * heights, 3))
    points[:, :2] = numpy.repeat(xy, heights, axis=0)
    points[:, 2] = numpy.tile(z0 + (z1 - z0) * numpy.arange(heights) / (2 * layers), len(xy))
    cells, data = [], {name: [] for name in mesh.cell_data}
    for block, block_cells in enumerate(mesh.cells):
        levels = level[block_cells.data]
        steps = [0] if (levels == 0).all() else [layers - 1] if (levels == 2).all() else range(layers)
        new = numpy.concatenate([plane[block_cells.data] * heights + 2 * k + levels for k in steps])
        cells.append(meshio.CellBlock(block_cells.type, new))
        for name, values in mesh.cell_data.items():
            data[name].append(numpy.tile(values[block], len(steps)))
    return meshio.Mesh(points, cells, cell_data=data, field_data=mesh.field_data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mesh", help="a mesh of one layer of prisms along z (gmsh .msh)")
    parser.add_argument("--layers", type=int, required=True, help="the layers of the mesh written")
    parser.add_argument("--out", required=True, help="the .msh file to write")
    args = parser.parse_args()
    mesh = extrude(meshio.read(args.mesh), args.layers)
    meshio.write(args.out, mesh, file_format="gmsh22", binary=True)
    print(f"extrude_prisms: {args.out}: {sum(len(c.data) for c in mesh.cells if c.dim == 3)} cells in "
          f"{args.layers} layers")


if __name__ == "__main__":
    main()
