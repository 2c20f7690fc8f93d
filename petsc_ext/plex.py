"""A DMPlex from lists of cells of mixed types, which petsc4py's
``DMPlex.createFromCellList`` (one number of vertices per cell) cannot make."""

import ctypes

import numpy
from petsc4py import PETSc

from . import libpetsc as lp


def plex_from_cells(comm, dim, cone_sizes, cones, coordinates):
    """An uninterpolated DMPlex on ``comm`` of the cells this rank gives:
    cell c has the ``cone_sizes[c]`` vertices that follow in ``cones``
    (global vertex numbers), and this rank gives the ``coordinates`` (v, d)
    of its share of the vertices (vertices numbered rank after rank). A rank
    may give no cells and no vertices (a mesh read on rank 0). Collective."""
    sizes = numpy.asarray(cone_sizes, dtype=PETSc.IntType)
    cones = numpy.ascontiguousarray(cones, dtype=PETSc.IntType)
    coordinates = numpy.ascontiguousarray(coordinates, dtype=PETSc.RealType)
    section = PETSc.Section().create(comm=PETSc.COMM_SELF)
    section.setChart(0, len(sizes))
    set_dof = section.setDof
    for cell, size in enumerate(sizes.tolist()):
        set_dof(cell, size)
    section.setUp()
    dm = PETSc.DMPlex().create(comm=comm)
    dm.setDimension(dim)
    vertex_sf = lp.c_ptr()
    total = comm.tompi4py().allreduce(len(coordinates))
    lp.check(lp.DMPlexBuildFromCellSectionParallel(dm.handle, len(sizes), len(coordinates), total, section.handle,
                                                   cones.ctypes.data, ctypes.byref(vertex_sf), None))
    try:
        lp.check(lp.DMPlexBuildCoordinatesFromCellListParallel(dm.handle, coordinates.shape[1], vertex_sf,
                                                               coordinates.ctypes.data))
    finally:
        lp.check(lp.PetscSFDestroy(ctypes.byref(vertex_sf)))
    section.destroy()
    return dm
