"""The consistent scheme's operators (plugin.flow.least_squares,
plugin.flow.corrections, plugin.flow.scheme): exact for linear fields on
every cell type, held against a cell-by-cell least-squares solve, the same
operators as the symmetric scheme on a box, and a flow whose face
velocities stay divergence-free."""

import dataclasses
import types

import numpy
import pytest
import scipy.sparse
from petsc4py import PETSc

from meshes import MESHES, unit_mesh
from petsc_ext.options import OptionError, option_defaults
from plugin.flow.boundary import Inflow, Outflow, Wall, conditions_by_tag, walls_at_rest
from plugin.flow.box import box_geometry
from plugin.flow.faces import BoundaryFaces, CellPattern, HalfFaces
from plugin.flow.forces import GroupForce
from plugin.flow.least_squares import BATCH, GradientError, _check, least_squares_gradient
from plugin.flow.mesh import mesh_geometry
from plugin.flow.operators import FlowOperators, host_matrix
from plugin.flow.scheme import PARTS
from plugin.flow.solver import FlowSolver

SELF = PETSc.COMM_SELF


def _meshes():
    return {name: mesh_geometry(unit_mesh(kinds, n=3, jitter=jitter)) for name, (kinds, jitter) in MESHES.items()}


GEOMETRIES = _meshes()


def _gradient(g, fixed_mask):
    """The least-squares gradient with the boundary faces of ``fixed_mask`` given, the rest free."""
    h = HalfFaces.of(g)
    index = numpy.arange(len(g.boundary_cells))
    return least_squares_gradient(g, h, CellPattern(g, h), BoundaryFaces.of(g, index[fixed_mask]),
                                  BoundaryFaces.of(g, index[~fixed_mask]))


@pytest.mark.parametrize("name", GEOMETRIES)
def test_least_squares_gradient_is_exact_for_linear_fields(name):
    g, rng = GEOMETRIES[name], numpy.random.default_rng(3)
    G, S = _gradient(g, numpy.ones(len(g.boundary_cells), bool))
    a = rng.standard_normal(g.dim)
    gradient = (G @ (g.centroids @ a + 0.7) + S @ (g.boundary_centroids @ a + 0.7)).reshape(g.dim, -1)
    numpy.testing.assert_allclose(gradient, numpy.repeat(a[:, None], g.num_cells, axis=1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["triangles", "tetrahedra", "hexahedra-and-prisms"])
def test_least_squares_gradient_matches_a_cell_by_cell_solve(name):
    """Against numpy.linalg.lstsq on each cell's weighted equations, for a random
    field, half the boundary faces given (Dirichlet), half of zero normal gradient."""
    g, rng = GEOMETRIES[name], numpy.random.default_rng(5)
    fixed = rng.random(len(g.boundary_cells)) < 0.5
    G, S = _gradient(g, fixed)
    phi, phi_b = rng.standard_normal(g.num_cells), rng.standard_normal(int(fixed.sum()))
    got = (G @ phi + S @ phi_b).reshape(g.dim, -1)
    given = numpy.flatnonzero(fixed)
    for cell in range(g.num_cells):
        rows, rhs = [], []
        for f, (c0, c1) in enumerate(g.face_cells):
            if cell in (c0, c1):
                other, sign = (c1, 1.0) if c0 == cell else (c0, -1.0)
                rows.append(sign * g.face_offsets[f])
                rhs.append(phi[other] - phi[cell])
        for b in numpy.flatnonzero(g.boundary_cells == cell):
            if fixed[b]:
                rows.append(g.boundary_centroids[b] - g.centroids[cell])
                rhs.append(phi_b[numpy.searchsorted(given, b)] - phi[cell])
            else:
                rows.append(g.boundary_distances[b] * g.boundary_normals[b])
                rhs.append(0.0)
        rows, rhs = numpy.array(rows), numpy.array(rhs)
        weight = 1.0 / numpy.linalg.norm(rows, axis=1)
        expected = numpy.linalg.lstsq(rows * weight[:, None], rhs * weight, rcond=None)[0]
        numpy.testing.assert_allclose(got[:, cell], expected, rtol=1e-10, atol=1e-10)


def test_a_cell_whose_neighbours_lie_on_a_line_is_refused_by_name():
    g = box_geometry((3, 1), (3.0, 1.0), (False, False))
    g = dataclasses.replace(g, boundary_cells=g.boundary_cells[:0], boundary_areas=g.boundary_areas[:0],
                            boundary_normals=g.boundary_normals[:0], boundary_distances=g.boundary_distances[:0],
                            boundary_centroids=g.boundary_centroids[:0], boundary_tags=g.boundary_tags[:0])
    with pytest.raises(GradientError, match=r"cell 0 \(centroid \[0.5 0.5\]\) and 2 more: .*on a line or a plane"):
        _gradient(g, numpy.zeros(0, bool))


@pytest.mark.gpu
def test_the_check_of_millions_of_cells_on_the_gpu_names_a_singular_cell_past_the_first_batch():
    import cupy

    n = 12 * BATCH  # a 3M-cell mesh: cuSOLVER refuses its normal matrices in one batch
    normal = cupy.tile(cupy.eye(3), (n, 1, 1))
    normal[n - 2, 2, 2] = 0.0
    g = types.SimpleNamespace(cell_numbers=numpy.arange(n), centroids=numpy.zeros((n, 3)))
    with pytest.raises(GradientError, match=rf"cell {n - 2} \(centroid \[0\. 0\. 0\.\]\) and 0 more"):
        _check(g, normal)


def _operators(g, scheme, outflow=None):
    """The operators of ``scheme``; "consistent" with every correction, the convected velocities' too."""
    parts = PARTS[scheme] if scheme == "symmetric" else dataclasses.replace(PARTS[scheme], convection_correction=True)
    conditions = {**walls_at_rest(g), **({outflow: Outflow(0.0)} if outflow is not None else {})}
    return FlowOperators(g, 0.01, conditions_by_tag(g, conditions), scheme=parts)


@pytest.mark.parametrize("size", [(5, 4), (4, 3, 5)])
def test_on_a_box_both_schemes_are_the_same_operators(size):
    """A box is orthogonal and unskewed: least squares is Green-Gauss to rounding
    (walls included) and every correction is zero."""
    g = box_geometry(size, (1.0, 2.0, 1.5)[:len(size)], (False,) * len(size))
    symmetric, consistent = _operators(g, "symmetric"), _operators(g, "consistent")
    assert symmetric.normal_term is None and consistent.normal_term is None
    numpy.testing.assert_allclose(host_matrix(consistent.G).toarray(), host_matrix(symmetric.G).toarray(), rtol=0,
                                  atol=1e-12)
    for correction in (consistent.diffusion_correction, consistent.pressure_correction,
                       consistent.skewness_correction, consistent.convection_correction):
        assert abs(correction).max() < 1e-12


@pytest.mark.parametrize("name", GEOMETRIES)
def test_without_the_wall_normal_flux_a_walls_viscous_flux_is_the_tangential_velocitys(name):
    """Continuity makes d u_n / dn zero at a no-slip wall: with
    -flow_wall_normal_flux 0 each wall face takes nu A / delta (I - n n^T) u_i
    from its cell (the normal term), held against a face-by-face sum, and the
    explicit diffusion D + N stays symmetric positive semidefinite; by default
    both schemes keep the two-point flux of every component (no normal term
    without slip faces)."""
    g = GEOMETRIES[name]
    assert _operators(g, "symmetric").normal_term is None and _operators(g, "consistent").normal_term is None
    conditions = conditions_by_tag(g, walls_at_rest(g))
    consistent = FlowOperators(g, 0.01, conditions, scheme=dataclasses.replace(PARTS["consistent"],
                                                                                   wall_normal_flux=False))
    n, dim, nu = g.num_cells, g.dim, consistent.nu
    D, N = host_matrix(consistent.D), host_matrix(consistent.normal_term)
    u = numpy.random.default_rng(3).standard_normal((dim, n))
    expected = numpy.stack([D @ component for component in u])
    for cell, area, distance, normal in zip(g.boundary_cells, g.boundary_areas, g.boundary_distances,
                                            g.boundary_normals, strict=True):  # every face a wall at rest
        expected[:, cell] -= nu * area / distance * (normal @ u[:, cell]) * normal
    got = numpy.concatenate([D @ component for component in u]) + N @ u.ravel()
    numpy.testing.assert_allclose(got, expected.ravel(), rtol=0, atol=1e-13 * abs(expected).max())
    explicit = (scipy.sparse.block_diag([D] * dim) + N).toarray()
    numpy.testing.assert_allclose(explicit, explicit.T, rtol=0, atol=1e-15 * abs(explicit).max())
    assert numpy.linalg.eigvalsh(explicit).min() > -1e-12 * abs(explicit).max()


def test_the_forces_take_the_walls_tangential_viscous_flux_alone():
    """The force on a wall is the momentum its faces take in the discrete
    equations: -flow_wall_normal_flux 0 takes rho nu A / delta (n . u_i) n
    off each face's two-point viscous part, summed face by face here (the
    consistent scheme keeps the flux by default)."""
    g = GEOMETRIES["tetrahedra"]
    lid = tuple(numpy.eye(g.dim)[0])
    forces, state = {}, None
    for flux in (True, False):
        with option_defaults("", {"flow_max_steps": 4, "flow_scheme": "consistent",
                                  "flow_wall_normal_flux": flux}):
            solver = FlowSolver(g, SELF, "aij", 0.01, {"lid": Wall(lid), "wall": Wall()})
        assert solver.scheme_parts.wall_normal_flux == flux
        state = state or solver.run(solver.initial_state())  # one state, both solvers' forces on it
        forces[flux] = GroupForce(solver, "wall")(state)
        solver.destroy()
    u = numpy.asarray(state.u)
    faces = numpy.flatnonzero(g.boundary_tags == g.boundary_names["wall"])
    normals, cells = g.boundary_normals[faces], g.boundary_cells[faces]
    normal_parts = 0.01 * g.boundary_areas[faces] / g.boundary_distances[faces] * (normals * u[:, cells].T).sum(1)
    assert abs(normal_parts).max() > 0
    numpy.testing.assert_allclose(forces[False], forces[True] - normal_parts @ normals, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", GEOMETRIES)
def test_corrected_face_terms_are_exact_for_linear_fields(name):
    """Gs p + T grad p = n . grad p on every interior and outflow face, and
    Gamma u + K grad u = n . u at every face's centroid, for linear p and u
    with their exact gradients."""
    g, rng = GEOMETRIES[name], numpy.random.default_rng(7)
    ops = _operators(g, "consistent", outflow=g.boundary_names["wall"])
    a, A, b = rng.standard_normal(g.dim), rng.standard_normal((g.dim, g.dim)), rng.standard_normal(g.dim)
    out = numpy.flatnonzero(g.boundary_tags == g.boundary_names["wall"])
    normals = numpy.vstack((g.face_normals, g.boundary_normals[out]))
    centroids = numpy.vstack((g.centroids[g.face_cells[:, 0]] + g.face_centre_offsets, g.boundary_centroids[out]))

    pressure = g.centroids @ a  # an outflow holds p = 0 at its faces: b_p enters as Gs's source
    face_gradient = ops.Gs @ pressure + ops.pressure_correction @ numpy.repeat(a, g.num_cells)
    face_gradient[ops.open_faces] += (g.boundary_centroids[out] @ a) / g.boundary_distances[out]
    numpy.testing.assert_allclose(face_gradient, normals @ a, rtol=0, atol=1e-11)

    u = (g.centroids @ A.T + b).T
    gradients = numpy.repeat(A[:, :, None], g.num_cells, axis=2)  # (component, direction, cell)
    face_velocity = ops.Gamma @ u.ravel() + ops.skewness_correction @ gradients.ravel()
    numpy.testing.assert_allclose(face_velocity, numpy.einsum("fe,fe->f", normals, centroids @ A.T + b), rtol=0,
                                  atol=1e-12)


@pytest.mark.parametrize("name", GEOMETRIES)
def test_corrected_convection_carries_the_velocity_at_the_face_centroids(name):
    """C(u_s) u + Ms (u_s Kc grad u) = sum_f A_f u_s,f u(x_f) out of each
    cell for a linear u with its exact gradient and any face velocities u_s,
    summed here face by face (an outflow face carries its cell's velocity)."""
    g, rng = GEOMETRIES[name], numpy.random.default_rng(11)
    ops = _operators(g, "consistent", outflow=g.boundary_names["wall"])
    A, b = rng.standard_normal((g.dim, g.dim)), rng.standard_normal(g.dim)
    u_s = rng.standard_normal(ops.num_faces)
    u = (g.centroids @ A.T + b).T
    gradients = numpy.repeat(A[:, :, None], g.num_cells, axis=2)
    skewed = (ops.convection_correction @ gradients.ravel()).reshape(g.dim, -1) * u_s
    Ms, C = host_matrix(ops.Ms), host_matrix(ops.convection(u_s))
    got = numpy.array([C @ u[e] + Ms @ skewed[e] for e in range(g.dim)])

    expected = numpy.zeros_like(u)
    for f, (c0, c1) in enumerate(g.face_cells):  # interior faces first among the flux faces
        flux = g.face_areas[f] * u_s[f] * (A @ (g.centroids[c0] + g.face_centre_offsets[f]) + b)
        expected[:, c0] += flux
        expected[:, c1] -= flux
    out = numpy.flatnonzero(g.boundary_tags == g.boundary_names["wall"])
    for face, b_face in zip(ops.open_faces, out, strict=True):
        cell = g.boundary_cells[b_face]
        expected[:, cell] += g.boundary_areas[b_face] * u_s[face] * u[:, cell]
    numpy.testing.assert_allclose(got, expected, rtol=0, atol=1e-11 * abs(expected).max())


@pytest.mark.parametrize("name", GEOMETRIES)
def test_the_convection_correction_takes_face_velocities_up_to_nu_over_the_offset(name):
    """convection_cap = nu / |x_f - (x_0 + x_1) / 2| on each interior face,
    unbounded on outflow faces; on a box every face is unbounded."""
    g = GEOMETRIES[name]
    ops = _operators(g, "consistent", outflow=g.boundary_names["wall"])
    offsets = numpy.linalg.norm(g.face_centre_offsets - 0.5 * g.face_offsets, axis=1)
    assert offsets.min() > 0
    numpy.testing.assert_allclose(ops.convection_cap[:len(offsets)], 0.01 / offsets, rtol=1e-14, atol=0)
    assert numpy.isinf(ops.convection_cap[ops.open_faces]).all() and ops.open_faces.size
    box = _operators(box_geometry((4, 3), (1.0, 2.0), (False, False)), "consistent")
    assert numpy.isinf(box.convection_cap).all()


@pytest.mark.parametrize("correctors, convection", [(0, False), (1, False), (0, True)])
def test_a_consistent_flow_keeps_its_face_velocities_divergence_free(correctors, convection):
    """The deferred correction goes into the face velocities and the right-hand
    side alike: Ms u_s = 0 to the solver's tolerance, with or without correctors
    (and with the convected velocities' correction, which the step applies)."""
    g = GEOMETRIES["tetrahedra"]
    lid = tuple(numpy.eye(g.dim)[0])
    with option_defaults("", {"flow_max_steps": 6, "pressure_ksp_rtol": 1e-12, "flow_scheme": "consistent",
                              "flow_pressure_correctors": correctors, "flow_convection_skewness": convection}):
        solver = FlowSolver(g, SELF, "aij", 0.01, {"lid": Wall(lid), "wall": Wall()})
    assert solver.scheme_parts == dataclasses.replace(PARTS["consistent"], pressure_correctors=correctors,
                                                      convection_correction=convection)
    assert (solver.stepper.convected is not None) == convection
    assert solver.scheme_parts.skewness_correction and solver.scheme_parts.face_memory
    state = solver.run(solver.initial_state())
    Ms, u_s = host_matrix(solver.operators.Ms), numpy.asarray(state.u_s)
    assert numpy.isfinite(state.u).all() and abs(Ms @ u_s).max() < 1e-9 * (abs(Ms) @ abs(u_s)).max()


@pytest.mark.parametrize("name", GEOMETRIES)
def test_the_face_memory_takes_each_flux_faces_diffusion_number(name):
    """face_diffusion is nu / delta^2 on every flux face, outflow faces too
    (delta from the centroid to the face): read back from Gs, whose row of a
    face holds +-1 / delta."""
    g = GEOMETRIES[name]
    ops = _operators(g, "consistent", outflow=g.boundary_names["wall"])
    assert ops.open_faces.size
    inverse = numpy.asarray(abs(ops.Gs).max(axis=1).todense()).ravel()
    numpy.testing.assert_allclose(ops.face_diffusion, 0.01 * inverse**2, rtol=1e-13)


def test_the_wide_laplacian_needs_the_symmetric_scheme():
    g = GEOMETRIES["triangles"]
    with option_defaults("", {"flow_pressure_laplacian": "wide", "flow_scheme": "consistent"}):
        with pytest.raises(OptionError, match="needs -flow_scheme symmetric"):
            FlowSolver(g, SELF, "aij", 0.01, {"lid": Wall((1.0, 0.0)), "wall": Wall()})


def test_the_wide_laplacian_takes_either_rhie_chow_coefficient():
    """-flow_implicit_rhie_chow is a part of the time step, not of the duality
    the wide Laplacian needs: off, the symmetric scheme still takes it."""
    g = GEOMETRIES["triangles"]
    with option_defaults("", {"flow_pressure_laplacian": "wide", "flow_implicit_rhie_chow": False}):
        solver = FlowSolver(g, SELF, "aij", 0.01, {"lid": Wall((1.0, 0.0)), "wall": Wall()})
    assert not solver.scheme_parts.implicit_rhie_chow
    assert PARTS["symmetric"].implicit_rhie_chow and not PARTS["consistent"].implicit_rhie_chow


def test_an_unknown_scheme_lists_the_choices():
    g = GEOMETRIES["triangles"]
    with option_defaults("", {"flow_scheme": "exact"}):
        with pytest.raises(OptionError, match="symmetric, consistent"):
            FlowSolver(g, SELF, "aij", 0.01, {"lid": Wall((1.0, 0.0)), "wall": Wall()})


@pytest.mark.parametrize("name", ["triangles", "tetrahedra", "hexahedra-and-prisms"])
def test_an_interior_wall_gradient_is_exact_for_a_pressure_with_a_normal_gradient_at_walls(name):
    """-flow_wall_pressure_gradient interior: a boundary cell whose neighbours
    span every direction drops the walls' zero-normal-gradient equations, so
    its gradient of a linear pressure is exact, where with them it is not."""
    g = mesh_geometry(unit_mesh(MESHES[name][0], n=6, jitter=MESHES[name][1]))
    h, a = HalfFaces.of(g), numpy.array([0.3, -1.1, 0.7][:g.dim])
    walls = BoundaryFaces.of(g, numpy.arange(len(g.boundary_cells)))
    none = BoundaryFaces.of(g, numpy.arange(0))
    p = g.centroids @ a
    interior, _ = least_squares_gradient(g, h, CellPattern(g, h), none, walls, free_where_needed=True)
    zero, _ = least_squares_gradient(g, h, CellPattern(g, h), none, walls)
    exact = numpy.all(abs((interior @ p).reshape(g.dim, -1).T - a) < 1e-10, axis=1)
    boundary = numpy.unique(g.boundary_cells)
    assert exact[numpy.setdiff1d(numpy.arange(g.num_cells), boundary)].all()
    assert exact[boundary].sum() > len(boundary) // 2  # the corners keep the walls' equations
    assert not numpy.all(abs((zero @ p).reshape(g.dim, -1).T - a) < 1e-10, axis=1)[boundary].any()


def test_an_interior_wall_gradient_leaves_a_box_unchanged():
    """A box's cells are orthogonal: they keep the walls' equations, and least squares stays Green-Gauss."""
    g = box_geometry((4, 3, 5), (1.0, 0.6, 1.3), (False, False, False))
    h = HalfFaces.of(g)
    walls, none = BoundaryFaces.of(g, numpy.arange(len(g.boundary_cells))), BoundaryFaces.of(g, numpy.arange(0))
    interior, _ = least_squares_gradient(g, h, CellPattern(g, h), none, walls, free_where_needed=True)
    zero, _ = least_squares_gradient(g, h, CellPattern(g, h), none, walls)
    assert abs(interior - zero).max() == 0.0


@pytest.mark.parametrize("name", ["triangles", "tetrahedra"])
def test_u_p_is_interpolated_from_the_held_velocities_of_u_p_plus_its_pressure_part(name):
    """held_difference: u^p = u - c (c = G q*, here constant) with u linear
    and held on the boundary; Gamma u^p + K (grad u^p + held_difference c), the
    gradient taking the held values, is the exact n . (u - c) at every face's
    centroid. Without held_difference c it is not (u^p is not the held
    velocity at the walls)."""
    g = mesh_geometry(unit_mesh(MESHES[name][0], n=5, jitter=MESHES[name][1]))
    dim, n = g.dim, g.num_cells
    slope, c = numpy.arange(1.0, 1.0 + dim * dim).reshape(dim, dim) / 7, numpy.array([0.4, -0.9, 0.2][:dim])

    def velocity(x, t=0.0):
        return x @ slope.T + 0.3

    scheme = dataclasses.replace(PARTS["consistent"], wall_pressure_gradient="interior")
    ops = FlowOperators(g, 1.0, {tag: Inflow(velocity) for tag in g.boundary_names.values()}, numpy, scheme)
    u_p = (velocity(g.centroids) - c).T
    held = velocity(g.boundary_centroids[ops.held.index])
    gradients = numpy.concatenate([ops.velocity_gradient @ u_p[e] for e in range(dim)])
    gradients += (ops.velocity_gradient_source @ held).T.reshape(-1)
    guess = numpy.concatenate([ops.held_difference @ numpy.full(n, c[e]) for e in range(dim)])
    centroids = g.centroids[g.face_cells[:, 0]] + g.face_centre_offsets
    exact = ((velocity(centroids) - c) * g.face_normals).sum(axis=1)
    without = ops.Gamma @ u_p.ravel() + ops.skewness_correction @ gradients
    numpy.testing.assert_allclose(without + ops.skewness_correction @ guess, exact, rtol=0, atol=1e-12)
    assert abs(without - exact).max() > 1e-3
