"""Boundary conditions by group (plugin.flow.boundary): inflow, outflow and
slip beside walls, on boxes and unstructured meshes. The operator identities
with all four kinds at once, flows the scheme must keep exactly, the
numbering of outflow faces across ranks, and the options."""

import numpy
import pytest
import scipy.sparse
import scipy.sparse.linalg
from petsc4py import PETSc

import plugin  # noqa: F401
from gpu_mats.backend import to_host
from meshes import MESHES, channel_groups, regrouped, unit_mesh
from petsc_ext.options import OptionError, option_defaults
from plugin.flow.boundary import Inflow, Outflow, Slip, Wall, parse_condition
from plugin.flow.box import BoxPartition, box_geometry, partition_geometry
from plugin.flow.checkpoint import face_pairs
from plugin.flow.mesh import mesh_geometry, rank_geometry
from plugin.flow.partition import coordinate_bisection
from plugin.flow.faces import stacked_index
from plugin.flow.operators import FlowOperators
from plugin.flow.solver import FlowSolver
from test_flow_operators import GEOMETRIES
from test_flow_solver import make_solver


def swirl(x, t):
    """An inflow velocity that varies over the face: (1 + y, x - 0.5[, 0.3 z])."""
    u = numpy.zeros_like(x)
    u[:, 0] = 1.0 + x[:, 1]
    u[:, 1] = x[:, 0] - 0.5
    if x.shape[1] == 3:
        u[:, 2] = 0.3 * x[:, 2]
    return u


def mixed_conditions(dim):
    return {"inlet": Inflow(swirl), "outlet": Outflow(), "slip": Slip(), "wall": Wall(tuple(numpy.eye(dim)[-1]))}


def channel(geometry):
    """``geometry`` with the groups of tests/meshes.channel_groups, and the conditions of each kind it got."""
    g = regrouped(geometry, channel_groups)
    return g, {name: condition for name, condition in mixed_conditions(g.dim).items() if name in g.boundary_names}


@pytest.fixture(params=GEOMETRIES)
def open_ops(request, tmp_path_factory):
    """Every geometry of the operator tests, with inlet, outlet, slip and walls."""
    g, conditions = channel(GEOMETRIES[request.param](tmp_path_factory.mktemp("mesh")))
    if g.boundary_cells.size == 0:
        pytest.skip("a periodic box has no boundary")
    return FlowOperators(g, 0.01, {g.boundary_names[name]: c for name, c in conditions.items()})


def test_open_boundaries_keep_the_operator_identities(open_ops):
    """L = Ms Gs, symmetric and, with an outflow, negative definite; G = -Omega^-1 (Ms Gamma)^T
    with the outflow faces in M; D symmetric positive definite; the slip term symmetric
    positive semidefinite."""
    ops = open_ops
    L = ops.L.toarray()
    numpy.testing.assert_allclose(L, (ops.Ms @ ops.Gs).toarray(), rtol=1e-14, atol=1e-14 * abs(L).max())
    numpy.testing.assert_array_equal(L, L.T)
    eigenvalues = numpy.linalg.eigvalsh(L)
    assert ops.has_outflow == ("outlet" in ops.geometry.boundary_names)
    if ops.has_outflow:
        assert eigenvalues.max() < -1e-10 * abs(eigenvalues).max()  # no null space
    M = (ops.Ms @ ops.Gamma).toarray()
    numpy.testing.assert_allclose(numpy.tile(ops.volumes, ops.dim)[:, None] * ops.G.toarray(), -M.T, atol=1e-15)
    D = ops.D.toarray()
    numpy.testing.assert_array_equal(D, D.T)
    assert numpy.linalg.eigvalsh(D).min() > 0
    if ops.normal_term is not None:  # the symmetric scheme's: the slip faces' alone
        S = ops.normal_term.toarray()
        numpy.testing.assert_allclose(S, S.T, rtol=0, atol=1e-15 * abs(S).max())
        assert numpy.linalg.eigvalsh(S).min() > -1e-12 * abs(S).max()


def test_convection_gives_energy_only_to_the_open_boundaries(open_ops, rng):
    """C + C^T = diag(Ms u_s) + diag(outflow fluxes) for any face velocities; for
    face velocities that balance the inflow (Ms u_s + f = 0) that is
    diag(outflow fluxes - inflow fluxes): energy leaves through open faces."""
    ops = open_ops
    open_ids = ops.faces.open_ids
    outflow = ops.Ms[:, open_ids] if len(open_ids) else scipy.sparse.csr_matrix((ops.geometry.num_cells, 0))
    u_s = rng.standard_normal(ops.num_faces)
    C = ops.convection(u_s)
    numpy.testing.assert_allclose((C + C.T).toarray(), numpy.diag(ops.Ms @ u_s + outflow @ u_s[open_ids]), atol=1e-13)
    if not ops.has_outflow:
        return
    inflow = ops.inflow_flux(0.0)
    phi = scipy.sparse.linalg.spsolve(ops.L.tocsc(), ops.Ms @ u_s + inflow)
    u_s = u_s - ops.Gs @ phi  # Ms u_s + f = 0, L nonsingular
    numpy.testing.assert_allclose(ops.Ms @ u_s + inflow, 0, atol=1e-10)
    C = ops.convection(u_s)
    numpy.testing.assert_allclose((C + C.T).toarray(), numpy.diag(outflow @ u_s[open_ids] - inflow), atol=1e-10)


def test_inflow_gives_its_flux_and_momentum_and_walls_their_velocity():
    g = box_geometry((4, 2), (2.0, 1.0), (False, False))
    ops = FlowOperators(g, 0.1, {0: Inflow((2.0, 0.5)), 1: Outflow(), 2: Wall((3.0, 0.0)), 3: Slip()})
    inlet = g.boundary_cells[g.boundary_tags == 0]
    bottom = g.boundary_cells[g.boundary_tags == 2]
    area, half = 0.5, 0.25  # inlet face height, half a cell's width
    flux = ops.inflow_flux(0.0)
    numpy.testing.assert_allclose(flux[inlet], -2.0 * area)  # flows in: negative out of the cell
    assert not numpy.delete(flux, inlet).any()
    source = ops.momentum_source(0.0)
    # inlet: nu A / delta u_b + (inflowing flux) u_b; bottom wall: nu A / delta u_b
    expected_inlet = (0.1 * area / half + 2.0 * area) * numpy.array([2.0, 0.5])
    corner = numpy.intersect1d(inlet, bottom)
    for cell in inlet:
        wall = 0.1 * area / 0.25 * numpy.array([3.0, 0.0]) if cell in corner else 0.0
        numpy.testing.assert_allclose(source[:, cell], expected_inlet + wall)


@pytest.mark.parametrize("name", MESHES)
@pytest.mark.parametrize("pressure", [0.0, 2.5])
@pytest.mark.parametrize("scheme", ["symmetric", "consistent"])
def test_uniform_flow_between_slip_walls_is_kept_to_rounding(name, pressure, scheme):
    """Uniform inflow, an outflow at pressure p_b and slip walls on every other side:
    u = (1, 0[, 0]) and p = p_b are the exact solution and the scheme keeps them on
    any mesh (the fluxes of uniform velocity cancel in every closed cell). The
    run starts from that state: the consistent scheme's deferred pressure
    correction takes the pressure guess's error into the first steps."""
    kinds, jitter = MESHES[name]
    g = regrouped(mesh_geometry(unit_mesh(kinds, n=3, jitter=jitter)), channel_groups)
    along = tuple(numpy.eye(g.dim)[0])
    conditions = {name: Slip() for name in g.boundary_names}
    conditions.update(inlet=Inflow(along), outlet=Outflow(pressure))
    with option_defaults("", {"flow_max_steps": 5, "pressure_ksp_rtol": 1e-13, "pressure_ksp_type": "cg",
                              "pressure_pc_type": "jacobi", "flow_scheme": scheme}):
        solver = FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, conditions)
    start = solver.initial_state(numpy.repeat(numpy.array(along)[:, None], g.num_cells, axis=1))
    start.p[...] = pressure
    state = solver.run(start)
    assert state.step == 5
    numpy.testing.assert_allclose(to_host(solver.xp, state.u), numpy.array(along)[:, None] + 0 * g.volumes,
                                  rtol=0, atol=1e-10)
    numpy.testing.assert_allclose(to_host(solver.xp, state.p), pressure, rtol=0, atol=1e-9)
    assert solver.stepper.divergence_norm(state) < 1e-12


def poiseuille_box(options, nx=24, ny=8):
    """A 3 x 1 channel on a DMDA: the parabola 4 y (1 - y) flows in at xmin, out at xmax."""
    profile = Inflow(lambda x, t: numpy.column_stack([4 * x[:, 1] * (1 - x[:, 1]), 0 * x[:, 1]]))
    conditions = {"xmin": profile, "xmax": Outflow()}
    return make_solver((nx, ny), (False, False), 0.05, options, walls=conditions, lengths=(3.0, 1.0),
                       mat_type="aij")


def developed_profile(ny, flux, nu):
    """The fully developed channel flow of the scheme with ny cells across a unit
    height: -nu u'' = -dp/dx by the cell-centred three-point difference, walls at
    half a cell; (profile at the cell centres, dp/dx) scaled to carry ``flux``."""
    h = 1.0 / ny
    A = (numpy.diag(numpy.full(ny, 2.0)) - numpy.diag(numpy.ones(ny - 1), 1) - numpy.diag(numpy.ones(ny - 1), -1))
    A[0, 0] = A[-1, -1] = 3.0  # the wall at h / 2
    unit = numpy.linalg.solve(nu * A / h**2, numpy.ones(ny))  # the profile of dp/dx = -1
    scale = flux / (unit.sum() * h)
    return scale * unit, -scale


@pytest.mark.parametrize("diffusion", ["explicit", "implicit"])
def test_poiseuille_flow_on_a_box_develops_to_the_steady_equations(diffusion):
    """Run to a steady state: the discrete steady momentum equations hold at every
    cell (with Crank-Nicolson too: the incremental pressure correction leaves no
    dt/2 D G p behind, which was 25% of the wall cells' terms); the outlet profile
    and the pressure gradient are the scheme's fully developed ones for the
    inflow's flux, and that profile is the parabola to 1.5% with 8 cells across."""
    _, solver = poiseuille_box({"flow_t_end": 60.0, "flow_steady_tol": 1e-7, "flow_diffusion": diffusion,
                                "pressure_ksp_rtol": 1e-12})
    state = solver.run(solver.initial_state())
    ops, g = solver.operators, solver.geometry
    u, p, u_s = (to_host(solver.xp, a) for a in (state.u, state.p, state.u_s))
    C = ops.convection(u_s)
    gradient = (ops.G @ p).reshape(2, -1)
    residual = ops.momentum_source(state.t) - (C @ u.T).T - (ops.D @ u.T).T - g.volumes * gradient
    assert abs(residual).max() < 1e-5 * abs((ops.D @ u.T)).max()
    x, y = g.centroids.T
    outlet = x > 3.0 - 1.0 / 8
    profile, slope = developed_profile(8, -ops.inflow_flux(0.0).sum(), 0.05)
    numpy.testing.assert_allclose(u[0, outlet], profile, rtol=1e-5)
    numpy.testing.assert_allclose(u[0, outlet], 4 * y[outlet] * (1 - y[outlet]), rtol=0, atol=0.015)
    assert abs(u[1, outlet]).max() < 1e-6
    developed = (x > 2.0) & (x < 2.9)
    assert numpy.polyfit(x[developed], p[developed], 1)[0] == pytest.approx(slope, rel=1e-4)


def test_time_dependent_inflow_keeps_the_divergence_zero_every_step():
    """An inflow whose speed changes in time: every step's face velocities
    balance the inflow of the step's end, Ms u_s + f(t) = 0."""
    pulse = Inflow(lambda x, t: numpy.column_stack([(1 + numpy.sin(3 * t)) * x[:, 1] * (1 - x[:, 1]),
                                                    0 * x[:, 1]]), steady=False)
    _, solver = make_solver((12, 6), (False, False), 0.02, {"flow_max_steps": 1, "pressure_ksp_rtol": 1e-12},
                            walls={"xmin": pulse, "xmax": Outflow()}, lengths=(2.0, 1.0), mat_type="aij")
    g = solver.geometry
    inlet = g.boundary_tags == g.boundary_names["xmin"]
    y = g.boundary_centroids[inlet, 1]
    profile_flux = (g.boundary_areas[inlet] * y * (1 - y)).sum()  # the faces' midpoint rule
    state = solver.initial_state()
    fluxes = []
    for _ in range(6):
        state = solver.run(state)
        assert solver.stepper.divergence_norm(state) < 1e-10
        inflow = -solver.operators.inflow_flux(state.t).sum()
        assert inflow == pytest.approx((1 + numpy.sin(3 * state.t)) * profile_flux, rel=1e-12)
        fluxes.append(inflow)
    assert numpy.ptp(fluxes) > 0.01  # the inflow did change


def test_an_unsteady_inflow_keeps_its_values_and_vecs_in_the_same_arrays_every_step():
    """BoundarySources writes each time's values into the same arrays, so
    that the Vecs PETSc's products wrap over them are made once: with a new
    array a step, each step made a Vec that kept its array alive (2D-3's run
    grew by its cells' values a step until the host ran out of memory)."""
    pulse = Inflow(lambda x, t: numpy.column_stack([(1 + numpy.sin(3 * t)) * x[:, 1] * (1 - x[:, 1]),
                                                    0 * x[:, 1]]), steady=False)
    _, solver = make_solver((12, 6), (False, False), 0.02, {"flow_max_steps": 2}, walls={"xmin": pulse,
                            "xmax": Outflow()}, lengths=(2.0, 1.0), mat_type="aij")
    boundary, ops = solver.stepper.boundary, solver.operators
    first = boundary(0.1)
    inflow = first[1].copy()
    again = boundary(0.4)
    assert all(a is b for a, b in zip(first, again))
    cells = ops.boundary_to_cells @ ops.boundary_values(0.4, ops.boundary_velocity(0.4)).T
    numpy.testing.assert_allclose(again[1], cells[:, ops.dim], rtol=1e-14, atol=1e-16)
    assert abs(again[1] - inflow).max() > 0.01 * abs(inflow).max()
    state = solver.run(solver.initial_state())
    vecs = len(solver.matrices.vecs._vecs)
    for _ in range(3):
        state = solver.run(state)
    assert len(solver.matrices.vecs._vecs) == vecs


def test_backflow_through_an_outflow_brings_no_momentum():
    """C's values from face velocities with fluid flowing back in through the
    outflow: that face's term is left out (max(F, 0)), so C + C^T stays
    positive semidefinite where Ms u_s + f = 0."""
    _, solver = poiseuille_box({"flow_max_steps": 0}, nx=6, ny=4)
    ops, m = solver.operators, solver.matrices
    rng = numpy.random.default_rng(7)
    u_s = 10 * rng.standard_normal(ops.num_faces)  # eddies much stronger than the inflow
    phi = scipy.sparse.linalg.spsolve(ops.L.tocsc(), ops.Ms @ u_s + ops.inflow_flux(0.0))
    u_s -= ops.Gs @ phi
    assert (u_s[ops.open_faces] < 0).any() and (u_s[ops.open_faces] > 0).any()
    m.refresh_convection(u_s)
    indptr, indices, values = m.mats["C"].getValuesCSR()
    C = scipy.sparse.csr_matrix((values, indices, indptr), shape=ops.L.shape).toarray()
    clipped = u_s.copy()
    clipped[ops.open_faces] = numpy.maximum(u_s[ops.open_faces], 0)
    numpy.testing.assert_allclose(C, ops.convection(clipped).toarray(), atol=1e-14)
    assert numpy.linalg.eigvalsh(C + C.T).min() > -1e-12


def _renumbering(serial, ranks):
    """(cells, faces, stacked): where each serial cell, flux face and velocity entry sits among the ranks'."""
    g0 = ranks[0].geometry
    natural = numpy.concatenate([ops.geometry.cell_numbers for ops in ranks])  # rank-order cell -> natural
    cell = numpy.empty(len(natural), dtype=numpy.int64)
    cell[natural] = numpy.arange(len(natural))  # natural cell -> rank-order number
    n = len(natural)

    def keys(pairs, to_natural):
        first = to_natural[pairs[:, 0]]
        second = numpy.where(pairs[:, 1] < n, to_natural[numpy.minimum(pairs[:, 1], n - 1)], pairs[:, 1])
        low, high = numpy.minimum(first, second), numpy.maximum(first, second)
        return low * (2 * n + 10) + high

    serial_keys = keys(face_pairs(serial), serial.geometry.cell_numbers)
    rank_keys = numpy.concatenate([keys(face_pairs(ops), natural) for ops in ranks])
    order = numpy.argsort(rank_keys)
    face = order[numpy.searchsorted(rank_keys[order], serial_keys)]
    assert (rank_keys[face] == serial_keys).all()
    serial_cell = cell[serial.geometry.cell_numbers]
    dim = g0.dim
    stacked = numpy.concatenate([stacked_index(g0.cell_ranges, d, dim, serial_cell) for d in range(dim)])
    return serial_cell, face, stacked


def _assert_assembled_alike(serial, ranks, rng):
    cell, face, stacked = _renumbering(serial, ranks)

    def compare(name, rows, cols):
        gathered = scipy.sparse.vstack([getattr(ops, name) for ops in ranks]).toarray()
        numpy.testing.assert_allclose(gathered[numpy.ix_(rows, cols)], getattr(serial, name).toarray(), atol=1e-14,
                                      err_msg=name)

    for name, rows, cols in (("L", cell, cell), ("D", cell, cell), ("Ms", cell, face), ("Gs", face, cell),
                             ("Gamma", face, stacked), ("G", stacked, cell), ("flux_rate", cell, face)):
        compare(name, rows, cols)
    u_s = rng.standard_normal(len(face))
    scattered = numpy.empty_like(u_s)
    scattered[face] = u_s
    C = scipy.sparse.vstack([ops.convection(scattered) for ops in ranks]).toarray()
    numpy.testing.assert_allclose(C[numpy.ix_(cell, cell)], serial.convection(u_s).toarray(), atol=1e-14)
    for name in ("momentum_source", "inflow_flux"):
        gathered = numpy.concatenate([getattr(ops, name)(0.0) for ops in ranks], axis=-1)
        numpy.testing.assert_allclose(gathered[..., cell], getattr(serial, name)(0.0), atol=1e-14, err_msg=name)


def test_ranks_number_the_outflow_faces_of_a_box_after_their_own():
    shape, splits, lengths = (6, 5), ([2, 2, 2], [2, 3]), (2.0, 1.0)
    conditions = {0: Inflow(swirl), 1: Outflow(), 2: Slip(), 3: Wall((1.0, 0.0))}
    serial = FlowOperators(box_geometry(shape, lengths, (False, False)), 0.02, conditions)
    split = BoxPartition(shape, splits, (False, False))
    ranks = [FlowOperators(partition_geometry(split, lengths, r), 0.02, conditions) for r in range(split.size)]
    assert [ops.faces.count for ops in ranks] == list(numpy.diff(ranks[0].faces.ranges))
    assert ranks[0].faces.total == serial.faces.total == serial.geometry.num_faces + 5  # the xmax side's faces
    _assert_assembled_alike(serial, ranks, numpy.random.default_rng(3))


@pytest.mark.parametrize("name, parts", [("triangles-and-quads", 3), ("prisms", 2)])
def test_ranks_assemble_the_open_operators_of_the_whole_mesh(name, parts):
    kinds, jitter = MESHES[name]
    whole, conditions = channel(mesh_geometry(unit_mesh(kinds, n=3, jitter=jitter)))
    by_tag = {whole.boundary_names[name]: c for name, c in conditions.items()}
    serial = FlowOperators(whole, 0.02, by_tag)
    owner = coordinate_bisection(whole.centroids, parts)
    ranks = [FlowOperators(rank_geometry(whole, owner, rank), 0.02, by_tag) for rank in range(parts)]
    _assert_assembled_alike(serial, ranks, numpy.random.default_rng(4))


def test_options_set_a_groups_condition():
    options = {"flow_max_steps": 0, "flow_bc_xmax": "outflow:1.5", "flow_bc_xmin": "inflow:1,0",
               "flow_bc_ymin": "slip", "flow_bc_ymax": "wall:0.5,0"}
    _, solver = make_solver((6, 4), (False, False), 0.01, options, mat_type="aij")
    assert solver.describe_conditions() == ("xmin: inflow at (1.0, 0.0), xmax: outflow at pressure 1.5, "
                                            "ymin: slip, ymax: wall moving at (0.5, 0.0)")
    assert solver.operators.has_outflow and not solver.matrices.poisson.getNullSpace()
    _, walled = make_solver((6, 4), (False, False), 0.01, {"flow_max_steps": 0}, mat_type="aij")
    assert walled.matrices.poisson.getNullSpace()  # all walls: the constant


@pytest.mark.parametrize("value, message", [
    ("outflow", r"-flow_bc_lid: the mesh has no boundary group 'lid' \(groups: xmin \(tag 0\), xmax \(tag 1\), "
                r"ymin \(tag 2\), ymax \(tag 3\)\)"),
])
def test_a_group_the_mesh_lacks_is_an_error_listing_its_groups(value, message):
    with pytest.raises(OptionError, match=message):
        make_solver((6, 4), (False, False), 0.01, {"flow_max_steps": 0, "flow_bc_lid": value}, mat_type="aij")


@pytest.mark.parametrize("text, message", [
    ("door", "the kind must be one of wall, inflow, outflow, slip"),
    ("inflow", "inflow takes 2 values in 2D, got 0"),
    ("wall:1", "wall takes 0 or 2 values in 2D, got 1"),
    ("outflow:a", "the values after ':' must be numbers"),
    ("slip:1", "slip takes 0 values in 2D, got 1"),
])
def test_a_condition_written_wrong_is_an_error_saying_what_is_wrong(text, message):
    with pytest.raises(OptionError, match=message):
        parse_condition("-flow_bc_xmin", text, 2)


def test_pressure_multigrid_holds_the_outflow_pressure_on_every_level():
    """-pressure_pc_type mg on a channel: the levels are nonsingular like the
    pressure matrix (a singular coarse level would stall), and the run ends
    where gamg's does."""
    fields = []
    for pc in ("mg", "gamg"):
        _, solver = poiseuille_box({"flow_max_steps": 6, "pressure_ksp_type": "cg", "pressure_pc_type": pc,
                                    "pressure_ksp_rtol": 1e-12}, nx=32, ny=16)
        state = solver.run(solver.initial_state())
        assert solver.stepper.pressure_iterations < 20
        fields.append(to_host(solver.xp, state.u))
    numpy.testing.assert_allclose(fields[0], fields[1], rtol=0, atol=1e-9)
