"""DMDA boxes: cells of equal size split among ranks as a DMDA splits them,
and their FiniteVolumeGeometry. Only the box path of the flow driver uses
this module (FlowSolver.from_dmda, the pressure multigrid)."""

import numpy

from .geometry import FiniteVolumeGeometry

SIDE_NAMES = ("xmin", "xmax", "ymin", "ymax", "zmin", "zmax")  # boundary tag 2 d + (0 low, 1 high)


class BoxPartition:
    """The cells of a box split among ranks as a DMDA splits them, with PETSc's
    numbering of cells (rank by rank, x fastest inside each rank's block) and
    of faces (each cell's face on its high side along each axis, where there is
    one: rank by rank, then axis by axis, then in cell order).

    ``splits[d]`` lists the ranks' cell counts along axis d (DMDA ownership
    ranges); ranks are numbered x fastest, as in a DMDA.
    """

    def __init__(self, shape, splits, periodic):
        self.shape = tuple(int(n) for n in shape)
        self.dim = len(self.shape)
        self.periodic = tuple(bool(p) for p in periodic)
        self.splits = [numpy.asarray(s, dtype=numpy.int64) for s in splits]
        for d, (n, s) in enumerate(zip(self.shape, self.splits, strict=True)):
            if s.sum() != n or (s < 1).any():
                raise ValueError(f"the ranks' cell counts along axis {d} ({list(s)}) must be positive and sum to {n}")
            if self.periodic[d] and n < 2:
                raise ValueError(f"a periodic axis needs at least 2 cells, axis {d} has {n}")
        self.starts = [numpy.concatenate(([0], numpy.cumsum(s))) for s in self.splits]
        grid = [s.size for s in self.splits]
        self.size = int(numpy.prod(grid))
        # Per rank (x fastest): its block's first cell and size along each axis.
        coords = numpy.stack(numpy.unravel_index(numpy.arange(self.size), grid[::-1])[::-1], axis=1)
        self.rank_stride = numpy.cumprod([1] + grid[:-1])
        self.low = numpy.stack([self.starts[d][coords[:, d]] for d in range(self.dim)], axis=1)
        self.count = numpy.stack([self.splits[d][coords[:, d]] for d in range(self.dim)], axis=1)
        self.cell_ranges = numpy.concatenate(([0], numpy.cumsum(self.count.prod(axis=1))))
        # Faces: a block's cells on the high wall of a non-periodic axis have none there.
        self.face_count = numpy.repeat(self.count[:, None, :], self.dim, axis=1)  # [rank, axis, extent]
        for d in range(self.dim):
            if not self.periodic[d]:
                self.face_count[self.low[:, d] + self.count[:, d] == self.shape[d], d, d] -= 1
        per_axis = self.face_count.prod(axis=2)
        self.face_ranges = numpy.concatenate(([0], numpy.cumsum(per_axis.sum(axis=1))))
        self.axis_offset = self.face_ranges[:-1, None] + numpy.cumsum(per_axis, axis=1) - per_axis

    def owner(self, ijk):
        """Rank of each cell; ijk is (d, k) natural cell coordinates."""
        return sum(self.rank_stride[d] * (numpy.searchsorted(self.starts[d], ijk[d], side="right") - 1)
                   for d in range(self.dim))

    def _offset_in_block(self, ijk, rank, extent):
        """Place of cells ijk in their block (x fastest); ``rank`` and ``extent`` per cell, or one for all."""
        index = numpy.zeros(ijk.shape[1], dtype=numpy.int64)
        for d in reversed(range(self.dim)):
            index = index * extent[..., d] + (ijk[d] - self.low[rank, d])
        return index

    def cell_index(self, ijk):
        rank = self.owner(ijk)
        return self.cell_ranges[rank] + self._offset_in_block(ijk, rank, self.count[rank])

    def own_index(self, rank, ijk):
        """Numbers of cells ijk of ``rank``'s own block (cell_index without the owner lookup)."""
        return self.cell_ranges[rank] + self._offset_in_block(ijk, rank, self.count[rank])

    def face_index(self, axis, ijk):
        """Number of the face on the high side along ``axis`` of cells ijk (which must have one)."""
        rank = self.owner(ijk)
        return self.axis_offset[rank, axis] + self._offset_in_block(ijk, rank, self.face_count[rank, axis])

    def block(self, rank, extent=None):
        """Natural coordinates (d, k) of a rank's cells, x fastest; ``extent`` trims the block."""
        extent = self.count[rank] if extent is None else extent
        axes = [self.low[rank, d] + numpy.arange(extent[d]) for d in range(self.dim)]
        return numpy.stack([a.ravel() for a in numpy.meshgrid(*axes[::-1], indexing="ij")[::-1]])

    def neighbour(self, ijk, axis, step):
        """Coordinates of the neighbours ``step`` (+1 or -1) cells along ``axis`` (periodic wrap)."""
        out = ijk.copy()
        out[axis] = (out[axis] + step) % self.shape[axis]
        return out


def partition_geometry(partition, lengths, rank, origin=None, widths=None):
    """The geometry of ``rank``'s part of a box of side ``lengths`` cut into
    equal cells, its low corner at ``origin`` (default 0); or, with
    ``widths`` (one array per axis of its cells' widths, summing to that
    side), into cells of those widths (a graded box: box_widths). Built axis
    by axis from strided index arithmetic over the rank's block, coordinates
    only for its boundary layers: at 256^3 it is some 50M faces."""
    p, dim, count, low = partition, partition.dim, partition.count[rank], partition.low[rank]
    widths = uniform_widths(p.shape, lengths) if widths is None else [numpy.asarray(w, dtype=float) for w in widths]
    nodes = [numpy.concatenate(([0.0], numpy.cumsum(w))) + (0.0 if origin is None else float(origin[d]))
             for d, w in enumerate(widths)]
    stride = numpy.cumprod([1, *count[:-1]])  # of the rank's block, x fastest
    first = p.cell_ranges[rank]
    # Faces axis by axis: those the rank owns (the high side of every cell of its block trimmed where the
    # box ends), then those a lower neighbour owns (the low side of the block's first layer, where one is).
    below, layers = [], []
    for d in range(dim):
        layer = _layer(p, rank, d, 0, count)
        neighbour = p.neighbour(layer, d, -1)
        ghost = (p.owner(neighbour) != rank) & (p.periodic[d] | (layer[d] > 0))
        layers.append(layer[:, ghost])
        below.append(neighbour[:, ghost])
    sizes = [int(numpy.prod(p.face_count[rank, d])) + layers[d].shape[1] for d in range(dim)]
    total = sum(sizes)
    ids = numpy.empty(total, dtype=numpy.int64)
    cells = numpy.empty((total, 2), dtype=numpy.int64)
    normals, offsets, reach = numpy.zeros((total, dim)), numpy.zeros((total, dim)), numpy.zeros((total, dim))
    areas, distances, weights = numpy.empty(total), numpy.empty(total), numpy.empty(total)
    walls = {"cells": [], "side": [], "ijk": []}
    at = 0
    for d in range(dim):
        extent = p.face_count[rank, d]
        owned = slice(at, at + int(numpy.prod(extent)))
        ids[owned] = p.axis_offset[rank, d] + numpy.arange(owned.stop - owned.start)
        own, up = cells[owned, 0], cells[owned, 1]
        own[:] = first + _strided(extent, stride)
        numpy.add(own, stride[d], out=up)
        if extent[d] == count[d]:  # the block's last layer: neighbours in the next block (or across the period)
            slab = up.reshape(*extent[::-1])[_layer_index(d, dim, -1)]
            last = _layer(p, rank, d, count[d] - 1, extent)
            slab[...] = p.cell_index(p.neighbour(last, d, 1)).reshape(slab.shape)
        theirs = slice(owned.stop, at + sizes[d])
        ids[theirs] = p.face_index(d, below[d])
        cells[theirs, 0], cells[theirs, 1] = p.cell_index(below[d]), p.own_index(rank, layers[d])
        # each face's cell 0, the lower along d, in natural coordinates
        lower = numpy.concatenate((p.block(rank, extent), below[d]), axis=1)
        upper = (lower[d] + 1) % p.shape[d]
        span = slice(at, at + sizes[d])
        areas[span] = _across(widths, lower, d)
        distances[span] = (widths[d][lower[d]] + widths[d][upper]) / 2
        normals[span, d], offsets[span, d], reach[span, d] = 1.0, distances[span], widths[d][lower[d]] / 2
        weights[span] = reach[span, d] / distances[span]
        at += sizes[d]
        if not p.periodic[d]:
            high = low[d] + count[d] == p.shape[d]
            for side, layer, wall in ((2 * d, 0, low[d] == 0), (2 * d + 1, count[d] - 1, high)):
                if wall:
                    ijk = _layer(p, rank, d, layer, count)
                    walls["cells"].append(p.own_index(rank, ijk))
                    walls["side"].append(numpy.full(walls["cells"][-1].size, side))
                    walls["ijk"].append(ijk)
    sides = _join(walls["side"], numpy.int64)
    wall_axis = sides // 2
    wall_normals = numpy.zeros((sides.size, dim))
    wall_normals[numpy.arange(sides.size), wall_axis] = numpy.where(sides % 2 == 1, 1.0, -1.0)
    wall_cells = _join(walls["cells"], numpy.int64)
    wall_ijk = numpy.concatenate(walls["ijk"], axis=1) if walls["ijk"] else numpy.zeros((dim, 0), dtype=numpy.int64)
    wall_areas = numpy.array([_across(widths, wall_ijk[:, [k]], a)[0] for k, a in enumerate(wall_axis)])
    wall_distances = numpy.array([widths[a][wall_ijk[a, k]] / 2 for k, a in enumerate(wall_axis)])
    mine = p.block(rank, count)  # the rank's cells, natural coordinates, in its order
    centroids = numpy.stack([(nodes[d][mine[d]] + nodes[d][mine[d] + 1]) / 2 for d in range(dim)], axis=1)
    volumes = numpy.prod([widths[d][mine[d]] for d in range(dim)], axis=0)
    natural = sum(mine[d] * int(numpy.prod(p.shape[:d])) for d in range(dim))
    return FiniteVolumeGeometry(
        cell_ranges=p.cell_ranges, face_ranges=p.face_ranges, rank=rank,
        volumes=volumes, centroids=centroids, cell_numbers=natural,
        face_ids=ids, face_cells=cells, face_areas=areas, face_normals=normals,
        face_distances=distances, face_offsets=offsets, face_centre_offsets=reach, face_weights=weights,
        boundary_cells=wall_cells, boundary_areas=wall_areas.reshape(-1), boundary_normals=wall_normals,
        boundary_distances=wall_distances.reshape(-1),
        boundary_centroids=centroids[wall_cells - first] + wall_normals * wall_distances.reshape(-1, 1),
        boundary_tags=sides, boundary_names=side_names(p.periodic), boundary_counts=side_counts(p))


def uniform_widths(shape, lengths):
    """Each axis's cell widths of a box of equal cells."""
    return [numpy.full(n, float(length) / n) for n, length in zip(shape, lengths, strict=True)]


def tanh_widths(n, length, beta):
    """The widths of n cells over ``length`` clustered at both ends by the tanh
    law of channel-flow simulations, nodes y_j = L/2 (1 + tanh(beta (2 j / n
    - 1)) / tanh(beta)) (Moser, Kim and Mansour 1999 cluster theirs likewise);
    beta = 0: equal cells."""
    if beta == 0:
        return numpy.full(n, float(length) / n)
    eta = 2.0 * numpy.arange(n + 1) / n - 1.0
    return numpy.diff(length / 2 * (1.0 + numpy.tanh(beta * eta) / numpy.tanh(beta)))


def _across(widths, ijk, d):
    """The area of the faces normal to axis d of the cells at natural coordinates ijk (dim, k)."""
    area = numpy.ones(ijk.shape[1])
    for e in range(len(widths)):
        if e != d:
            area = area * widths[e][ijk[e]]
    return area


def _strided(extent, stride):
    """sum_d i_d stride[d] over the cells i of a block of ``extent``, x fastest (a flat array)."""
    index = numpy.zeros((), dtype=numpy.int64)
    for d in reversed(range(len(extent))):
        index = numpy.add.outer(index, numpy.arange(extent[d], dtype=numpy.int64) * stride[d])
    return index.ravel()


def _layer_index(d, dim, at):
    """Index of the layer ``at`` along axis d of an array shaped (z, y, x)."""
    return tuple(at if e == dim - 1 - d else slice(None) for e in range(dim))


def _layer(p, rank, d, at, extent):
    """Natural coordinates (dim, k) of the cells of ``rank``'s block, trimmed to
    ``extent``, in its layer ``at`` (counted from the block's low side) along axis d."""
    thin = numpy.array(extent)
    thin[d] = 1
    ijk = p.block(rank, thin)
    ijk[d] += at
    return ijk


def side_names(periodic):
    """{name: tag} of the wall sides of a box periodic along the axes where ``periodic[d]``."""
    return {SIDE_NAMES[2 * d + s]: 2 * d + s for d, p in enumerate(periodic) if not p for s in (0, 1)}


def side_counts(partition):
    """(ranks, 2 d): the boundary faces each rank holds on each side of the box."""
    p = partition
    counts = numpy.zeros((p.size, 2 * p.dim), dtype=numpy.int64)
    for d in range(p.dim):
        if p.periodic[d]:
            continue
        across = numpy.prod(numpy.delete(p.count, d, axis=1), axis=1)
        counts[:, 2 * d] = numpy.where(p.low[:, d] == 0, across, 0)
        counts[:, 2 * d + 1] = numpy.where(p.low[:, d] + p.count[:, d] == p.shape[d], across, 0)
    return counts


def _join(parts, dtype, empty_shape=(0,)):
    return numpy.concatenate(parts).astype(dtype) if parts else numpy.zeros(empty_shape, dtype=dtype)


def box_geometry(shape, lengths, periodic, origin=None, widths=None):
    """A box of shape[d] equal cells along each axis d (x fastest, the DMDA
    natural numbering) on one rank, side lengths ``lengths``, low corner
    ``origin``, periodic along the axes where ``periodic[d]``; the other
    sides are walls (boundary faces). ``widths``: as partition_geometry's."""
    partition = BoxPartition(shape, [[n] for n in shape], periodic)
    return partition_geometry(partition, lengths, 0, origin, widths)


def dmda_partition(da):
    """The BoxPartition of a DMDA of cells (its boundary types say which axes are periodic)."""
    from petsc4py import PETSc

    periodic = [b == PETSc.DM.BoundaryType.PERIODIC for b in da.getBoundaryType()]
    return BoxPartition(da.getSizes(), da.getOwnershipRanges(), periodic)
