"""The FiniteVolumeGeometry of an unstructured mesh: triangles and
quadrilaterals, tetrahedra, hexahedra, prisms and pyramids, mixed, with
named boundary groups (gmsh physical groups through meshio).

Cell volumes and centroids, face areas, unit normals and centroids are
integrals over the cell mapped from its reference cell, by quadrature, for
every cell type the same way: basix (the FEniCS project's reference cells)
gives the reference geometry, the sub-entities, the geometry's basis
functions and the quadrature. Oyarzún 2015 (chapter 1) writes the
operators for any polyhedral cells; this module gives them such cells.

``mesh_geometry`` gives the whole mesh on one rank (``cell_numbers`` is the
mesh's cell order); ``rank_geometry`` cuts it into the parts of ranks, each
rank's cells numbered together as PETSc numbers rows; ``distribute`` reads a
mesh file once on rank 0, partitions it (METIS or coordinate bisection),
orders each part for locality and sends each rank its part. Cells must be
positively oriented (gmsh's convention); faces must be shared whole by their
two cells (a hanging face is an error naming it).
"""

from dataclasses import dataclass

import basix
import numpy

from .geometry import FiniteVolumeGeometry

# meshio's cell type -> (basix cell, geometry degree, meshio's nodes in basix's order). basix numbers the
# nodes of a degree-2 cell vertices first, then edge midpoints in its edge order, then face and cell centres.
CELLS = {
    "triangle": (basix.CellType.triangle, 1, [0, 1, 2]),
    "quad": (basix.CellType.quadrilateral, 1, [0, 1, 3, 2]),
    "tetra": (basix.CellType.tetrahedron, 1, [0, 1, 2, 3]),
    "hexahedron": (basix.CellType.hexahedron, 1, [0, 1, 3, 2, 4, 5, 7, 6]),
    "wedge": (basix.CellType.prism, 1, [0, 1, 2, 3, 4, 5]),
    "pyramid": (basix.CellType.pyramid, 1, [0, 1, 3, 2, 4]),
    "triangle6": (basix.CellType.triangle, 2, [0, 1, 2, 4, 5, 3]),
    "quad9": (basix.CellType.quadrilateral, 2, [0, 1, 3, 2, 4, 7, 5, 6, 8]),
    "tetra10": (basix.CellType.tetrahedron, 2, [0, 1, 2, 3, 9, 8, 5, 7, 6, 4]),
}
# Boundary facet blocks and how many of their first nodes are corners.
FACET_CORNERS = {"line": 2, "line3": 2, "triangle": 3, "triangle6": 3, "quad": 4, "quad8": 4, "quad9": 4}
_DIMENSION = {"vertex": 0, "line": 1, "line3": 1, "triangle": 2, "triangle6": 2, "quad": 2, "quad8": 2, "quad9": 2}
_QUADRATURE_DEGREE = {1: 4, 2: 8}  # exact for trilinear volumes; ample for quadratic maps
_AFFINE = (basix.CellType.triangle, basix.CellType.tetrahedron)  # degree 1: one point integrates their maps exactly


def _quadrature_degree(cell, degree):
    return 1 if degree == 1 and cell in _AFFINE else _QUADRATURE_DEGREE[degree]


class MeshError(ValueError):
    """A mesh the flow driver cannot run on, with what is wrong and where."""


class _CellMaps:
    """The geometry map of one cell type: basis functions and their
    derivatives at the cell's and at each facet's quadrature points."""

    def __init__(self, cell, degree):
        self.cell = cell
        self.element = basix.create_element(basix.ElementFamily.P, cell, degree, basix.LagrangeVariant.equispaced)
        points, self.weights = basix.make_quadrature(cell, _quadrature_degree(cell, degree))
        self.table = self.element.tabulate(1, points)[..., 0]  # (1 + tdim, q, vertices)
        reference = basix.geometry(cell)
        topology = basix.topology(cell)
        self.tdim = len(topology) - 1
        self.facets = topology[self.tdim - 1]
        self.facet_maps = []
        for f, facet in enumerate(self.facets):
            kind = basix.cell.sub_entity_type(cell, self.tdim - 1, f)
            fpoints, fweights = basix.make_quadrature(kind, _quadrature_degree(cell, degree))
            corner = reference[facet[0]]
            edges = numpy.stack([reference[facet[k]] - corner for k in range(1, self.tdim)], axis=1)  # (tdim, tdim-1)
            inside = corner + fpoints @ edges.T
            outward = basix.cell.facet_outward_normals(cell)[f]
            sign = numpy.sign(_normal_of(edges[None, None])[0, 0] @ outward)
            self.facet_maps.append((self.element.tabulate(1, inside)[..., 0], edges, fweights, sign))


def _normal_of(tangents):
    """The (unnormalised) normal of the facet with ``tangents`` (..., d, d - 1): its
    area element times a unit normal (the cross product in 3D, a turn in 2D)."""
    if tangents.shape[-2] == 2:
        t = tangents[..., 0]
        return numpy.stack([t[..., 1], -t[..., 0]], axis=-1)
    return numpy.cross(tangents[..., 0], tangents[..., 1])


def _jacobians(table, X):
    """x(q) (c, q, d) and J(q) (c, q, d, tdim) of cells with vertices X (c, v, d),
    as one matrix product per cell block (BLAS, not einsum's loops)."""
    tdim, q, v = table[1:].shape
    both = table.transpose(1, 0, 2).reshape(q * (tdim + 1), v) @ X  # (c, q * (1 + tdim), d)
    both = both.reshape(len(X), q, tdim + 1, X.shape[2])
    return both[:, :, 0], both[:, :, 1:].transpose(0, 1, 3, 2)


def _block_geometry(maps, X, first):
    """Volumes, centroids and, per local facet, (vector areas, areas, centroids) of cells X (c, v, d)."""
    x, J = _jacobians(maps.table, X)
    det = numpy.linalg.det(J)
    bad = (det <= 0).any(axis=1)
    if bad.any():
        cell = int(numpy.flatnonzero(bad)[0])
        raise MeshError(f"cell {first + cell} ({maps.cell.name}, vertices {X[cell].tolist()}) is inverted or "
                        f"degenerate: its volume map's Jacobian determinant reaches {det[cell].min():.3g} "
                        f"(cells must be positively oriented, as gmsh makes them)")
    dv = det * maps.weights
    volumes = dv.sum(axis=1)
    centroids = (dv[:, None, :] @ x)[:, 0] / volumes[:, None]
    facets = []
    for table, edges, weights, sign in maps.facet_maps:
        xf, Jf = _jacobians(table, X)
        da = sign * _normal_of(Jf @ edges) * weights[None, :, None]  # outward normal times area element
        size = numpy.linalg.norm(da, axis=2)
        # A face that is not flat (a bilinear quadrilateral) has the magnitude of its vector area as its
        # area, the direction as its normal: what keeps every cell closed (sum of a n over its faces = 0).
        vector = da.sum(axis=1)
        centre = (size[:, None, :] @ xf)[:, 0] / size.sum(axis=1)[:, None]
        facets.append((vector, numpy.linalg.norm(vector, axis=1), centre))
    return volumes, centroids, facets


def mesh_geometry(mesh, ungrouped=None):
    """The FiniteVolumeGeometry of a meshio mesh on one rank.

    Cells are the blocks of the mesh's highest dimension, in the mesh's
    order; boundary groups are the lower-dimensional blocks tagged
    "gmsh:physical", named by the mesh's field_data. Every boundary face
    must lie in a group, unless ``ungrouped`` names the group (tag 0) of
    those in none (for a matrix of the mesh, whose boundary plays no part).
    """
    tdim = max(_dimension(block.type) for block in mesh.cells)
    blocks = [block for block in mesh.cells if _dimension(block.type) == tdim]
    points = numpy.asarray(mesh.points, dtype=float)
    if tdim == 2 and points.shape[1] == 3:
        if not numpy.allclose(points[:, 2], 0.0):
            raise MeshError("a surface mesh in 3D space: 2D meshes must lie in the plane z = 0")
        points = points[:, :2]
    volumes, centroids, keys, owners, vectors, areas, face_centres = [], [], [], [], [], [], []
    first = 0
    for block in blocks:
        if block.type not in CELLS:
            raise MeshError(f"cells of type {block.type} are not supported (supported: {', '.join(CELLS)})")
        cell, degree, order = CELLS[block.type]
        vertices = numpy.asarray(block.data)[:, order]
        maps = _CellMaps(cell, degree)
        v, c, facets = _block_geometry(maps, points[vertices], first)
        volumes.append(v)
        centroids.append(c)
        for local, (vector, area, centre) in zip(maps.facets, facets, strict=True):
            keys.append(_facet_keys(vertices[:, local]))
            owners.append(first + numpy.arange(len(vertices)))
            vectors.append(vector)
            areas.append(area)
            face_centres.append(centre)
        first += len(vertices)
    volumes, centroids = numpy.concatenate(volumes), numpy.concatenate(centroids)
    keys, owners = numpy.concatenate(keys), numpy.concatenate(owners)
    vectors, areas, face_centres = numpy.concatenate(vectors), numpy.concatenate(areas), numpy.concatenate(face_centres)
    inverse, counts, firsts = _group_rows(keys)
    if (counts > 2).any():
        key = keys[firsts[numpy.flatnonzero(counts > 2)[0]]]
        raise MeshError(f"the face with vertices {key[key >= 0].tolist()} belongs to more than two cells")
    # Interior faces: the first cell to list the face is its cell 0 (the normal leaves it).
    order = numpy.argsort(inverse, kind="stable")
    paired = counts[inverse[order]] == 2
    pairs = order[paired].reshape(-1, 2)
    normals = vectors[pairs[:, 0]] / areas[pairs[:, 0], None]
    face_cells = owners[pairs]
    between = centroids[face_cells[:, 1]] - centroids[face_cells[:, 0]]
    # Boundary faces, with their groups.
    lone = order[~paired]
    tags, names = _boundary_groups(mesh, tdim, keys[lone], points, ungrouped)
    if (tags < 0).any():
        _refuse_untagged(keys[lone], face_centres[lone], vectors[lone] / areas[lone, None], areas[lone], owners[lone],
                         tags < 0, points)
    boundary_normals = vectors[lone] / areas[lone, None]
    to_face = face_centres[lone] - centroids[owners[lone]]
    m, f = len(volumes), len(pairs)
    return FiniteVolumeGeometry(
        cell_ranges=numpy.array([0, m]), face_ranges=numpy.array([0, f]), rank=0, volumes=volumes,
        centroids=centroids, cell_numbers=numpy.arange(m), face_ids=numpy.arange(f), face_cells=face_cells,
        face_areas=areas[pairs[:, 0]], face_normals=normals,
        face_distances=numpy.abs(numpy.einsum("ij,ij->i", normals, between)), face_offsets=between,
        boundary_cells=owners[lone], boundary_areas=areas[lone], boundary_normals=boundary_normals,
        boundary_distances=numpy.abs(numpy.einsum("ij,ij->i", boundary_normals, to_face)),
        boundary_centroids=face_centres[lone], boundary_tags=tags, boundary_names=names,
        boundary_counts=_tag_counts(numpy.zeros(len(tags), dtype=numpy.int64), tags, 1, names))


def _dimension(cell_type):
    return _DIMENSION.get(cell_type, 3)


def _group_rows(keys):
    """Equal rows of ``keys`` (faces, 4 vertex numbers >= -1): for each row its
    group, and per group its size and first row. Two int64 sort keys of two
    vertices each, not numpy.unique's sort of rows, which is several times slower."""
    shifted = keys + 1
    base = int(shifted.max(initial=0)) + 1
    high, low = shifted[:, 0] * base + shifted[:, 1], shifted[:, 2] * base + shifted[:, 3]
    order = numpy.lexsort((low, high))
    high, low = high[order], low[order]
    starts = numpy.ones(len(order), dtype=bool)
    starts[1:] = (high[1:] != high[:-1]) | (low[1:] != low[:-1])
    group = numpy.cumsum(starts) - 1
    inverse = numpy.empty_like(group)
    inverse[order] = group
    return inverse, numpy.bincount(group), order[starts]


def _facet_keys(vertices):
    """Rows of sorted vertex numbers, padded with -1 to 4: one key per face, whichever cell lists it."""
    keys = numpy.full((len(vertices), 4), -1, dtype=numpy.int64)
    keys[:, :vertices.shape[1]] = numpy.sort(vertices, axis=1)
    return keys


def _boundary_groups(mesh, tdim, lone_keys, points, ungrouped):
    """The group tag of each boundary face (rows of ``lone_keys``) and {name: tag}."""
    tagged_keys, tagged = [], []
    for k, block in enumerate(mesh.cells):
        if block.type in FACET_CORNERS and _dimension(block.type) == tdim - 1:
            physical = mesh.cell_data.get("gmsh:physical")
            if physical is None and ungrouped is not None:
                continue
            if physical is None:
                raise MeshError("the mesh's boundary faces carry no groups (gmsh physical groups, "
                                "cell data 'gmsh:physical')")
            tagged_keys.append(_facet_keys(numpy.asarray(block.data)[:, :FACET_CORNERS[block.type]]))
            tagged.append(numpy.asarray(physical[k], dtype=numpy.int64))
    names = {name: int(value[0]) for name, value in mesh.field_data.items() if int(value[1]) == tdim - 1}
    tags = numpy.full(len(lone_keys), -1, dtype=numpy.int64)
    if tagged_keys:  # the tagged faces matched to the boundary faces as the cells' faces are matched
        group, _, _ = _group_rows(numpy.concatenate([lone_keys] + tagged_keys))
        tag_of_group = numpy.full(int(group.max()) + 1, -1, dtype=numpy.int64)
        tag_of_group[group[len(lone_keys):]] = numpy.concatenate(tagged)
        tags = tag_of_group[group[:len(lone_keys)]]
    if ungrouped is not None and (tags < 0).any():
        tags[tags < 0] = 0
        names = {ungrouped: 0, **{name: tag for name, tag in names.items() if tag != 0}}
    unnamed = sorted(set(tags.tolist()) - set(names.values()))
    names.update({f"group{tag}": tag for tag in unnamed})
    return tags, names


def _refuse_untagged(keys, centres, normals, areas, cells, untagged, points):
    """A MeshError for boundary faces in no group: where another boundary
    face lies on such a face's plane, inside it, facing it, the mesh is
    non-conforming (a hanging face); else the face lacks a group."""
    from scipy.spatial import cKDTree

    tdim = centres.shape[1]
    size = areas ** (1.0 / (tdim - 1))
    candidates = numpy.flatnonzero(untagged)
    tree = cKDTree(centres)
    for f in candidates:
        for g in tree.query_ball_point(centres[f], size[f]):
            facing = normals[f] @ normals[g] < -0.99
            on_plane = abs(normals[f] @ (centres[g] - centres[f])) < 1e-9 * size[f]
            if g != f and facing and on_plane and areas[g] < areas[f] * (1 - 1e-9):
                key = keys[f]
                raise MeshError(f"the mesh is not conforming: the face with vertices {key[key >= 0].tolist()} of "
                                f"cell {cells[f]} meets the smaller face with vertices "
                                f"{keys[g][keys[g] >= 0].tolist()} of cell {cells[g]} (a hanging node); the flow "
                                "driver needs faces shared whole by their two cells")
    key = keys[candidates[0]]
    corners = points[key[key >= 0]].tolist()
    raise MeshError(f"the boundary face with vertices {key[key >= 0].tolist()} (at {corners}) is in no "
                    "boundary group: every boundary face needs one")


def graph_partition(whole, parts):
    """A part (0 .. parts-1) for each cell of the one-rank geometry ``whole``:
    METIS (Karypis and Kumar, "A fast and high quality multilevel scheme for
    partitioning irregular graphs", 1998, through pymetis) on the graph of
    cells joined by faces, fewest faces cut for parts of equal size."""
    if parts == 1:
        return numpy.zeros(whole.num_cells, dtype=numpy.int64)
    import pymetis

    graph = _cell_graph(whole)
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


def partition_quality(whole, owner):
    """(faces cut, halo cells per part): the faces whose cells lie on two
    parts, and for each part the cells of other parts next to its own."""
    a, b = owner[whole.face_cells[:, 0]], owner[whole.face_cells[:, 1]]
    cut = a != b
    parts = int(owner.max(initial=0)) + 1
    halo = [numpy.unique(numpy.concatenate((whole.face_cells[cut & (a == p), 1], whole.face_cells[cut & (b == p), 0]))).size
            for p in range(parts)]
    return int(cut.sum()), halo


def locality_order(whole, owner):
    """A position for each cell inside its part: reverse Cuthill-McKee on the
    part's cell graph (Cuthill and McKee 1969), so that a row's columns lie
    near it and a SpMV reads its vector in nearby blocks."""
    import scipy.sparse.csgraph

    graph = _cell_graph(whole)
    position = numpy.empty(whole.num_cells, dtype=numpy.int64)
    for part in range(int(owner.max(initial=0)) + 1):
        cells = numpy.flatnonzero(owner == part)
        order = scipy.sparse.csgraph.reverse_cuthill_mckee(graph[cells][:, cells].tocsr(), symmetric_mode=True)
        position[cells[order]] = numpy.arange(len(cells))
    return position


def _cell_graph(whole):
    """The cells joined by faces, as a symmetric scipy CSR adjacency matrix."""
    import scipy.sparse

    i, j = whole.face_cells[:, 0], whole.face_cells[:, 1]
    n = whole.num_cells
    return scipy.sparse.csr_matrix((numpy.ones(2 * len(i)), (numpy.concatenate((i, j)), numpy.concatenate((j, i)))),
                                   shape=(n, n))


def rank_geometry(whole, owner, rank, position=None):
    """The part of the one-rank geometry ``whole`` that ``rank`` holds, for
    cells split by ``owner`` (a rank per cell): its cells (numbered after those
    of lower ranks, by ``position`` inside the rank, e.g. locality_order's, or
    in the mesh's order), the faces touching them (a face belongs to the rank
    of its first cell) and their boundary faces."""
    ranks = int(owner.max(initial=0)) + 1 if len(owner) else 1
    cell_order = numpy.lexsort((numpy.arange(len(owner)) if position is None else position, owner))
    number = numpy.empty_like(cell_order)
    number[cell_order] = numpy.arange(len(owner))  # mesh cell -> PETSc cell number
    cell_ranges = numpy.concatenate(([0], numpy.cumsum(numpy.bincount(owner, minlength=ranks))))
    face_owner = owner[whole.face_cells[:, 0]]
    face_order = numpy.argsort(face_owner, kind="stable")
    face_number = numpy.empty_like(face_order)
    face_number[face_order] = numpy.arange(len(face_order))
    face_ranges = numpy.concatenate(([0], numpy.cumsum(numpy.bincount(face_owner, minlength=ranks))))
    mine = cell_order[cell_ranges[rank]:cell_ranges[rank + 1]]  # mesh cells of this rank, in PETSc order
    touching = numpy.flatnonzero((owner[whole.face_cells] == rank).any(axis=1))
    touching = touching[numpy.argsort(face_number[touching], kind="stable")]
    walls = numpy.flatnonzero(owner[whole.boundary_cells] == rank)
    return FiniteVolumeGeometry(
        cell_ranges=cell_ranges, face_ranges=face_ranges, rank=rank, volumes=whole.volumes[mine],
        centroids=whole.centroids[mine], cell_numbers=whole.cell_numbers[mine], face_ids=face_number[touching],
        face_cells=number[whole.face_cells[touching]], face_areas=whole.face_areas[touching],
        face_normals=whole.face_normals[touching], face_distances=whole.face_distances[touching],
        face_offsets=whole.face_offsets[touching],
        boundary_cells=number[whole.boundary_cells[walls]], boundary_areas=whole.boundary_areas[walls],
        boundary_normals=whole.boundary_normals[walls], boundary_distances=whole.boundary_distances[walls],
        boundary_centroids=whole.boundary_centroids[walls], boundary_tags=whole.boundary_tags[walls],
        boundary_names=whole.boundary_names,
        boundary_counts=_tag_counts(owner[whole.boundary_cells], whole.boundary_tags, ranks, whole.boundary_names))


def _tag_counts(ranks_of_faces, tags, ranks, names):
    """(ranks, T): the boundary faces of each tag on each rank."""
    width = max(max(names.values(), default=-1), int(tags.max(initial=-1))) + 1
    counts = numpy.zeros((ranks, width), dtype=numpy.int64)
    numpy.add.at(counts, (ranks_of_faces, tags), 1)
    return counts


PARTITIONERS = {"metis": graph_partition,
                "bisection": lambda whole, parts: coordinate_bisection(whole.centroids, parts)}


def read_mesh(path):
    """The mesh at ``path`` through meshio, or a MeshError naming the file and what is wrong."""
    import os

    import meshio

    try:
        return meshio.read(path)
    except Exception as exc:  # noqa: BLE001 (meshio raises many kinds)
        raise MeshError(f"cannot read the mesh {os.path.abspath(path)}: {type(exc).__name__}: {exc}") from exc


@dataclass(eq=False)
class DistributedMesh:
    """A mesh read once and cut among the ranks of a communicator: ``geometry``
    is this rank's part; ``mesh`` (meshio) and ``whole`` (its one-rank
    geometry) are on rank 0 only (None elsewhere), for output; ``faces_cut``
    and ``halo`` (halo cells per rank) say what the partition costs;
    ``seconds``: {"read": ..., "geometry": ..., "partition": ...} on rank 0."""

    geometry: FiniteVolumeGeometry
    mesh: object
    whole: FiniteVolumeGeometry
    faces_cut: int
    halo: list
    seconds: dict


def distribute(path, comm, partitioner="metis"):
    """Rank 0 reads the mesh at ``path`` (meshio), works out its geometry, cuts
    its cells among the ranks of ``comm`` (an mpi4py communicator) with
    ``partitioner`` (PARTITIONERS), numbers each part's cells by
    locality_order and sends each rank its part. A mesh that cannot be read
    or used is a MeshError on every rank. Collective."""
    import time

    parts, report, problem = None, None, ""
    if comm.rank == 0:
        try:
            start = time.perf_counter()
            mesh = read_mesh(path)
            read = time.perf_counter()
            whole = mesh_geometry(mesh)
            measured = time.perf_counter()
            owner = PARTITIONERS[partitioner](whole, comm.size)
            position = locality_order(whole, owner)
            parts = [rank_geometry(whole, owner, rank, position) for rank in range(comm.size)]
            cut, halo = partition_quality(whole, owner)
            seconds = {"read": read - start, "geometry": measured - read, "partition": time.perf_counter() - measured}
            report = (cut, halo, seconds)
        except MeshError as exc:
            problem = str(exc)
    problem = comm.bcast(problem, root=0)
    if problem:
        raise MeshError(problem)
    geometry = comm.scatter(parts, root=0)
    cut, halo, seconds = comm.bcast(report, root=0)
    if comm.rank == 0:
        return DistributedMesh(geometry, mesh, whole, cut, halo, seconds)
    return DistributedMesh(geometry, None, None, cut, halo, seconds)
