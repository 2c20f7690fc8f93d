"""What the demos' mesh makers (meshes.py, cylinder_mesh.py) do around
their geometry with gmsh's Python API: a quiet session, and the mesh
generated, raised to its geometry order, written and counted."""

import contextlib

import gmsh


@contextlib.contextmanager
def session(name):
    """gmsh started without terminal output on a new model ``name``; yields
    its OpenCASCADE kernel and finalizes gmsh however the block ends."""
    gmsh.initialize()
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.model.add(name)
        yield gmsh.model.occ
    finally:
        gmsh.finalize()


def write(dim, order, path):
    """Mesh the model in ``dim`` dimensions with cells of geometry ``order``,
    write it to ``path`` (gmsh .msh 4) and return its number of cells."""
    gmsh.model.mesh.generate(dim)
    gmsh.model.mesh.setOrder(order)
    gmsh.write(path)
    _, tags, _ = gmsh.model.mesh.getElements(dim)
    return sum(len(t) for t in tags)
