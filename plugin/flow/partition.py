"""Cutting a mesh's cells among ranks and numbering them for locality.

Everything here works on the cell graph: ``face_cells`` (F, 2), the two
cells of each interior face. A partitioner gives each cell a part (a rank);
``locality_order`` a position inside its part.
"""

import numpy

from .extrusion import ExtrusionError, layer_order
from .mesh import MeshError


def graph_partition(face_cells, num_cells, parts):
    """A part (0 .. parts-1) for each cell: METIS (Karypis and Kumar, "A fast
    and high quality multilevel scheme for partitioning irregular graphs",
    1998, through pymetis) on the graph of cells joined by faces, fewest faces
    cut for parts of equal size."""
    if parts == 1:
        return numpy.zeros(num_cells, dtype=numpy.int64)
    import pymetis

    graph = cell_graph(face_cells, num_cells)
    _, membership = pymetis.part_graph(parts, adjacency=pymetis.CSRAdjacency(graph.indptr, graph.indices))
    return numpy.asarray(membership, dtype=numpy.int64)


def coordinate_bisection(centroids, parts):
    """A part (0 .. parts-1) for each cell: recursive bisection of the cell
    centroids across the longest side of their box, in proportion to the parts
    on each side (a geometric partition; METIS cuts fewer faces)."""
    owner = numpy.zeros(len(centroids), dtype=numpy.int64)

    def split(cells, first, count):
        if count == 1:
            owner[cells] = first
            return
        points = centroids[cells]
        axis = int(numpy.argmax(points.max(axis=0) - points.min(axis=0))) if len(cells) else 0
        ordered = cells[numpy.argsort(points[:, axis], kind="stable")]
        low = count // 2
        cut = len(ordered) * low // count
        split(ordered[:cut], first, low)
        split(ordered[cut:], first + low, count - low)

    split(numpy.arange(len(centroids)), 0, parts)
    return owner


def column_partition(face_cells, centres, parts):
    """A part (0 .. parts-1) for each cell of a mesh extruded along z in
    equal layers: METIS on the graph of its columns (the cells standing
    above each other), so that a part holds whole columns and layerfft's
    transforms along them are its own; a MeshError where the mesh has no
    such layers."""
    try:
        order = layer_order(centres)
    except ExtrusionError as exc:
        raise MeshError(f"the columns partition needs a mesh extruded along z in equal layers: {exc}") from exc
    column = numpy.empty(len(centres), dtype=numpy.int64)
    column[order] = numpy.arange(order.shape[1])
    joined = column[face_cells]
    return graph_partition(joined[joined[:, 0] != joined[:, 1]], order.shape[1], parts)[column]


# name -> f(face_cells, cell centres, parts): a part for each cell
PARTITIONERS = {"metis": lambda face_cells, centres, parts: graph_partition(face_cells, len(centres), parts),
                "bisection": lambda face_cells, centres, parts: coordinate_bisection(centres, parts),
                "columns": column_partition}


def partition_quality(face_cells, owner):
    """(faces cut, halo cells per part): the faces whose cells lie on two
    parts, and for each part the cells of other parts next to its own."""
    a, b = owner[face_cells[:, 0]], owner[face_cells[:, 1]]
    cut = a != b
    parts = int(owner.max(initial=0)) + 1
    halo = [numpy.unique(numpy.concatenate((face_cells[cut & (a == p), 1], face_cells[cut & (b == p), 0]))).size
            for p in range(parts)]
    return int(cut.sum()), halo


def locality_order(face_cells, owner):
    """A position for each cell inside its part (``owner``, a part per cell):
    reverse Cuthill-McKee on the part's cell graph (Cuthill and McKee 1969),
    so that a row's columns lie near it and a SpMV reads its vector in nearby
    blocks."""
    import scipy.sparse.csgraph

    graph = cell_graph(face_cells, len(owner))
    position = numpy.empty(len(owner), dtype=numpy.int64)
    for part in range(int(owner.max(initial=0)) + 1):
        cells = numpy.flatnonzero(owner == part)
        order = scipy.sparse.csgraph.reverse_cuthill_mckee(graph[cells][:, cells].tocsr(), symmetric_mode=True)
        position[cells[order]] = numpy.arange(len(cells))
    return position


def cell_graph(face_cells, num_cells):
    """The cells joined by faces, as a symmetric scipy CSR adjacency matrix."""
    import scipy.sparse

    i, j = face_cells[:, 0], face_cells[:, 1]
    return scipy.sparse.csr_matrix((numpy.ones(2 * len(i)), (numpy.concatenate((i, j)), numpy.concatenate((j, i)))),
                                   shape=(num_cells, num_cells))
