"""The finite-volume geometry the flow operators need, whatever mesh it came from.

Attributes (M cells, F interior faces, B boundary faces), the names of
plugin.fv_geometry.TetGeometry so that an unstructured mesh can fill them:
  volumes (M,), centroids (M, d);
  face_cells (F, 2): the two cells of each face, face_areas (F,),
  face_normals (F, d) unit, pointing from face_cells[:, 0] to face_cells[:, 1],
  face_distances (F,): |n . (x_1 - x_0)| between the two centroids (across a
  periodic boundary too);
  boundary_cells (B,), boundary_areas (B,), boundary_normals (B, d) unit and
  outward, boundary_distances (B,): from the centroid to the face,
  boundary_sides (B,): which side of the box (0: x low, 1: x high, 2: y low...),
  for boundary conditions.
"""

from dataclasses import dataclass

import numpy


@dataclass(eq=False)
class FiniteVolumeGeometry:
    volumes: numpy.ndarray
    centroids: numpy.ndarray
    face_cells: numpy.ndarray
    face_areas: numpy.ndarray
    face_normals: numpy.ndarray
    face_distances: numpy.ndarray
    boundary_cells: numpy.ndarray
    boundary_areas: numpy.ndarray
    boundary_normals: numpy.ndarray
    boundary_distances: numpy.ndarray
    boundary_sides: numpy.ndarray

    @property
    def dim(self):
        return self.centroids.shape[1]

    @property
    def num_cells(self):
        return self.volumes.size

    @property
    def num_faces(self):
        return self.face_areas.size


def box_geometry(shape, lengths, periodic):
    """A box of shape[d] equal cells along each axis d (x fastest, the DMDA
    natural numbering), side lengths ``lengths``, periodic along the axes
    where ``periodic[d]``; the other sides are boundary faces."""
    shape, lengths = tuple(int(n) for n in shape), tuple(float(a) for a in lengths)
    dim = len(shape)
    h = numpy.array(lengths) / numpy.array(shape)
    index = numpy.arange(numpy.prod(shape)).reshape(shape[::-1])  # [k, j, i]
    axes = numpy.meshgrid(*[(numpy.arange(n) + 0.5) * h[d] for d, n in enumerate(shape)], indexing="ij")
    centroids = numpy.stack([a.transpose().ravel() for a in axes], axis=1)
    volumes = numpy.full(index.size, numpy.prod(h))
    cells, areas, normals, distances = [], [], [], []
    bcells, bareas, bnormals, bdistances, bsides = [], [], [], [], []
    for d in range(dim):
        axis = dim - 1 - d  # axis of ``index`` along x_d
        area = numpy.prod(h) / h[d]
        low, high = numpy.take(index, 0, axis=axis).ravel(), numpy.take(index, -1, axis=axis).ravel()
        first = numpy.take(index, range(shape[d] - 1), axis=axis).ravel()
        second = numpy.take(index, range(1, shape[d]), axis=axis).ravel()
        if periodic[d]:
            first, second = numpy.concatenate((first, high)), numpy.concatenate((second, low))
        else:
            for side, owner, sign in ((2 * d, low, -1.0), (2 * d + 1, high, 1.0)):
                normal = numpy.zeros((owner.size, dim))
                normal[:, d] = sign
                bcells.append(owner), bnormals.append(normal), bsides.append(numpy.full(owner.size, side))
                bareas.append(numpy.full(owner.size, area)), bdistances.append(numpy.full(owner.size, h[d] / 2))
        normal = numpy.zeros((first.size, dim))
        normal[:, d] = 1.0
        cells.append(numpy.stack((first, second), axis=1)), normals.append(normal)
        areas.append(numpy.full(first.size, area)), distances.append(numpy.full(first.size, h[d]))

    def join(parts, width=None):
        if parts:
            return numpy.concatenate(parts)
        return numpy.zeros((0,) if width is None else (0, width))

    return FiniteVolumeGeometry(
        volumes=volumes, centroids=centroids, face_cells=join(cells, 2).astype(numpy.int64),
        face_areas=join(areas), face_normals=join(normals, dim), face_distances=join(distances),
        boundary_cells=join(bcells).astype(numpy.int64), boundary_areas=join(bareas),
        boundary_normals=join(bnormals, dim), boundary_distances=join(bdistances),
        boundary_sides=join(bsides).astype(numpy.int64))
