"""The finite-volume geometry the flow operators need, whatever mesh it came from.

Each MPI rank holds the part of the geometry its rows need, numbered globally
(PETSc's numbering: rank p owns cells cell_ranges[p] .. cell_ranges[p+1]-1 and
faces face_ranges[p] .. face_ranges[p+1]-1). Attributes, for the rank's M cells,
the F faces that touch them (its own faces and those its neighbours own) and its
B boundary faces (plugin.flow.box fills them for a DMDA box,
plugin.flow.mesh for an unstructured mesh):

  volumes (M,), centroids (M, d); cell_numbers (M,): the cells' numbers in the
  grid's natural numbering, which does not depend on the ranks (a DMDA's
  natural order, a mesh file's cell order), for checkpoints;
  face_ids (F,) global face numbers; face_cells (F, 2) global cell numbers of
  the two cells of each face; face_areas (F,); face_normals (F, d) unit,
  pointing from face_cells[:, 0] to face_cells[:, 1]; face_distances (F,):
  |n . (x_1 - x_0)| between the two centroids (across a periodic side too);
  face_offsets (F, d): x_1 - x_0 itself (along the normal on a box; its
  part across the normal is what makes a mesh non-orthogonal there);
  face_centre_offsets (F, d): x_f - x_0, the face's centroid from cell 0's
  (half of face_offsets on a box; the consistent scheme's skewness
  corrections need it);
  face_weights (F,): cell 0's weight in the face interpolation Gamma, its
  centroid's distance to the face along the normal over face_distances
  (1/2 on a box; cell 1 weighs 1 - w);
  boundary_cells (B,) global; boundary_areas (B,); boundary_normals (B, d) unit
  and outward; boundary_distances (B,) from the centroid to the face along
  its normal; boundary_centroids (B, d) of the faces;
  boundary_tags (B,): the boundary group of each face, an integer tag;
  boundary_names: {name: tag} of every group of the whole mesh (a box's sides
  "xmin", "xmax", "ymin", ... are tags 0, 1, 2, ...; a mesh's named groups);
  boundary_counts (ranks, T): the boundary faces of each tag on each rank
  (T: the largest tag + 1), so that a rank can number faces of a group
  after those of lower ranks without asking them.

A rank owns the faces whose first cell it owns. In serial (one rank) the
numbering is local and ``face_ids`` is 0..F-1.
"""

from dataclasses import dataclass

import numpy


@dataclass(eq=False)
class FiniteVolumeGeometry:
    cell_ranges: numpy.ndarray
    face_ranges: numpy.ndarray
    rank: int
    volumes: numpy.ndarray
    centroids: numpy.ndarray
    cell_numbers: numpy.ndarray
    face_ids: numpy.ndarray
    face_cells: numpy.ndarray
    face_areas: numpy.ndarray
    face_normals: numpy.ndarray
    face_distances: numpy.ndarray
    face_offsets: numpy.ndarray
    face_centre_offsets: numpy.ndarray
    face_weights: numpy.ndarray
    boundary_cells: numpy.ndarray
    boundary_areas: numpy.ndarray
    boundary_normals: numpy.ndarray
    boundary_distances: numpy.ndarray
    boundary_centroids: numpy.ndarray
    boundary_tags: numpy.ndarray
    boundary_names: dict
    boundary_counts: numpy.ndarray

    @property
    def dim(self):
        return self.centroids.shape[1]

    @property
    def num_cells(self):
        """Cells this rank owns."""
        return self.volumes.size

    @property
    def num_faces(self):
        """Faces this rank owns."""
        return int(self.face_ranges[self.rank + 1] - self.face_ranges[self.rank])

    @property
    def num_ranks(self):
        return len(self.cell_ranges) - 1

    @property
    def cell_start(self):
        return int(self.cell_ranges[self.rank])

    @property
    def face_start(self):
        return int(self.face_ranges[self.rank])

    @property
    def num_global_cells(self):
        return int(self.cell_ranges[-1])

    @property
    def num_global_faces(self):
        return int(self.face_ranges[-1])
