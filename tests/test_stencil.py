"""gpu_mats.stencil: a box's constant-coefficient operator and its grid
transfers recognized in CSR and applied from the grids (NumPy twins here;
the CUDA kernels against them in tests/test_gpu.py), and gpuamg's geometric
levels cycled on them."""

import numpy
import pytest
import scipy.sparse

from gpu_mats.amg import GeometricMultigrid
from gpu_mats.stencil import StencilMatrix, TensorTransfer
from meshes import unit_mesh
from plugin.flow.box import SIDE_NAMES, BoxPartition, partition_geometry
from plugin.flow.mesh import mesh_geometry
from plugin.flow.operators import compact_laplacian
from plugin.flow.pressure_multigrid import hierarchy, interpolation

BOXES = {  # shape, periodic, side lengths, outflow sides
    "3D walls, 1 x 1 x 2": ((6, 5, 8), (False,) * 3, (1.0, 1.0, 2.0), ()),
    "3D periodic x and z, an outflow": ((4, 3, 5), (True, False, True), (2.0, 1.0, 1.0), ("ymax",)),
    "2D channel": ((7, 4), (False, False), (3.0, 1.0), ("xmax",)),
    "2D periodic": ((5, 6), (True, True), (1.0, 1.0), ()),
}


def box_laplacian(shape, periodic, lengths, open_sides=()):
    """-L of a box's cells on one rank (the pressure matrix), scipy CSR; the
    sides named in ``open_sides`` ("xmax", ...) are outflows, their pressure
    held (the diagonal of their cells grows)."""
    partition = BoxPartition(shape, [[n] for n in shape], periodic)
    tags = [SIDE_NAMES.index(side) for side in open_sides]  # the box's boundary tags number its sides
    return -compact_laplacian(partition_geometry(partition, lengths, 0), open_tags=tags)


@pytest.mark.parametrize("box", BOXES)
def test_a_boxs_laplacian_is_recognized_and_its_products_are_the_matrixs(box):
    shape, periodic, lengths, open_sides = BOXES[box]
    A = box_laplacian(shape, periodic, lengths, open_sides)
    S = StencilMatrix.from_csr(A.indptr, A.indices, A.data, shape, periodic)
    assert S is not None
    rng = numpy.random.default_rng(0)
    x, z, d, scaling, x0 = rng.standard_normal((5, A.shape[0]))
    y = numpy.empty_like(x)
    S.multiply(x, y)
    numpy.testing.assert_allclose(y, A @ x, rtol=1e-13, atol=1e-13)
    S.multiply(x, y, -0.5, 2.0, z)
    numpy.testing.assert_allclose(y, 2.0 * z - 0.5 * (A @ x), rtol=1e-13, atol=1e-13)
    r, d_next, x_out = numpy.empty_like(x), numpy.empty_like(x), x0.copy()
    S.chebyshev_step(d, d_next, r, z, scaling, x_out, 0.7, 1.3)
    numpy.testing.assert_allclose(r, z - A @ d, rtol=1e-13, atol=1e-13)
    numpy.testing.assert_allclose(d_next, 0.7 * d + 1.3 * scaling * r, rtol=1e-13, atol=1e-13)
    numpy.testing.assert_allclose(x_out, x0 + d_next, rtol=1e-13, atol=1e-13)


def test_what_is_not_a_stencil_on_the_grid_is_refused():
    shape, periodic, lengths, _ = BOXES["3D walls, 1 x 1 x 2"]
    A = box_laplacian(shape, periodic, lengths)
    varied = A.copy()
    varied.data[varied.indices != numpy.repeat(numpy.arange(A.shape[0]), numpy.diff(A.indptr))] *= 1.0 + 1e-6 * (
        numpy.arange(A.nnz - A.shape[0]) % 3)
    missing = A.tolil()
    missing[0, 1] = missing[1, 0] = 0.0
    missing = missing.tocsr()
    missing.eliminate_zeros()
    tets = (-compact_laplacian(mesh_geometry(unit_mesh("tetra", n=3)))).tocsr()
    wide = (A @ A).tocsr()
    for matrix, grid in ((varied, shape), (missing, shape), (wide, shape), (A, (5, 6, 8)), (tets, (tets.shape[0], 1))):
        assert StencilMatrix.from_csr(matrix.indptr, matrix.indices, matrix.data, grid, (False,) * len(grid)) is None
    two = box_laplacian((2, 4), (True, False), (1.0, 1.0))  # a periodic axis of 2 cells: one neighbour, twice
    assert StencilMatrix.from_csr(two.indptr, two.indices, two.data, (2, 4), (True, False)) is None


def box_transfers(shape, periodic, lengths):
    """Each pair of successive grids of the box's hierarchy with its interpolation (scipy CSR)."""
    grids = hierarchy(BoxPartition(shape, [[n] for n in shape], periodic), lengths)
    return [(fine, coarse, interpolation(fine, coarse, 0)) for fine, coarse in zip(grids, grids[1:])]


@pytest.mark.parametrize("box", BOXES)
def test_the_boxs_interpolations_are_recognized_as_tensor_products(box):
    """Semi- and full coarsening, walls (the mirror cell) and periodic sides:
    the tables' products are P's and P^T's."""
    shape, periodic, lengths, _ = BOXES[box]
    pairs = box_transfers(tuple(2 * n for n in shape), periodic, lengths)
    assert pairs
    rng = numpy.random.default_rng(2)
    for fine, coarse, P in pairs:
        transfers = TensorTransfer.between(P, fine.shape, coarse.shape, numpy)
        assert transfers is not None, (fine.shape, coarse.shape)
        prolongation, restriction = transfers
        assert prolongation.shape == P.shape and restriction.shape == P.T.shape
        v, u, z = rng.standard_normal(P.shape[1]), rng.standard_normal(P.shape[0]), rng.standard_normal(P.shape[0])
        y = numpy.empty(P.shape[0])
        prolongation.multiply(v, y, 2.0, -1.0, z)
        numpy.testing.assert_allclose(y, 2.0 * (P @ v) - z, rtol=1e-13, atol=1e-13)
        w = numpy.empty(P.shape[1])
        restriction.multiply(u, w)
        numpy.testing.assert_allclose(w, P.T @ u, rtol=1e-13, atol=1e-13)


def test_a_prolongation_that_is_no_tensor_product_is_refused():
    fine, coarse, P = box_transfers((8, 8, 8), (False,) * 3, (1.0, 1.0, 1.0))[0]
    changed = P.copy()
    changed.data[5] += 0.1
    aggregates = numpy.random.default_rng(4).integers(0, P.shape[1], P.shape[0])  # a tentative prolongation
    aggregation = scipy.sparse.csr_matrix((numpy.ones(P.shape[0]), (numpy.arange(P.shape[0]), aggregates)),
                                          shape=P.shape)
    for matrix in (changed, aggregation):
        assert TensorTransfer.between(matrix, fine.shape, coarse.shape, numpy) is None
    assert TensorTransfer.between(P, fine.shape, (4, 4, 2), numpy) is None  # the wrong grid


@pytest.mark.parametrize("value_type", [numpy.float64, numpy.float32])
def test_geometric_levels_cycled_as_stencils_give_the_sell_cycle(value_type):
    """GeometricMultigrid with its grids (stencil products on every level)
    against the same hierarchy without them (SELL and warp-per-row CSR)."""
    shape, periodic, lengths = (8, 8, 16), (False,) * 3, (1.0, 1.0, 2.0)
    grids = hierarchy(BoxPartition(shape, [[n] for n in shape], periodic), lengths)
    A = box_laplacian(shape, periodic, lengths)
    coarse = [box_laplacian(g.shape, periodic, lengths) for g in grids[1:]]
    prolongations = [interpolation(fine, crs, 0) for fine, crs in zip(grids, grids[1:])]
    b = numpy.random.default_rng(1).standard_normal(A.shape[0])
    b -= b.mean()
    results = []
    for given in (None, [(g.shape, g.periodic) for g in grids]):
        amg = GeometricMultigrid(A.indptr, A.indices, A.data, A.shape[0], numpy, coarse, prolongations,
                                 value_dtype=value_type, grids=given)
        assert all(isinstance(level.A_cycle, StencilMatrix) == (given is not None) for level in amg.levels[:-1])
        assert all(isinstance(level.P, TensorTransfer) == isinstance(level.R, TensorTransfer) == (given is not None)
                   for level in amg.levels[:-1])
        x = numpy.empty_like(b)
        amg.apply(b, x)
        results.append(x)
        amg.refresh(2.0 * A.data)
        amg.apply(b, x)
        results.append(2.0 * x)
    numpy.testing.assert_allclose(results[2], results[0], rtol=1e-5 if value_type is numpy.float32 else 1e-11)
    numpy.testing.assert_allclose(results[3], results[1], rtol=1e-5 if value_type is numpy.float32 else 1e-11)
