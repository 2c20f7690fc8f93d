"""A mesh file read once and distributed among ranks through PETSc's DMPlex.

Rank 0 reads the mesh (meshio), finds its faces and boundary groups
(``mesh_topology``) and partitions the graph of its cells (METIS or
coordinate bisection, plugin.flow.partition). A DMPlex of the cells and
their corner vertices is made on rank 0 and distributed with that partition
(PETSc's shell partitioner) and one layer of overlap (the cells that share a
vertex with a rank's own). Each cell's record (its number in the file, its
type, the coordinates of its nodes, its corners' numbers and the group of
each boundary facet) follows the cell through DMPlex's migration SF.

Every rank then works out the geometry of its own cells and of the
overlap's (so second-order cells stay curved), matches their facets, numbers
its own cells by reverse Cuthill-McKee after those of lower ranks, and
learns the numbers of the overlap's cells and of the faces its neighbours
own through DMPlex's point SF. A face belongs to the rank of its cell of
lower number (its cell 0), as FiniteVolumeGeometry says.
"""

import functools
import os
import time

import basix
import numpy
from mpi4py import MPI
from petsc4py import PETSc

from petsc_ext.plex import plex_from_cells

from .geometry import FiniteVolumeGeometry
from .mesh import (CELLS, MeshError, boundary_arrays, cell_geometry, face_arrays, facet_records, match_facets,
                   mesh_geometry, mesh_topology, oriented, read_mesh, tag_counts)
from .partition import PARTITIONERS, locality_order

KINDS = list(CELLS)  # a cell's type travels as its index here


class DistributedMesh:
    """A mesh read once and cut among the ranks of a communicator.

    ``geometry``: this rank's part (FiniteVolumeGeometry); ``dm``: the
    distributed DMPlex (cells with their corners, one layer of overlap);
    ``mesh``: the meshio mesh on rank 0 (None elsewhere), and ``whole`` its
    one-rank geometry, made on first use, for output; ``faces_cut``: faces
    whose two cells lie on two ranks; ``halo``: per rank, the cells of other
    ranks that share a face with its own; ``seconds``: {"read", "partition",
    "distribute", "geometry"}, the slowest rank's; ``periodic``: the pairs of
    groups joined (mesh_topology)."""

    def __init__(self, geometry, dm, mesh, faces_cut, halo, seconds, periodic=()):
        self.geometry, self.dm, self.mesh = geometry, dm, mesh
        self.faces_cut, self.halo, self.seconds, self.periodic = faces_cut, halo, seconds, tuple(periodic)

    @functools.cached_property
    def whole(self):
        return None if self.mesh is None else mesh_geometry(self.mesh, periodic=self.periodic)


def distribute(path, comm, partitioner="metis", periodic=()):
    """The mesh at ``path`` read on rank 0 of ``comm`` (an mpi4py
    communicator), cut with ``partitioner`` (plugin.flow.partition.PARTITIONERS)
    and distributed through a DMPlex, as the module says; ``periodic``: pairs
    of boundary groups joined as periodic (mesh_topology), whose cells are
    then neighbours in the partition and the overlap. On one rank there
    is nothing to distribute: no DMPlex is made (``dm`` is None) and the
    rank's cells are rank 0's. A mesh that cannot be read or used is a
    MeshError on every rank. Collective."""
    seconds = {}
    clock = time.perf_counter()

    def lap(name):
        nonlocal clock
        now = time.perf_counter()
        seconds[name] = now - clock
        clock = now

    mesh, topology, found, problem = None, None, None, ""
    if comm.rank == 0:
        try:
            mesh = read_mesh(path)
            lap("read")
            topology = mesh_topology(mesh, periodic=periodic)
            if comm.size > 1:
                found = _Records(topology, PARTITIONERS[partitioner], comm.size)
            lap("partition")  # faces matched, groups found and cells cut
        except Exception as exc:  # any failure must reach every rank, not leave them waiting
            problem = _described(exc, path)
    problem = comm.bcast(problem, root=0)
    if problem:
        raise MeshError(problem)
    clock = time.perf_counter()  # the other ranks waited for rank 0 until here
    dm = None
    try:
        if comm.size == 1:
            local, names = _LocalCells.of_topology(topology), topology.names
        else:
            dm, ints, floats, layout = _distributed(comm, found)
            lap("distribute")
            local, names = _LocalCells.of_plex(dm, ints, floats, layout), layout[-1]
        problem = ""
    except Exception as exc:  # an inverted cell: known to the ranks that hold it
        problem = _described(exc, path)
    problems = [p for p in comm.allgather(problem) if p]
    if problems:
        raise MeshError(problems[0])
    geometry, cut, halo = _rank_geometry(comm, local, names,
                                         (lambda rows: rows) if dm is None else _overlap_of(dm, local))
    lap("geometry")
    every = comm.allgather(seconds)
    slowest = {name: max(s.get(name, 0.0) for s in every) for name in ("read", "partition", "distribute", "geometry")}
    return DistributedMesh(geometry, dm, mesh, cut, halo, slowest, periodic)


def _described(exc, path):
    """A MeshError's own words; any other failure with the file's name and its kind."""
    if isinstance(exc, MeshError):
        return str(exc)
    return f"cannot use the mesh {os.path.abspath(path)}: {type(exc).__name__}: {exc}"


def _corners(kind):
    return len(basix.geometry(CELLS[kind][0]))


def _facets(kind):
    return len(basix.topology(CELLS[kind][0])[-2])


class _Records:
    """What travels with each cell, made on rank 0 from the MeshTopology: ``ints``
    (cells, 2 + C + S) its number in the file, its type (KINDS), its C corners'
    numbers (a periodic pair's joined: MeshTopology.identify) and the group
    tag of each of its S facets (-1: interior);
    ``floats`` (cells, N d) its nodes' coordinates in basix's order. For the
    plex: ``cone_sizes``, ``cones`` (the corners numbered compactly) and the
    ``coordinates`` of those corners; ``owner``: each cell's rank by
    ``partitioner``. ``layout``: (dim, C, S, N, {group name: tag})."""

    def __init__(self, t, partitioner, parts):
        dim = t.points.shape[1]
        kinds = [kind for kind, _ in t.blocks]
        width_c, width_s = max(map(_corners, kinds)), max(map(_facets, kinds))
        width_n = max(nodes.shape[1] for _, nodes in t.blocks)
        n = t.num_cells
        self.ints = numpy.full((n, 2 + width_c + width_s), -1, dtype=numpy.int64)
        self.floats = numpy.zeros((n, width_n * dim))
        self.ints[:, 0] = numpy.arange(n)
        self.cone_sizes, centres, first = numpy.empty(n, dtype=numpy.int64), numpy.empty((n, dim)), 0
        for kind, nodes in t.blocks:
            rows, k = slice(first, first + len(nodes)), _corners(kind)
            self.ints[rows, 1] = KINDS.index(kind)
            self.ints[rows, 2:2 + k] = t.identify[nodes[:, :k]]  # a periodic pair's corners one node
            self.floats[rows, :nodes.shape[1] * dim] = t.points[nodes].reshape(len(nodes), -1)
            self.cone_sizes[rows] = k
            centres[rows] = t.points[nodes[:, :k]].mean(axis=1)
            first += len(nodes)
        self.ints[:, 2 + width_c:] = t.facet_tags(width_s)
        corners = self.ints[:, 2:2 + width_c]
        used, self.cones = numpy.unique(corners[corners >= 0], return_inverse=True)  # plex vertices: corners only
        self.coordinates = t.points[used]
        self.owner = partitioner(t.face_cells, centres, parts)
        empty = numpy.flatnonzero(numpy.bincount(self.owner, minlength=parts) == 0)
        if empty.size:
            raise MeshError(f"the partition of the mesh's {n} cells among {parts} ranks leaves rank {empty[0]} "
                            f"without cells: run on fewer ranks (at most {n})")
        self.layout = (dim, width_c, width_s, width_n, t.names)


def _distributed(comm, found):
    """(DMPlex, ints, floats, layout): the plex made on rank 0 from ``found``
    (_Records, None on other ranks), distributed by its owners with one layer
    of overlap, and the records of its local cells in the plex's order."""
    layout = comm.bcast(None if found is None else found.layout, root=0)
    dim, width_c, width_s, width_n, _ = layout
    if found is None:
        ints, floats = numpy.zeros((0, 2 + width_c + width_s), numpy.int64), numpy.zeros((0, width_n * dim))
        sizes, cones, coordinates, owner = numpy.zeros(0, int), numpy.zeros(0, int), numpy.zeros((0, dim)), []
    else:
        ints, floats = found.ints, found.floats
        sizes, cones, coordinates, owner = found.cone_sizes, found.cones, found.coordinates, found.owner
    dm = plex_from_cells(PETSc.Comm(comm), dim, sizes, cones, coordinates)
    partitioner = dm.getPartitioner()
    partitioner.setType(PETSc.Partitioner.Type.SHELL)
    partitioner.setShellPartition(comm.size, numpy.bincount(owner, minlength=comm.size).astype(PETSc.IntType),
                                  numpy.argsort(owner, kind="stable").astype(PETSc.IntType))
    # Own cells first, then the overlap: DMPlexDistribute with an overlap in one call was slower.
    for step in (lambda: dm.distribute(overlap=0), lambda: dm.distributeOverlap(1)):
        dm.setBasicAdjacency(True, False)  # finite volumes: cells next to a cell through its cone
        migration = step()
        chart = dm.getChart()[1]
        ints, floats = _moved(migration, ints, chart), _moved(migration, floats, chart)
    dm.setName("flow mesh")
    dm.viewFromOptions("-flow_dm_view")
    start, end = dm.getHeightStratum(0)
    return dm, ints[start:end], floats[start:end], layout


def _moved(sf, rows, leaves):
    """``rows`` (one per root point of ``sf``, from the first) sent along ``sf``
    to an array of ``leaves`` rows."""
    roots = sf.getGraph()[0]
    root = numpy.zeros((roots, rows.shape[1]), dtype=rows.dtype)
    root[:len(rows)] = rows
    return _bcast(sf, root, numpy.zeros((leaves, rows.shape[1]), dtype=rows.dtype))


def _bcast(sf, root, leaf):
    """``leaf`` with the rows of ``root`` at the leaves of ``sf`` (rows of one width)."""
    unit = MPI._typedict[root.dtype.char].Create_contiguous(root.shape[1]).Commit()
    try:
        sf.bcastBegin(unit, root, leaf, MPI.REPLACE)
        sf.bcastEnd(unit, root, leaf, MPI.REPLACE)
    finally:
        unit.Free()
    return leaf


class _LocalCells:
    """A rank's cells, its own and the overlap's, in blocks of one type:
    ``numbers`` (in the file), ``own``, ``point`` (the plex point of each;
    None on one rank), ``tags`` (cells, S) (the group of each boundary facet,
    -1 elsewhere); their facet records (``keys``, ``cells``, ``slots``) matched
    into ``pairs`` and ``lone``, and their geometry (cell_geometry's
    ``volumes`` .. ``centres``). Made without collective calls: an inverted
    cell is a MeshError on the ranks that hold it."""

    def __init__(self, blocks, coordinates, numbers, tags, own, point, records=None):
        self.numbers, self.tags, self.own, self.point = numbers, tags, own, point
        if records is None:
            keys, cells, slots = facet_records(blocks)
            records = (cells, slots, *match_facets(keys))
        self.cells, self.slots, self.pairs, self.lone = records
        self.volumes, self.centroids, self.vectors, self.areas, self.centres = cell_geometry(coordinates, numbers)

    @classmethod
    def of_topology(cls, t):
        """All the cells of a mesh's MeshTopology, on its one rank."""
        n = t.num_cells
        tags = t.facet_tags(max(_facets(kind) for kind, _ in t.blocks))
        return cls(t.blocks, t.node_coordinates(), numpy.arange(n), tags, numpy.ones(n, dtype=bool), None,
                   (t.cells, t.slots, t.pairs, t.lone))

    @classmethod
    def of_plex(cls, dm, ints, floats, layout):
        """The local cells of the distributed ``dm`` from their records."""
        dim, width_c, _, _, _ = layout
        start, end = dm.getHeightStratum(0)
        _, leaves, _ = dm.getPointSF().getGraph()
        own = numpy.ones(end - start, dtype=bool)
        leaves = numpy.asarray(leaves, dtype=numpy.int64)
        own[leaves[leaves < end] - start] = False  # overlap cells are leaves of the point SF
        order = numpy.argsort(ints[:, 1], kind="stable")  # one block per type
        ints, floats = ints[order], floats[order]
        blocks, coordinates = [], []
        for code in numpy.unique(ints[:, 1]).tolist():
            kind, rows = KINDS[code], ints[:, 1] == code
            count = len(CELLS[kind][2])
            blocks.append((kind, ints[rows, 2:2 + _corners(kind)]))
            coordinates.append((kind, floats[rows, :count * dim].reshape(-1, count, dim)))
        return cls(blocks, coordinates, ints[:, 0], ints[:, 2 + width_c:], own[order], order + start)


def _overlap_of(dm, local):
    """rows (one per local cell) -> the same with the overlap cells' rows
    replaced by those their owners hold, sent along DMPlex's point SF."""
    point_sf, chart, own, point = dm.getPointSF(), dm.getChart()[1], local.own, local.point

    def exchange(rows):
        by_point = numpy.zeros((chart, rows.shape[1]), dtype=rows.dtype)
        by_point[point[own]] = rows[own]
        received = _bcast(point_sf, by_point, by_point.copy())
        rows = rows.copy()
        rows[~own] = received[point[~own]]
        return rows

    return exchange


def _rank_geometry(comm, local, names, exchange):
    """(this rank's FiniteVolumeGeometry, faces cut, halo cells per rank) from
    its _LocalCells ``local``; ``exchange`` (_overlap_of) gives the overlap's
    rows from their owners."""
    own, cells, slots, pairs, lone = local.own, local.cells, local.slots, local.pairs, local.lone

    # Own cells numbered after lower ranks' by reverse Cuthill-McKee among themselves.
    mine = numpy.flatnonzero(own)
    compact = numpy.full(len(own), -1, dtype=numpy.int64)
    compact[mine] = numpy.arange(len(mine))
    inside = own[cells[pairs]].all(axis=1)
    position = locality_order(compact[cells[pairs[inside]]], numpy.zeros(len(mine), dtype=numpy.int64))
    cell_ranges = numpy.concatenate(([0], numpy.cumsum(comm.allgather(len(mine)))))
    number = numpy.full(len(own), -1, dtype=numpy.int64)
    number[mine] = cell_ranges[comm.rank] + position
    number = exchange(number[:, None])[:, 0]

    # Faces touching own cells, cell 0 the one of lower number; a rank owns those whose cell 0 it owns.
    pairs = oriented(pairs, cells, number)
    pairs = pairs[own[cells[pairs]].any(axis=1)]
    pairs = pairs[numpy.lexsort((number[cells[pairs[:, 1]]], number[cells[pairs[:, 0]]]))]
    owned = own[cells[pairs[:, 0]]]
    face_ranges = numpy.concatenate(([0], numpy.cumsum(comm.allgather(int(owned.sum())))))
    face_ids = numpy.full(len(pairs), -1, dtype=numpy.int64)
    face_ids[owned] = face_ranges[comm.rank] + numpy.arange(int(owned.sum()))
    # A face a neighbour owns takes its number from there: per cell, the number of each facet's face.
    by_facet = numpy.full(local.tags.shape, -1, dtype=numpy.int64)
    by_facet[cells[pairs[owned, 0]], slots[pairs[owned, 0]]] = face_ids[owned]
    by_facet = exchange(by_facet)
    face_ids[~owned] = by_facet[cells[pairs[~owned, 0]], slots[pairs[~owned, 0]]]
    if (face_ids < 0).any():
        raise RuntimeError("a face between two ranks was numbered by neither: the overlap misses a cell")

    # Boundary faces of own cells, with the groups their records carry.
    lone = lone[own[cells[lone]]]
    tags = local.tags[cells[lone], slots[lone]]
    if (tags < 0).any():
        raise RuntimeError("a face inside the mesh has no second cell on this rank: the overlap misses a cell")
    face_areas, normals, offsets, distances, weights, reach = face_arrays(pairs, cells, local.centroids, local.vectors,
                                                                   local.areas, local.centres)
    b_areas, b_normals, b_distances, b_centres = boundary_arrays(lone, cells, local.centroids, local.vectors,
                                                                 local.areas, local.centres)
    in_order = mine[numpy.argsort(position)]
    counts = tag_counts(numpy.zeros(len(tags), dtype=numpy.int64), tags, 1, names)
    geometry = FiniteVolumeGeometry(
        cell_ranges=cell_ranges, face_ranges=face_ranges, rank=comm.rank, volumes=local.volumes[in_order],
        centroids=local.centroids[in_order], cell_numbers=local.numbers[in_order], face_ids=face_ids,
        face_cells=number[cells[pairs]], face_areas=face_areas, face_normals=normals, face_distances=distances,
        face_offsets=offsets, face_centre_offsets=reach, face_weights=weights, boundary_cells=number[cells[lone]],
        boundary_areas=b_areas,
        boundary_normals=b_normals, boundary_distances=b_distances, boundary_centroids=b_centres,
        boundary_tags=tags, boundary_names=names,
        boundary_counts=numpy.concatenate(comm.allgather(counts)).reshape(comm.size, -1))
    across = pairs[~own[cells[pairs]].all(axis=1)]  # every face here touches an own cell
    halo = int(numpy.unique(cells[across][~own[cells[across]]]).size)
    return geometry, comm.allreduce(int((owned & ~own[cells[pairs[:, 1]]]).sum())), comm.allgather(halo)
