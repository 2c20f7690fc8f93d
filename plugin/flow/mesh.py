"""The FiniteVolumeGeometry of an unstructured mesh: triangles and
quadrilaterals, tetrahedra, hexahedra, prisms and pyramids, mixed, with
named boundary groups (gmsh physical groups through meshio).

Cell volumes and centroids, face areas, unit normals and centroids are
integrals over the cell mapped from its reference cell, by quadrature, for
every cell type the same way: basix (the FEniCS project's reference cells)
gives the reference geometry, the sub-entities, the geometry's basis
functions and the quadrature. Oyarzún 2015 (chapter 1) writes the
operators for any polyhedral cells; this module gives them such cells.

``mesh_topology`` finds a mesh's faces and boundary groups without any
geometry; ``cell_geometry`` measures cells of any type; ``mesh_geometry``
gives the whole mesh on one rank (``cell_numbers`` is the mesh's cell
order); ``rank_geometry`` cuts a one-rank geometry into the parts of ranks,
each rank's cells numbered together as PETSc numbers rows (for tests and
small meshes: plugin.flow.distribution reads a file once and distributes it
through DMPlex). Cells must be positively oriented (gmsh's convention);
faces must be shared whole by their two cells (a hanging face is an error
naming it).
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
    "wedge18": (basix.CellType.prism, 2, list(range(18))),  # gmsh's edges and quad faces are basix's, in order
}
# Boundary facet blocks and how many of their first nodes are corners.
# Two points closer than this (relative to the mesh's or a face's size) are one.
_SAME_POINT = 1e-6
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


def _block_geometry(maps, X, numbers):
    """Volumes, centroids and, per local facet, (vector areas, areas, centroids)
    of cells X (c, v, d), whose numbers in the mesh (for errors) are ``numbers``."""
    x, J = _jacobians(maps.table, X)
    det = numpy.linalg.det(J)
    bad = (det <= 0).any(axis=1)
    if bad.any():
        cell = int(numpy.flatnonzero(bad)[0])
        raise MeshError(f"cell {numbers[cell]} ({maps.cell.name}, vertices {X[cell].tolist()}) is inverted or "
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
        area = numpy.linalg.norm(vector, axis=1)
        if not (area > 0).all():
            cell = int(numpy.flatnonzero(~(area > 0))[0])
            raise MeshError(f"cell {numbers[cell]} ({maps.cell.name}, vertices {X[cell].tolist()}) has a facet of "
                            "zero area (a node repeated among its corners?)")
        centre = (size[:, None, :] @ xf)[:, 0] / size.sum(axis=1)[:, None]
        facets.append((vector, area, centre))
    return volumes, centroids, facets


def mesh_cells(mesh):
    """(tdim, points (N, d), blocks): the cells of the mesh's highest dimension
    as blocks (meshio type, node numbers (c, n) in basix's node order), in the
    mesh's order; a 2D mesh's points in the plane."""
    if not any(len(block.data) for block in mesh.cells):
        raise MeshError("the mesh has no cells")
    tdim = max(_dimension(block.type) for block in mesh.cells if len(block.data))
    points = numpy.asarray(mesh.points, dtype=float)
    finite = numpy.isfinite(points).all(axis=1)
    if not finite.all():
        node = int(numpy.flatnonzero(~finite)[0])
        raise MeshError(f"node {node} has the coordinates {points[node].tolist()}: every node must be finite")
    if tdim == 2 and points.shape[1] == 3:
        if not numpy.allclose(points[:, 2], 0.0):
            raise MeshError("a surface mesh in 3D space: 2D meshes must lie in the plane z = 0")
        points = points[:, :2]
    blocks = []
    for block in mesh.cells:
        if _dimension(block.type) != tdim:
            continue
        if block.type not in CELLS:
            raise MeshError(f"cells of type {block.type} are not supported (supported: {', '.join(CELLS)})")
        blocks.append((block.type, numpy.asarray(block.data)[:, CELLS[block.type][2]]))
    return tdim, points, blocks


def facet_records(blocks, identify=None):
    """Every local facet of every cell of ``blocks`` [(meshio type, nodes in
    basix's order)]: keys (R, 4) (its sorted corner numbers, through
    ``identify`` where given: periodic_identity's), its cell (R,) (numbered
    through the blocks) and its local facet number (R,) (basix's)."""
    keys, cells, slots = [], [], []
    first = 0
    for kind, nodes in blocks:
        cell, _, _ = CELLS[kind]
        corners = nodes if identify is None else identify[nodes]
        for slot, local in enumerate(basix.topology(cell)[-2]):
            keys.append(_facet_keys(corners[:, local]))
            cells.append(first + numpy.arange(len(nodes)))
            slots.append(numpy.full(len(nodes), slot))
        first += len(nodes)
    return numpy.concatenate(keys), numpy.concatenate(cells), numpy.concatenate(slots)


def match_facets(keys):
    """(pairs (F, 2), lone (B,)): the records of ``keys`` two cells share (an
    interior face) and those of one cell (a boundary face). A face of more
    than two cells is a MeshError naming it."""
    inverse, counts, firsts = _group_rows(keys)
    if (counts > 2).any():
        key = keys[firsts[numpy.flatnonzero(counts > 2)[0]]]
        raise MeshError(f"the face with vertices {key[key >= 0].tolist()} belongs to more than two cells")
    order = numpy.argsort(inverse, kind="stable")
    paired = counts[inverse[order]] == 2
    return order[paired].reshape(-1, 2), order[~paired]


def cell_geometry(blocks, numbers=None):
    """Volumes and centroids of the cells of ``blocks`` [(meshio type, node
    coordinates (c, n, d) in basix's order)], and of each facet record (in
    facet_records' order) its outward vector area, area and centroid. An
    inverted cell is a MeshError naming it by ``numbers`` (the cells' numbers
    in the mesh file; by default their position in the blocks)."""
    volumes, centroids, vectors, areas, centres = [], [], [], [], []
    first = 0
    for kind, X in blocks:
        cell, degree, _ = CELLS[kind]
        v, c, facets = _block_geometry(_CellMaps(cell, degree), X,
                                       numpy.arange(first, first + len(X)) if numbers is None else numbers[first:])
        volumes.append(v)
        centroids.append(c)
        for vector, area, centre in facets:
            vectors.append(vector)
            areas.append(area)
            centres.append(centre)
        first += len(X)
    return tuple(numpy.concatenate(a) for a in (volumes, centroids, vectors, areas, centres))


def oriented(pairs, cells, number):
    """``pairs`` of facet records with the record of the cell of lower
    ``number`` first: that cell is the face's cell 0, its normal leaves it."""
    swap = number[cells[pairs[:, 0]]] > number[cells[pairs[:, 1]]]
    return numpy.where(swap[:, None], pairs[:, ::-1], pairs)


def face_arrays(pairs, cells, centroids, vectors, areas, centres):
    """(areas, unit normals, offsets x_1 - x_0, distances |n . offset|, cell 0's
    weights n . (x_f - x_0) / distance in [0, 1], centre offsets x_f - x_0) of
    the interior faces ``pairs`` (oriented), from the facet records of cell 0.
    Across a periodic pair of groups the face's centroid seen from cell 1 is
    a period away from cell 0's: x_1 is then cell 1's image next to cell 0."""
    normals = vectors[pairs[:, 0]] / areas[pairs[:, 0], None]
    first = centroids[cells[pairs[:, 0]]]
    period = centres[pairs[:, 0]] - centres[pairs[:, 1]]  # rounding on ordinary faces: made exactly 0
    period[numpy.linalg.norm(period, axis=1) <= _SAME_POINT * numpy.sqrt(areas[pairs[:, 0]])] = 0.0
    between = centroids[cells[pairs[:, 1]]] + period - first
    distances = numpy.abs(numpy.einsum("ij,ij->i", normals, between))
    reach = centres[pairs[:, 0]] - first
    weights = numpy.clip(numpy.einsum("ij,ij->i", normals, reach) / distances, 0.0, 1.0)
    return areas[pairs[:, 0]], normals, between, distances, weights, reach


def boundary_arrays(lone, cells, centroids, vectors, areas, centres):
    """(areas, unit outward normals, distances from the cell centroid along
    the normal, face centroids) of the boundary facet records ``lone``."""
    normals = vectors[lone] / areas[lone, None]
    to_face = centres[lone] - centroids[cells[lone]]
    return areas[lone], normals, numpy.abs(numpy.einsum("ij,ij->i", normals, to_face)), centres[lone]


@dataclass(eq=False)
class MeshTopology:
    """What a mesh's cells and groups say before any geometry: ``tdim``,
    ``points``, ``blocks`` (mesh_cells); every facet record (facet_records:
    ``keys``, ``cells``, ``slots``); the interior faces ``pairs`` (records,
    cell 0 of lower number first) and boundary faces ``lone`` (records) with
    their group ``tags``; ``names`` {group name: tag}; ``identify`` each
    node's number or, on the second group of a periodic pair, its image's on
    the first (periodic_identity): the corners the cells' faces match by.
    """

    tdim: int
    points: numpy.ndarray
    blocks: list
    keys: numpy.ndarray
    cells: numpy.ndarray
    slots: numpy.ndarray
    pairs: numpy.ndarray
    lone: numpy.ndarray
    tags: numpy.ndarray
    names: dict
    identify: numpy.ndarray

    @property
    def num_cells(self):
        return sum(len(nodes) for _, nodes in self.blocks)

    @property
    def face_cells(self):
        return self.cells[self.pairs]

    def node_coordinates(self):
        """The blocks as cell_geometry takes them: (meshio type, node coordinates)."""
        return [(kind, self.points[nodes]) for kind, nodes in self.blocks]

    def facet_tags(self, width):
        """(cells, width): the group tag of each cell's local facets (basix's order), -1 where none."""
        tags = numpy.full((self.num_cells, width), -1, dtype=numpy.int64)
        tags[self.cells[self.lone], self.slots[self.lone]] = self.tags
        return tags


def mesh_topology(mesh, ungrouped=None, periodic=()):
    """The MeshTopology of a meshio mesh. A boundary face in no group is a
    MeshError naming it (a hanging face, where the mesh is not conforming),
    unless ``ungrouped`` names the group (tag 0) of those in none.
    ``periodic``: pairs of group names (a, b), b a translation of a, whose
    faces become interior faces between the cells on either side
    (periodic_identity); the groups are then no longer boundary groups."""
    tdim, points, blocks = mesh_cells(mesh)
    identify = periodic_identity(mesh, tdim, points, periodic)
    _refuse_cells_across_a_period(blocks, identify, periodic)
    keys, cells, slots = facet_records(blocks, identify)
    pairs, lone = match_facets(keys)
    pairs = oriented(pairs, cells, numpy.arange(int(cells.max(initial=-1)) + 1))
    tags, names = _boundary_groups(mesh, tdim, keys[lone], points, ungrouped, identify,
                                   {name for pair in periodic for name in pair})
    topology = MeshTopology(tdim, points, blocks, keys, cells, slots, pairs, lone, tags, names, identify)
    if (tags < 0).any():
        _, _, vectors, areas, centres = cell_geometry(topology.node_coordinates())
        _refuse_untagged(keys[lone], centres[lone], vectors[lone] / areas[lone, None], areas[lone], cells[lone],
                         tags < 0, points)
    return topology


def mesh_geometry(mesh, ungrouped=None, periodic=()):
    """The FiniteVolumeGeometry of a meshio mesh on one rank.

    Cells are the blocks of the mesh's highest dimension, in the mesh's
    order; boundary groups are the lower-dimensional blocks tagged
    "gmsh:physical", named by the mesh's field_data. Every boundary face
    must lie in a group, unless ``ungrouped`` names the group (tag 0) of
    those in none (for a matrix of the mesh, whose boundary plays no part).
    A face's cell 0 is its cell of lower number. ``periodic``: pairs of
    groups joined as mesh_topology says.
    """
    t = mesh_topology(mesh, ungrouped, periodic)
    volumes, centroids, vectors, areas, centres = cell_geometry(t.node_coordinates())
    face_areas, normals, offsets, distances, weights, reach = face_arrays(t.pairs, t.cells, centroids, vectors, areas,
                                                                          centres)
    b_areas, b_normals, b_distances, b_centres = boundary_arrays(t.lone, t.cells, centroids, vectors, areas, centres)
    m, f = len(volumes), len(t.pairs)
    return FiniteVolumeGeometry(
        cell_ranges=numpy.array([0, m]), face_ranges=numpy.array([0, f]), rank=0, volumes=volumes,
        centroids=centroids, cell_numbers=numpy.arange(m), face_ids=numpy.arange(f), face_cells=t.face_cells,
        face_areas=face_areas, face_normals=normals, face_distances=distances, face_offsets=offsets,
        face_centre_offsets=reach, face_weights=weights,
        boundary_cells=t.cells[t.lone], boundary_areas=b_areas, boundary_normals=b_normals,
        boundary_distances=b_distances, boundary_centroids=b_centres, boundary_tags=t.tags, boundary_names=t.names,
        boundary_counts=tag_counts(numpy.zeros(len(t.tags), dtype=numpy.int64), t.tags, 1, t.names))


def _dimension(cell_type):
    return _DIMENSION.get(cell_type, 3)


def periodic_pairs(text):
    """The pairs of boundary groups "a:b,c:d" (-flow_mesh_periodic) as ((a, b), (c, d)); () for ""."""
    pairs = tuple(tuple(part.split(":")) for part in text.split(",") if part.strip()) if text.strip() else ()
    if any(len(pair) != 2 or not all(pair) for pair in pairs):
        raise MeshError(f"-flow_mesh_periodic {text}: give pairs of boundary groups as a:b, comma-separated "
                        "(the second group of each a translation of the first)")
    return tuple((a.strip(), b.strip()) for a, b in pairs)


def periodic_identity(mesh, tdim, points, periodic):
    """(N,) each node's number, where the nodes of periodic pairs of groups
    are one: for each (a, b) of ``periodic`` (group names) the face corners
    of group b are those of group a moved by one translation (b's mean
    corner less a's), each corner of b matched to the corner of a it is the
    image of, and every node so joined numbered as the lowest of them (a
    corner on two pairs, a box's edge, joins all four). The faces of a and
    b then match as a cell's faces do. A MeshError where a group is missing
    or the two are not translations of each other."""
    identify = numpy.arange(len(points))
    if not periodic:
        return identify
    import scipy.sparse
    import scipy.sparse.csgraph
    import scipy.spatial

    names = {name: int(value[0]) for name, value in mesh.field_data.items() if int(value[1]) == tdim - 1}
    physical = mesh.cell_data.get("gmsh:physical") or [None] * len(mesh.cells)
    size = float(numpy.ptp(points, axis=0).max()) or 1.0
    joined = []
    for a, b in periodic:
        corners = []
        for name in (a, b):
            if name not in names:
                raise MeshError(f"no boundary group {name!r} to make periodic (groups: {', '.join(sorted(names))})")
            found = [numpy.asarray(block.data)[numpy.asarray(tags) == names[name], :FACET_CORNERS[block.type]].ravel()
                     for block, tags in zip(mesh.cells, physical)
                     if tags is not None and block.type in FACET_CORNERS and _dimension(block.type) == tdim - 1]
            corners.append(numpy.unique(numpy.concatenate(found or [numpy.zeros(0, dtype=numpy.int64)])))
        if corners[0].size != corners[1].size or not corners[0].size:
            raise MeshError(f"the periodic groups {a} and {b} have {corners[0].size} and {corners[1].size} face "
                            "corners: one must be the other moved by a translation")
        shift = points[corners[1]].mean(axis=0) - points[corners[0]].mean(axis=0)
        distance, image = scipy.spatial.cKDTree(points[corners[1]]).query(points[corners[0]] + shift)
        far = numpy.flatnonzero(distance > _SAME_POINT * size)
        if far.size:
            node = int(corners[0][far[0]])
            raise MeshError(f"node {node} of group {a} at {points[node].tolist()} has no image in group {b} at "
                            f"{(points[node] + shift).tolist()}: the periodic groups must be translations of "
                            "each other")
        if numpy.unique(image).size != image.size:
            raise MeshError(f"two corners of group {a} have one image in group {b}")
        joined.append(numpy.stack([corners[0], corners[1][image]], axis=1))
    edges = numpy.concatenate(joined)
    graph = scipy.sparse.coo_matrix((numpy.ones(len(edges)), (edges[:, 0], edges[:, 1])),
                                    shape=(len(points), len(points)))
    _, label = scipy.sparse.csgraph.connected_components(graph, directed=False)
    lowest = numpy.full(label.max() + 1, len(points), dtype=numpy.int64)
    numpy.minimum.at(lowest, label, identify)
    return lowest[label]


def _refuse_cells_across_a_period(blocks, identify, periodic):
    """A MeshError naming a cell two of whose corners are one node through ``identify``: a cell on both groups of
    a periodic pair (a period one cell across)."""
    if not periodic:
        return
    first = 0
    for kind, nodes in blocks:
        corners = numpy.sort(identify[nodes[:, :len(basix.geometry(CELLS[kind][0]))]], axis=1)
        twice = numpy.flatnonzero((corners[:, 1:] == corners[:, :-1]).any(axis=1))
        if twice.size:
            raise MeshError(f"cell {first + int(twice[0])} touches both groups of a periodic pair: a periodic "
                            "direction needs at least two cells across")
        first += len(nodes)


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


def _boundary_groups(mesh, tdim, lone_keys, points, ungrouped, identify, joined=()):
    """The group tag of each boundary face (rows of ``lone_keys``) and {name: tag}; the groups' faces keyed by
    their corners through ``identify``, as the cells' are, the faces of the groups named in ``joined`` (periodic
    pairs: interior faces now) left out."""
    tagged_keys, tagged = [], []
    for k, block in enumerate(mesh.cells):
        if block.type in FACET_CORNERS and _dimension(block.type) == tdim - 1:
            physical = mesh.cell_data.get("gmsh:physical")
            if physical is None and ungrouped is not None:
                continue
            if physical is None:
                raise MeshError("the mesh's boundary faces carry no groups (gmsh physical groups, "
                                "cell data 'gmsh:physical')")
            tags = numpy.asarray(physical[k], dtype=numpy.int64)
            kept = ~numpy.isin(tags, [int(mesh.field_data[name][0]) for name in joined])
            tagged_keys.append(_facet_keys(identify[numpy.asarray(block.data)[kept, :FACET_CORNERS[block.type]]]))
            tagged.append(tags[kept])
    names = {name: int(value[0]) for name, value in mesh.field_data.items()
             if int(value[1]) == tdim - 1 and name not in joined}
    tags = numpy.full(len(lone_keys), -1, dtype=numpy.int64)
    if tagged_keys:  # the tagged faces matched to the boundary faces as the cells' faces are matched
        keys = numpy.concatenate(tagged_keys)
        group, _, _ = _group_rows(numpy.concatenate([lone_keys, keys]))
        tagged, faces = numpy.concatenate(tagged), group[len(lone_keys):]
        _refuse_two_groups(keys, faces, tagged, mesh.field_data)
        tag_of_group = numpy.full(int(group.max()) + 1, -1, dtype=numpy.int64)
        tag_of_group[faces] = tagged
        tags = tag_of_group[group[:len(lone_keys)]]
    if ungrouped is not None and (tags < 0).any():
        tags[tags < 0] = 0
        names = {ungrouped: 0, **{name: tag for name, tag in names.items() if tag != 0}}
    unnamed = sorted(set(tags.tolist()) - set(names.values()))
    names.update({f"group{tag}": tag for tag in unnamed})
    return tags, names


def _refuse_two_groups(keys, faces, tags, field_data):
    """A MeshError naming a face listed in two physical groups (which one
    would hold is arbitrary)."""
    count = int(faces.max()) + 1
    lowest, highest = numpy.full(count, numpy.iinfo(numpy.int64).max), numpy.full(count, -1)
    numpy.minimum.at(lowest, faces, tags)
    numpy.maximum.at(highest, faces, tags)
    both = numpy.flatnonzero(lowest[faces] != highest[faces])
    if both.size:
        key, face = keys[both[0]], faces[both[0]]
        name = {int(value[0]): name for name, value in field_data.items()}
        groups = [name.get(int(t), f"group{t}") for t in (lowest[face], highest[face])]
        raise MeshError(f"the face with vertices {key[key >= 0].tolist()} is in two boundary groups, "
                        f"{groups[0]} and {groups[1]}: a face needs one")


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
            if g != f and facing and numpy.linalg.norm(centres[g] - centres[f]) < 1e-9 * size[f]:
                raise MeshError(f"the faces with vertices {keys[f][keys[f] >= 0].tolist()} of cell {cells[f]} and "
                                f"{keys[g][keys[g] >= 0].tolist()} of cell {cells[g]} lie on each other but share "
                                "no vertices: the mesh has duplicate nodes (pieces meshed apart and not joined; "
                                "gmsh: Coherence, or Mesh.RemoveDuplicateNodes)")
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
        face_offsets=whole.face_offsets[touching], face_centre_offsets=whole.face_centre_offsets[touching],
        face_weights=whole.face_weights[touching],
        boundary_cells=number[whole.boundary_cells[walls]], boundary_areas=whole.boundary_areas[walls],
        boundary_normals=whole.boundary_normals[walls], boundary_distances=whole.boundary_distances[walls],
        boundary_centroids=whole.boundary_centroids[walls], boundary_tags=whole.boundary_tags[walls],
        boundary_names=whole.boundary_names,
        boundary_counts=tag_counts(owner[whole.boundary_cells], whole.boundary_tags, ranks, whole.boundary_names))


def tag_counts(ranks_of_faces, tags, ranks, names):
    """(ranks, T): the boundary faces of each tag on each rank."""
    width = max(max(names.values(), default=-1), int(tags.max(initial=-1))) + 1
    counts = numpy.zeros((ranks, width), dtype=numpy.int64)
    numpy.add.at(counts, (ranks_of_faces, tags), 1)
    return counts


def read_mesh(path):
    """The mesh at ``path`` through meshio, or a MeshError naming the file and what is wrong."""
    import os

    import meshio

    try:
        return meshio.read(path)
    except Exception as exc:  # noqa: BLE001 (meshio raises many kinds)
        raise MeshError(f"cannot read the mesh {os.path.abspath(path)}: {type(exc).__name__}: {exc}") from exc
