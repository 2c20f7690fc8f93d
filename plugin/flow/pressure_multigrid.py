"""Geometric multigrid for the pressure of a DMDA box (``-pressure_pc_type mg``):
PETSc's PCMG, with the grids, interpolations and level operators built here.

The DMDA's own coarsening does not fit cell-centred unknowns well: its Q0
interpolation with Galerkin coarse operators makes each coarse operator twice
too stiff, and it halves every axis even where the cells are anisotropic
(several times gamg's iterations on the 1 x 1 x 2 cavity).
Here instead, as in cell-centred geometric multigrid codes:

* semi-coarsening: only the axes whose cells are the thinnest (within a
  factor 1.5) halve, so anisotropic cells become cubic before the other axes
  coarsen, and a point smoother sees couplings of one strength;
* linear cell-centred interpolation, a tensor product of 3/4 and 1/4 of the
  two nearest coarse cells along each halved axis (at a wall the mirror cell,
  which is the zero normal gradient of the pressure; across a periodic side
  the wrapped one); restriction is its transpose, assembled;
* each level's operator is the compact Laplacian of its own cells (7-point
  in 3D), not a Galerkin product, and has the pressure matrix's type.

The coarsest level (a few cells, singular like every level unless an
outflow holds the pressure) is AIJ on the host, solved by PCSVD. Keeping
more small levels on the host did not pay on the GPU (BENCHMARKS.md). Each
rank's part of the grid halves with it, so no level moves cells between ranks.
"""

import itertools

import numpy
import scipy.sparse
from petsc4py import PETSc

from petsc_ext.matrices import aij_from_rows
from petsc_ext.options import OptionError

from .box import BoxPartition, partition_geometry
from .operators import compact_laplacian

_THIN = 1.5  # axes whose cells are this close to the thinnest halve together


def coarser(partition, lengths):
    """The next grid of ``partition`` (a BoxPartition), or None where no axis can halve."""
    p = partition
    h = numpy.asarray(lengths, dtype=float) / numpy.asarray(p.shape)
    can = [all(s % 2 == 0 for s in p.splits[d]) and p.shape[d] >= 4 for d in range(p.dim)]
    if not any(can):
        return None
    thinnest = min(h[d] for d in range(p.dim) if can[d])
    factor = [2 if can[d] and h[d] <= _THIN * thinnest else 1 for d in range(p.dim)]
    return BoxPartition([n // f for n, f in zip(p.shape, factor, strict=True)],
                        [s // f for s, f in zip(p.splits, factor, strict=True)], p.periodic)


def hierarchy(partition, lengths):
    """The grids from ``partition`` down to the coarsest, finest first."""
    grids = [partition]
    while (grid := coarser(grids[-1], lengths)) is not None:
        grids.append(grid)
    return grids


def interpolation(fine, coarse, rank):
    """The rank's rows (its fine cells) of the linear cell-centred
    interpolation from ``coarse`` to ``fine``, global columns (scipy CSR).

    Along each halved axis a fine cell takes 3/4 of its parent and 1/4 of the
    coarse cell on its side (at a wall the mirror cell, the parent itself;
    across a periodic side the wrapped one); the weights multiply over axes.
    Each of the 2^k combinations is built from per-axis tables broadcast over
    the rank's block (x fastest, the block's order), with the coarse cells'
    PETSc numbers (rank by rank, x fastest inside a block) composed the same
    way: no per-cell lookups."""
    dim, low, count = fine.dim, fine.low[rank], fine.count[rank]
    factor = numpy.asarray(fine.shape) // numpy.asarray(coarse.shape)
    choices = []  # per axis: (coarse coordinate, weight) for each fine coordinate of the block
    for d in range(dim):
        i = low[d] + numpy.arange(count[d])
        if factor[d] == 1:
            choices.append([(i, 1.0)])
            continue
        parent = i // 2
        other = parent + numpy.where(i % 2 == 0, -1, 1)
        other = other % coarse.shape[d] if fine.periodic[d] else numpy.clip(other, 0, coarse.shape[d] - 1)
        choices.append([(parent, 0.75), (other, 0.25)])

    def along(d, values):  # a per-axis table shaped to broadcast over the block (x the last, fastest axis)
        return values.reshape([values.size if k == dim - 1 - d else 1 for k in range(dim)])

    columns, weights = [], []
    for combination in itertools.product(*choices):
        owner, offset, weight = 0, 0, 1.0
        for d in reversed(range(dim)):  # Horner over axes: offset = a_0 + n_0 (a_1 + n_1 (a_2 ...))
            c, w = combination[d]
            r = numpy.searchsorted(coarse.starts[d], c, side="right") - 1  # the coarse block along d
            owner = owner + along(d, coarse.rank_stride[d] * r)
            offset = along(d, c - coarse.starts[d][r]) + along(d, coarse.splits[d][r]) * offset
            weight = weight * w
        cols = coarse.cell_ranges[owner] + offset
        columns.append(cols.ravel())
        weights.append(numpy.broadcast_to(weight, cols.shape).ravel())
    n, terms = int(count.prod()), len(columns)  # every row has one entry per combination, in CSR order below
    matrix = scipy.sparse.csr_matrix((numpy.stack(weights, axis=1).ravel(), numpy.stack(columns, axis=1).ravel(),
                                      numpy.arange(0, n * terms + 1, terms)), shape=(n, int(coarse.cell_ranges[-1])))
    matrix.sum_duplicates()  # sorted, and at a wall the mirror cell (the parent) counted once
    return matrix


class PressureMultigrid:
    """The grids of a box (``partition``, side ``lengths``) and, once ``attach``
    gives them to a PCMG, their operators and interpolations."""

    def __init__(self, partition, lengths, comm):
        self.grids = hierarchy(partition, lengths)
        self.lengths, self.comm = lengths, comm
        self._mats = []

    @property
    def depth(self):
        """Levels available, the finest included."""
        return len(self.grids)

    def attach(self, pc, mat_type, open_tags=()):
        """Operators, interpolations and restrictions on every level of ``pc``
        (a PCMG whose level count is set), of ``mat_type`` but the coarsest,
        which is AIJ and gets PCSVD; the others get Jacobi smoothing (options
        given to ``pc`` still override both). ``open_tags``: the box sides
        where an outflow holds the pressure (Dirichlet on every level)."""
        prefix = pc.getOptionsPrefix() or ""
        levels = pc.getMGLevels()
        if levels > self.depth:
            raise OptionError(f"-{prefix}pc_mg_levels {levels}: this grid has {self.depth} levels (each rank's "
                              "part halves along an axis while it has an even number of cells)")
        self.destroy()
        rank = self.comm.getRank()
        for level in range(1, levels):  # PCMG numbers the coarsest 0
            fine, coarse = self.grids[levels - 1 - level], self.grids[levels - level]
            kind = PETSc.Mat.Type.AIJ if level == 1 else mat_type
            p = interpolation(fine, coarse, rank)
            interpolate = aij_from_rows(p.indptr, p.indices, p.data, coarse.count[rank].prod(), self.comm)
            restrict = interpolate.transpose(PETSc.Mat())
            pc.setMGInterpolation(level, self._mat(_retyped(interpolate, kind)))
            pc.setMGRestriction(level, self._mat(_retyped(restrict, kind)))
            operator = self._operator(coarse, rank, kind, open_tags)
            if level == 1:
                coarse_solve = pc.getMGCoarseSolve()
                coarse_solve.setType(PETSc.KSP.Type.PREONLY)
                coarse_solve.getPC().setType(PETSc.PC.Type.SVD)
                coarse_solve.setOperators(operator)
            else:
                pc.getMGSmoother(level - 1).setOperators(operator)
        for level in range(1, levels):
            pc.getMGSmoother(level).getPC().setType(PETSc.PC.Type.JACOBI)

    def array_levels(self, open_tags=()):
        """The coarse levels' operators (-L on each grid below the finest), the
        prolongations between the levels, as scipy CSR on one rank, and every
        level's (shape, periodic): the hierarchy of ``attach`` for gpuamg's
        array cycle (-flow_pressure_levels geometric)."""
        operators = [self._laplacian(grid, 0, open_tags) for grid in self.grids[1:]]
        prolongations = [interpolation(fine, coarse, 0) for fine, coarse in zip(self.grids, self.grids[1:])]
        return operators, prolongations, [(grid.shape, grid.periodic) for grid in self.grids]

    def _laplacian(self, grid, rank, open_tags):
        """-L on the rank's cells of ``grid`` (scipy CSR): the pressure matrix's sign."""
        return -compact_laplacian(partition_geometry(grid, self.lengths, rank), open_tags=open_tags)

    def _operator(self, grid, rank, mat_type, open_tags):
        """``_laplacian`` as a PETSc matrix of ``mat_type``."""
        laplacian = self._laplacian(grid, rank, open_tags)
        return self._mat(aij_from_rows(laplacian.indptr, laplacian.indices, laplacian.data,
                                       grid.count[rank].prod(), self.comm, mat_type))

    def _mat(self, mat):
        self._mats.append(mat)
        return mat

    def destroy(self):
        for mat in self._mats:
            mat.destroy()
        self._mats = []


def _retyped(aij, mat_type):
    """``aij`` (an AIJ matrix) converted in place to ``mat_type``."""
    if mat_type != aij.getType():
        aij.convert(mat_type, aij)
    return aij
