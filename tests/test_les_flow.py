"""Large-eddy simulation in the flow driver (-flow_les): the eddy viscosity
refreshes the diffusion's values as a face-by-face assembly would make
them, leaves a laminar channel alone where the model must, moves the time
step's diffusion limit, and runs on several ranks as on one."""

import numpy
import pytest
import scipy.sparse
from mpi4py import MPI
from petsc4py import PETSc

import plugin  # noqa: F401
from gpu_mats.backend import to_host
from meshes import unit_mesh
from petsc_ext.options import option_defaults
from plugin.flow.boundary import Inflow, Outflow, Wall
from plugin.flow.box import dmda_partition
from plugin.flow.mesh import mesh_geometry
from plugin.flow.output import natural_field
from plugin.flow.solver import FlowSolver
from test_flow_solver import make_solver

NU = 0.01
LID = {"lid": Wall((1.0, 0.0)), "wall": Wall()}
CHANNEL = {"xmin": Inflow(lambda x, t: numpy.column_stack([4 * x[:, 1] * (1 - x[:, 1]), 0 * x[:, 1]])),
           "xmax": Outflow(), "ymin": Wall(), "ymax": Wall()}


def cavity_on_a_mesh(options, mat_type="gpusell"):
    g = mesh_geometry(unit_mesh(("quad", "triangle"), n=6, jitter=0.3))
    with option_defaults("", {"flow_max_steps": 3, **options}):
        return FlowSolver(g, PETSc.COMM_SELF, mat_type, NU, LID)


def face_by_face(g, nu, nu_t, held_faces):
    """D with nu + (nu_t,i + nu_t,j) / 2 on each interior face and nu on the faces in ``held_faces``
    (boundary face index -> cell), assembled face by face (one rank)."""
    n = g.num_cells
    rows, cols, values = [], [], []
    for (i, j), area, distance in zip(g.face_cells, g.face_areas, g.face_distances):
        c = area / distance * (nu + 0.5 * (nu_t[i] + nu_t[j]))
        rows += [i, i, j, j]
        cols += [i, j, j, i]
        values += [c, -c, c, -c]
    for cell, conductance in held_faces:
        rows.append(cell)
        cols.append(cell)
        values.append(nu * conductance)
    return scipy.sparse.csr_matrix((values, (rows, cols)), shape=(n, n))


@pytest.mark.parametrize("mat_type", ["gpusell", "aij"])
def test_the_diffusion_takes_nu_plus_the_faces_eddy_viscosity(mat_type):
    """After a refresh, K (the explicit diffusion) multiplies as D assembled
    face by face with nu + the mean of the two cells' nu_t, walls with nu."""
    solver = cavity_on_a_mesh({"flow_les": "smagorinsky"}, mat_type)
    g, ops, m, xp = solver.geometry, solver.operators, solver.matrices, solver.xp
    rng = numpy.random.default_rng(7)
    nu_t = rng.uniform(0.0, 0.05, g.num_cells)
    m.refresh_diffusion(xp.asarray(nu_t))
    held = ops.held
    expected = face_by_face(g, NU, nu_t, zip(to_host(ops.xp, held.row), to_host(ops.xp, held.area / held.distance)))
    x = rng.standard_normal((2, g.num_cells))
    y = xp.zeros((2, g.num_cells))
    m.K(xp.asarray(x), y)
    numpy.testing.assert_allclose(to_host(xp, y), (expected @ x.T).T, rtol=1e-12, atol=1e-14)
    m.refresh_diffusion(xp.zeros(g.num_cells))  # nu_t = 0: nu's own D again
    m.K(xp.asarray(x), y)
    numpy.testing.assert_allclose(to_host(xp, y), (host(ops.D) @ x.T).T, rtol=1e-13, atol=1e-15)


def host(matrix):
    return matrix if isinstance(matrix, scipy.sparse.spmatrix) else matrix.get()


def channel(les, sizes=(20, 8), steps=12, comm=PETSc.COMM_SELF, mat_type="gpusell", start=None):
    options = {"flow_max_steps": steps, "flow_les": les, "flow_diffusion": "explicit", "pressure_ksp_rtol": 1e-12,
               "flow_dt": 0.02}  # one dt for all: a subgrid model holds an adaptive one apart from the laminar
    da, solver = make_solver(sizes, (False, False), NU, options, comm=comm, walls=CHANNEL, lengths=(3.0, 1.0),
                             mat_type=mat_type)
    y = solver.geometry.centroids[:, 1]
    u0 = numpy.array([4 * y * (1 - y), 0 * y]) if start is None else start(solver.geometry)
    state = solver.run(solver.initial_state(u0))
    return da, solver, state


def test_wale_and_sigma_leave_a_laminar_channel_alone_and_smagorinsky_does_not():
    """Plane Poiseuille flow is pure shear, where WALE's and Sigma's eddy
    viscosity vanishes (Nicoud and Ducros 1999; Nicoud et al. 2011); Sigma's
    vanishes in every 2D flow. From the parabolic profile, Sigma's run is
    the laminar one to the bit; WALE's sees only the inlet's few cells where
    the discrete flow is not yet pure shear, four orders of magnitude below
    Smagorinsky's |S|, which changes the flow and the diffusion's limit."""
    _, laminar, reference = channel("none")
    u = to_host(laminar.xp, reference.u)
    runs = {}
    for model in ("sigma", "wale", "smagorinsky"):
        _, solver, state = channel(model)
        runs[model] = (to_host(solver.xp, solver.stepper.eddy.nu_t).max(),
                       abs(to_host(solver.xp, state.u) - u).max(), solver._diffusion_rate(state))
    assert runs["sigma"][:2] == (0.0, 0.0) and runs["sigma"][2] == pytest.approx(laminar.diffusion_rate, rel=1e-15)
    (wale, wale_change, _), (smagorinsky, change, rate) = runs["wale"], runs["smagorinsky"]
    assert smagorinsky > 0.05 * NU and change > 1e-3 and rate > 1.01 * laminar.diffusion_rate, runs
    assert 0.0 < wale < 1e-3 * smagorinsky and wale_change < 1e-3 * change, runs


def test_with_crank_nicolson_the_eddy_viscosity_is_explicit_and_the_momentum_matrix_stays():
    """-flow_diffusion implicit: K is D(nu) / 2 plus the whole eddy part, the
    momentum matrix Omega + dt/2 D(nu) keeps its values (and its
    preconditioner), and the eddy viscosity sets an explicit limit on dt."""
    solver = cavity_on_a_mesh({"flow_les": "smagorinsky", "flow_diffusion": "implicit", "flow_max_steps": 6})
    g, ops, m, xp = solver.geometry, solver.operators, solver.matrices, solver.xp
    state = solver.run(solver.initial_state())
    nu_t = to_host(xp, solver.stepper.eddy.nu_t)
    assert nu_t.max() > 0.0
    expected = 0.5 * host(ops.D) + face_by_face(g, 0.0, nu_t, [])  # the eddy part: nu_t alone, whole
    x = numpy.random.default_rng(8).standard_normal((2, g.num_cells))
    y = xp.zeros((2, g.num_cells))
    m.K(xp.asarray(x), y)
    numpy.testing.assert_allclose(to_host(xp, y), (expected @ x.T).T, rtol=1e-12, atol=1e-14)
    rate = solver._diffusion_rate(state)  # the eddy part's largest D_ii / Omega_i, assembled face by face
    assert rate == pytest.approx((face_by_face(g, 0.0, nu_t, []).diagonal() / g.volumes).max(), rel=1e-12)
    assert state.dt_old <= solver.fourier / rate * (1 + 1e-12)
    z = numpy.random.default_rng(9).standard_normal((2, g.num_cells))  # the momentum matrix: nu's alone
    zv, out = m.momentum.createVecs()
    zv.setArray(z.ravel())
    m.momentum.mult(zv, out)
    expected = g.volumes * z + 0.5 * solver._held_dt * (host(ops.D) @ z.T).T
    numpy.testing.assert_allclose(out.getArray().reshape(2, -1), expected, rtol=1e-12, atol=1e-14)


def test_the_constant_defaults_to_the_models_own():
    eddy = cavity_on_a_mesh({"flow_les": "wale"}).stepper.eddy
    assert (eddy.model, eddy.constant) == ("wale", 0.325)
    eddy = cavity_on_a_mesh({"flow_les": "sigma", "flow_les_constant": 1.5}).stepper.eddy
    assert (eddy.model, eddy.constant) == ("sigma", 1.5)
    assert cavity_on_a_mesh({}).stepper.eddy is None


@pytest.mark.mpi
def test_ranks_agree_with_one_rank_under_an_eddy_viscosity():
    """A disturbed channel under Smagorinsky (nu_t of cells on other ranks reaches each face's mean)."""
    def disturbed(g):
        x, y = g.centroids.T
        return numpy.array([4 * y * (1 - y) + 0.3 * numpy.sin(2 * numpy.pi * x) * numpy.sin(numpy.pi * y),
                            0.2 * numpy.sin(numpy.pi * x) * numpy.sin(2 * numpy.pi * y)])

    fields = []
    for comm in (PETSc.COMM_WORLD, PETSc.COMM_SELF):
        da, solver, state = channel("smagorinsky", sizes=(18, 9), steps=6, comm=comm, start=disturbed)
        assert to_host(solver.xp, solver.stepper.eddy.nu_t).max() > 0.0
        fields.append(natural_field(comm.tompi4py(), dmda_partition(da), solver.xp, state.u))
    if MPI.COMM_WORLD.Get_rank() == 0:
        numpy.testing.assert_allclose(fields[0], fields[1], rtol=0, atol=1e-9)


def test_a_subgrid_model_holds_the_adaptive_time_step():
    """The eddy viscosity moves the explicit diffusion's limit every step; the
    dt is held in a band below it (as with Crank-Nicolson), so that a step's
    CUDA graph replays, and never exceeds the limit that nu + max nu_t sets."""
    solver = cavity_on_a_mesh({"flow_les": "smagorinsky", "flow_diffusion": "explicit", "flow_max_steps": 40,
                               "flow_fourier": 0.4})
    steps = []

    def observe(state):
        steps.append((state.dt_old, solver.fourier / solver._diffusion_rate(state)))

    solver.run(solver.initial_state(), observe)
    dts = numpy.array([dt for dt, _ in steps])
    assert len(steps) == 40 and len(numpy.unique(dts[10:])) <= 5, numpy.unique(dts)
    assert solver.stepper.eddy.nu_t.max() > 0.0
    limits = [limit for _, limit in steps]
    assert all(dt <= limit * (1 + 1e-12) for dt, limit in zip(dts[1:], limits[:-1]))  # each from the last's nu_t


def test_the_first_step_keeps_to_the_starting_fields_eddy_viscosity_limit():
    """Before any step the eddy viscosity of the starting velocity limits dt
    (with Crank-Nicolson too), as each step's limits the next."""
    solver = cavity_on_a_mesh({"flow_les": "smagorinsky", "flow_les_constant": 1.0, "flow_diffusion": "implicit",
                               "flow_max_steps": 1})  # C_s 1: the eddy viscosity's limit below the CFL's
    x, y = solver.geometry.centroids.T
    state = solver.initial_state(numpy.array([5 * numpy.sin(2 * numpy.pi * y), 5 * numpy.sin(2 * numpy.pi * x)]),
                                 project=True)
    limit = solver.fourier / solver._diffusion_rate(state)
    assert to_host(solver.xp, solver.stepper.eddy.nu_t).max() > 0.0
    convective = solver.cfl / solver.stepper.convective_rate(state)
    assert limit < convective
    after = solver.run(state)
    assert after.step == 1 and after.dt_old <= limit * (1 + 1e-12)
