"""The pressure multigrid's grids and interpolations (plugin.flow.pressure_multigrid),
without PETSc; the flow driver's use of it is in test_flow_solver."""

import numpy
import pytest

from plugin.flow.box import BoxPartition
from plugin.flow.pressure_multigrid import hierarchy, interpolation


def shapes_and_splits(grids):
    return [(g.shape, [list(s) for s in g.splits]) for g in grids]


def test_semicoarsening_makes_cells_cubic_before_halving_every_axis():
    """On the 1 x 1 x 2 cavity box only x and y halve first; then all three, down to 2 cells an axis."""
    grids = hierarchy(BoxPartition((16, 16, 16), [[16], [16], [16]], (False,) * 3), (1.0, 1.0, 2.0))
    assert [g.shape for g in grids] == [(16, 16, 16), (8, 8, 16), (4, 4, 8), (2, 2, 4), (2, 2, 2)]


def test_each_rank_keeps_its_block_on_every_grid():
    """An axis halves only while every rank's part of it has an even number of cells."""
    grids = hierarchy(BoxPartition((16, 8), [[6, 10], [8]], (False, True)), (2.0, 1.0))
    assert shapes_and_splits(grids) == [((16, 8), [[6, 10], [8]]), ((8, 4), [[3, 5], [4]]),
                                        ((8, 2), [[3, 5], [2]])]


def natural(partition, rank):
    """Natural (x fastest) numbers of a rank's cells, in the rank's order."""
    ijk = partition.block(rank)
    return numpy.ravel_multi_index(ijk[::-1], partition.shape[::-1])


def natural_interpolation(fine, coarse):
    """The whole interpolation in natural numbering, assembled from every rank's rows."""
    ranks = len(fine.cell_ranges) - 1
    to_natural = numpy.concatenate([natural(coarse, r) for r in range(ranks)])
    whole = numpy.zeros((int(numpy.prod(fine.shape)), int(numpy.prod(coarse.shape))))
    for rank in range(ranks):
        rows = interpolation(fine, coarse, rank).toarray()
        whole[natural(fine, rank)[:, None], to_natural[None, :]] = rows
    return whole


@pytest.mark.parametrize("periodic", [(False, False, False), (True, False, True)])
def test_interpolation_is_linear_and_the_same_on_any_ranks(periodic):
    lengths = (1.0, 1.0, 2.0)
    serial = hierarchy(BoxPartition((8, 8, 4), [[8], [8], [4]], periodic), lengths)
    split = hierarchy(BoxPartition((8, 8, 4), [[4, 4], [2, 6], [4]], periodic), lengths)
    assert [g.shape for g in serial[:2]] == [g.shape for g in split[:2]] == [(8, 8, 4), (4, 4, 4)]
    P = natural_interpolation(*serial[:2])
    numpy.testing.assert_array_equal(natural_interpolation(*split[:2]), P)
    numpy.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-15)  # constants exactly
    assert (P > 0).sum(axis=1).max() == 4  # 2 x 2 coarse cells, z does not halve
    # A linear field along x is reproduced wherever both coarse neighbours exist.
    fine_x = (numpy.arange(8) + 0.5) / 8
    coarse_x = (numpy.arange(4) + 0.5) / 4
    got = (P @ numpy.tile(numpy.repeat(coarse_x[None, :], 4, axis=0).ravel(), 4)).reshape(4, 8, 8)
    inside = slice(1, 7)
    numpy.testing.assert_allclose(got[:, :, inside], numpy.broadcast_to(fine_x[inside], (4, 8, 6)), atol=1e-15)
    # The first fine cell: 3/4 of its parent along x, 1/4 of the last coarse cell
    # across a periodic side; along y the wall's mirror cell is the parent.
    assert P[0, 0] == (0.75 if periodic[0] else 1.0)
    assert P[0, 3] == (0.25 if periodic[0] else 0.0)
