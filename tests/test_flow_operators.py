"""The operators of the symmetry-preserving scheme (plugin.flow.operators) on
box geometries: the discrete identities seed 000 builds on, and consistency."""

import numpy
import pytest
import scipy.sparse.linalg

from plugin.flow.geometry import box_geometry
from plugin.flow.operators import FlowOperators

BOXES = [((6, 5), (1.0, 2.0), (False, False)), ((8, 8), (2 * numpy.pi,) * 2, (True, True)),
         ((4, 3, 5), (1.0, 1.0, 0.5), (False, True, False))]


def lid(side):
    return numpy.array([1.0, 0.0]) if side == 3 else numpy.zeros(2)


@pytest.fixture(params=BOXES, ids=["walls2d", "periodic2d", "mixed3d"])
def ops(request):
    return FlowOperators(box_geometry(*request.param), nu=0.01)


def divergence_free(ops, rng):
    """Random face velocities minus their gradient part: Ms u_s = 0 to a direct solve's rounding."""
    u_s = rng.standard_normal(ops.geometry.num_faces)
    L = ops.L.tocsc()
    pinned = L + scipy.sparse.csc_matrix(([1.0], ([0], [0])), shape=L.shape)  # fixes the constant
    phi = scipy.sparse.linalg.spsolve(pinned, ops.Ms @ u_s)
    return u_s - ops.Gs @ phi


def test_box_geometry_counts_and_measures():
    g = box_geometry((4, 3, 5), (1.0, 1.0, 0.5), (False, True, False))
    assert g.volumes.sum() == pytest.approx(0.5)
    faces_per_cell = numpy.bincount(g.face_cells.ravel(), minlength=60) + numpy.bincount(g.boundary_cells, minlength=60)
    assert (faces_per_cell == 6).all()
    assert g.num_faces == 3 * 3 * 5 + 4 * 3 * 5 + 4 * 3 * 4  # x interior, y periodic (all), z interior
    assert numpy.allclose(numpy.bincount(g.boundary_sides), [15, 15, 0, 0, 12, 12])


def test_convection_is_skew_symmetric_up_to_the_divergence(ops, rng):
    u_s = rng.standard_normal(ops.geometry.num_faces)
    C = ops.convection(u_s)
    numpy.testing.assert_allclose((C + C.T).toarray(), numpy.diag(ops.Ms @ u_s), atol=1e-14)
    C = ops.convection(divergence_free(ops, rng))
    assert abs(C + C.T).max() < 1e-12 * abs(C).max()


def test_convection_values_match_a_face_by_face_assembly(ops, rng):
    g, u_s = ops.geometry, rng.standard_normal(ops.geometry.num_faces)
    expected = numpy.zeros((g.num_cells, g.num_cells))
    for (i, j), area, u in zip(g.face_cells, g.face_areas, u_s, strict=True):
        flux = area * u  # out of i, into j
        for row, sign in ((i, 1.0), (j, -1.0)):
            expected[row, i] += sign * flux / 2
            expected[row, j] += sign * flux / 2
    numpy.testing.assert_allclose(ops.convection(u_s).toarray(), expected, atol=1e-14)


def test_diffusion_is_symmetric_positive_definite_and_laplacian_singular(ops):
    D, L = ops.D.toarray(), ops.L.toarray()
    numpy.testing.assert_array_equal(D, D.T)
    numpy.testing.assert_array_equal(L, L.T)
    walls = ops.geometry.boundary_cells.size > 0
    assert numpy.linalg.eigvalsh(D).min() > (0 if walls else -1e-14)
    eigenvalues = numpy.linalg.eigvalsh(L)
    assert eigenvalues.max() < 1e-10 and (abs(eigenvalues) < 1e-10).sum() == 1  # constants only
    numpy.testing.assert_allclose(L @ numpy.ones(len(L)), 0, atol=1e-10)


def test_gradient_is_minus_inverse_volume_times_divergence_transpose(ops):
    for G, M in zip(ops.G, ops.M, strict=True):
        numpy.testing.assert_allclose((ops.volumes[:, None] * G.toarray()), -M.toarray().T, atol=1e-15)


def test_gradient_and_divergence_are_exact_for_linear_fields_inside():
    g = box_geometry((7, 6, 5), (1.0, 2.0, 3.0), (False, False, False))
    ops = FlowOperators(g, nu=1.0)
    slope = numpy.array([0.5, -2.0, 3.0])
    p = g.centroids @ slope
    h = numpy.array([1 / 7, 2 / 6, 3 / 5])
    inside = numpy.all((g.centroids > h) & (g.centroids < numpy.array([1.0, 2.0, 3.0]) - h), axis=1)
    for d in range(3):
        numpy.testing.assert_allclose((ops.G[d] @ p)[inside], slope[d], rtol=1e-12)
    divergence = sum(ops.M[d] @ (slope[d] * g.centroids[:, d]) for d in range(3)) / g.volumes
    numpy.testing.assert_allclose(divergence[inside], slope.sum(), rtol=1e-12)


def test_wall_velocity_enters_diffusion_as_a_source():
    g = box_geometry((4, 4), (1.0, 1.0), (False, False))
    ops = FlowOperators(g, nu=0.1, wall_velocity=lid)
    top = g.centroids[:, 1] > 0.75
    # a cell under the lid: nu * area / (h/2) * 1
    numpy.testing.assert_allclose(ops.wall_source[0][top], 0.1 * 0.25 / 0.125)
    assert not ops.wall_source[0][~top].any() and not ops.wall_source[1].any()
