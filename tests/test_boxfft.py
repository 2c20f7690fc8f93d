"""-pc_type boxfft (petsc_ext.boxfft, gpu_mats.spectral) on the host
backend: the transforms invert a box's Laplacian with walls and periodic
sides, cg converges in one iteration, the box from the PC, a DMDA or a
gpusell grid, and the errors for what the transforms cannot invert. The CuPy
twin is in tests/test_gpu.py."""

import numpy
import pytest
from petsc4py import PETSc

import plugin  # noqa: F401
from gpu_mats.spectral import SpectralBoxSolver, SpectralError, dct2, idct2
from gpu_mats.stencil import StencilMatrix
from petsc_ext import gpusell
from petsc_ext.matrices import aij_from_csr
from petsc_ext.options import OptionError, option_defaults
from test_stencil import box_laplacian

BOXES = {  # shape, periodic, side lengths
    "3D walls, 1 x 1 x 2": ((6, 5, 8), (False,) * 3, (1.0, 1.0, 2.0)),
    "3D periodic x and z": ((4, 3, 6), (True, False, True), (2.0, 1.0, 1.0)),
    "3D periodic y": ((5, 4, 3), (False, True, False), (1.0, 3.0, 1.0)),
    "2D walls": ((7, 4), (False, False), (3.0, 1.0)),
    "2D periodic": ((5, 6), (True, True), (1.0, 1.0)),
}


@pytest.mark.parametrize("shape", [(8,), (7,), (5, 6), (4, 9, 3), (1, 3)])
def test_makhouls_cosine_transform_is_scipys_and_its_inverse_inverts_it(shape):
    import scipy.fft

    x = numpy.random.default_rng(sum(shape)).standard_normal(shape)
    for axis in range(len(shape)):
        X = dct2(x, axis)
        numpy.testing.assert_allclose(X, scipy.fft.dct(x, type=2, axis=axis), rtol=0, atol=1e-13 * abs(X).max())
        numpy.testing.assert_allclose(idct2(X, axis), x, rtol=0, atol=1e-14 * abs(x).max() * max(shape))


def stencil_of(A, shape, periodic):
    A = A.tocsr()
    A.sort_indices()
    return StencilMatrix.from_csr(A.indptr, A.indices, A.data, shape, periodic)


@pytest.mark.parametrize("box", BOXES)
def test_the_transforms_invert_a_boxs_laplacian_on_its_range(box):
    """S x = b for b in the range (constants are the null space), x of zero mean: the pseudo-inverse."""
    shape, periodic, lengths = BOXES[box]
    A = box_laplacian(shape, periodic, lengths)
    solver = SpectralBoxSolver(stencil_of(A, shape, periodic))
    rng = numpy.random.default_rng(1)
    b = A @ rng.standard_normal(A.shape[0])
    x = numpy.full_like(b, numpy.nan)
    solver.solve(b, x)
    assert numpy.linalg.norm(b - A @ x) <= 1e-13 * numpy.linalg.norm(b)
    assert abs(x.mean()) <= 1e-13 * abs(x).max()


def test_a_held_value_on_the_diagonal_is_refused_with_the_reason():
    shape, periodic, lengths = BOXES["3D walls, 1 x 1 x 2"]
    A = box_laplacian(shape, periodic, lengths).tolil()
    A[0, 0] += 0.5  # an outflow's held pressure on one cell
    with pytest.raises(SpectralError, match="a side that holds a value"):
        SpectralBoxSolver(stencil_of(A, shape, periodic))


def solve_with(P, b, box=None):
    ksp = PETSc.KSP().create(PETSc.COMM_SELF)
    ksp.setOperators(P)
    ksp.setType("cg")
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ksp.setTolerances(rtol=1e-10)
    ksp.getPC().setType("boxfft")
    if box is not None:
        ksp.getPC().getPythonContext().set_box(*box)
    x = P.createVecRight()
    ksp.solve(b, x)
    return ksp, x


def test_cg_converges_in_one_iteration_on_the_box_of_a_dmda_or_a_gpusell_grid_and_the_view_shows_it(capfd):
    shape, periodic, lengths = BOXES["3D periodic x and z"]
    A = box_laplacian(shape, periodic, lengths).tocsr()
    A.sort_indices()
    rng = numpy.random.default_rng(2)
    rhs = A @ rng.standard_normal(A.shape[0])
    da = PETSc.DMDA().create(dim=3, sizes=shape, stencil_width=1, comm=PETSc.COMM_SELF,
                             boundary_type=tuple(PETSc.DM.BoundaryType.PERIODIC if p else PETSc.DM.BoundaryType.NONE
                                                 for p in periodic))
    for mat_type in ("aij", "gpusell"):
        P = aij_from_csr(A.indptr, A.indices, A.data, A.shape, comm=PETSc.COMM_SELF, mat_type=mat_type)
        P.setNullSpace(PETSc.NullSpace().create(constant=True, comm=PETSc.COMM_SELF))
        if mat_type == "aij":
            P.setDM(da)
        else:
            gpusell.context(P).set_grid(shape, periodic)
        b = P.createVecLeft()
        b.setArray(rhs)
        ksp, x = solve_with(P, b)
        assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() == 1, mat_type
        assert numpy.linalg.norm(rhs - A @ x.getArray()) <= 1e-10 * numpy.linalg.norm(rhs)
    ksp.view()
    out = capfd.readouterr().out
    assert "boxfft: exact inverse of a box's 7-point Laplacian" in out
    assert "x: 4 cells, Fourier (periodic)" in out and "y: 3 cells, cosine (walls)" in out


def test_without_a_box_or_on_a_matrix_that_is_no_stencil_it_is_a_petsc_error():
    shape, periodic, lengths = BOXES["2D walls"]
    A = box_laplacian(shape, periodic, lengths).tocsr()
    P = aij_from_csr(A.indptr, A.indices, A.data, A.shape, comm=PETSc.COMM_SELF, mat_type="aij")
    b = P.createVecLeft()
    b.set(0.0)
    with pytest.raises(PETSc.Error, match="boxfft needs the box the rows are cells of"):
        solve_with(P, b)
    with pytest.raises(PETSc.Error, match="boxfft needs a 7-point operator on the 4 x 7 box, its couplings constant, "
                                          "or varying along one walled axis only"):
        solve_with(P, b, box=((4, 7), (False, False)))  # the wrong box: a neighbour is missing
    B = A.tolil()
    B[0, 0] += 1.0
    B = B.tocsr()
    P = aij_from_csr(B.indptr, B.indices, B.data, B.shape, comm=PETSc.COMM_SELF, mat_type="aij")
    with pytest.raises(PETSc.Error, match="a side that holds a value"):
        solve_with(P, b, box=(shape, periodic))


def test_the_flow_driver_solves_a_walled_3d_box_by_transforms_and_an_open_or_2d_one_by_gpuamg():
    """The default pressure PC on a DMDA box on one rank on gpusell: boxfft
    on a 3D box without an outflow (one cg iteration per step, the flow of
    gpuamg's to the solvers' tolerance), gpuamg with an outflow or in 2D;
    boxfft asked for with an outflow is refused with the reason."""
    from gpu_mats.backend import to_host
    from plugin.flow.boundary import Outflow, Wall
    from plugin.flow.solver import FlowSolver

    def run(sizes, conditions, **options):
        with option_defaults("", {"flow_max_steps": 4, "pressure_ksp_rtol": 1e-12, **options}):
            da = PETSc.DMDA().create(dim=len(sizes), sizes=sizes, stencil_width=1, comm=PETSc.COMM_SELF, setup=False)
            da.setMatType("gpusell")
            da.setUp()
            solver = FlowSolver.from_dmda(da, (1.0,) * len(sizes), 0.01, conditions)
        state = solver.run(solver.initial_state())
        return solver, to_host(solver.xp, state.u)

    lid = {"xmax": Wall((0.0, 1.0, 0.0))}
    solver, u = run((8, 6, 5), lid)
    assert solver.pressure_ksp.getPC().getType() == "boxfft"
    assert solver.pressure_iterations == solver.steps_run == 4  # one cg iteration per step
    _, u_amg = run((8, 6, 5), lid, pressure_pc_type="gpuamg")
    numpy.testing.assert_allclose(u, u_amg, rtol=0, atol=1e-10)
    solver, _ = run((8, 6, 5), {**lid, "xmin": Outflow(0.0)})
    assert solver.pressure_ksp.getPC().getType() == "gpuamg"
    lid2 = {"ymax": Wall((1.0, 0.0))}
    solver, u2 = run((16, 12), lid2)
    assert solver.pressure_ksp.getPC().getType() == "gpuamg"
    solver, u2_fft = run((16, 12), lid2, pressure_pc_type="boxfft")
    assert solver.pressure_iterations == 4
    numpy.testing.assert_allclose(u2_fft, u2, rtol=0, atol=1e-10)
    with pytest.raises(PETSc.Error, match="a side that holds a value"):
        run((16, 12), {**lid2, "xmax": Outflow(0.0)}, pressure_pc_type="boxfft")


def test_boxfft_on_a_mesh_is_refused():
    from meshes import unit_mesh
    from plugin.flow.boundary import Wall
    from plugin.flow.mesh import mesh_geometry
    from plugin.flow.solver import FlowSolver

    g = mesh_geometry(unit_mesh(("quad", "triangle"), n=4, jitter=0.2))
    refused = r"pc_type boxfft needs the grids of a DMDA box on one rank \(this run: a mesh\); use gpuamg"
    with option_defaults("", {"pressure_pc_type": "boxfft"}), pytest.raises(OptionError, match=refused):
        FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"lid": Wall((1.0, 0.0)), "wall": Wall()})


@pytest.mark.parametrize("shape, periodic", [((8, 12, 6), (True, False, True)), ((6, 10, 5), (False, False, False)),
                                             ((7, 9), (True, False))], ids=["channel", "3D walls", "2D"])
def test_a_graded_box_is_solved_exactly_by_transforms_and_tridiagonal_solves(shape, periodic):
    """GradedBoxSolver on boxes graded along y by the tanh law: S x = b to
    rounding for b of zero sum, x of zero sum (the pseudo-inverse), as
    scipy's direct solve gives it."""
    import scipy.sparse.linalg

    from gpu_mats.spectral import GradedBoxSolver
    from plugin.flow.box import box_geometry, tanh_widths, uniform_widths
    from plugin.flow.operators import compact_laplacian

    lengths = (2.0, 2.0, 1.0)[:len(shape)]
    widths = uniform_widths(shape, lengths)
    widths[1] = tanh_widths(shape[1], lengths[1], 2.0)
    A = (-compact_laplacian(box_geometry(shape, lengths, periodic, widths=widths))).tocsr()
    A.sort_indices()
    S = GradedBoxSolver.from_csr(A.indptr, A.indices, A.data, shape, periodic)
    assert S.graded == 1
    b = numpy.random.default_rng(4).standard_normal(A.shape[0])
    b -= b.mean()
    x = numpy.full_like(b, numpy.nan)
    S.solve(b, x)
    assert abs(A @ x - b).max() < 1e-12 * abs(b).max() and abs(x.mean()) < 1e-13 * abs(x).max()
    pinned = A.tolil()  # the direct solve with the first value held, its mean removed: the same x
    pinned[0, :] = 0.0
    pinned[0, 0] = 1.0
    direct = scipy.sparse.linalg.spsolve(pinned.tocsr(), numpy.concatenate(([0.0], b[1:])))
    numpy.testing.assert_allclose(x, direct - direct.mean(), atol=1e-11 * abs(x).max())


def test_the_graded_solver_refuses_what_it_does_not_diagonalize():
    from gpu_mats.spectral import GradedBoxSolver, SpectralError
    from plugin.flow.box import box_geometry, tanh_widths, uniform_widths
    from plugin.flow.operators import compact_laplacian

    def laplacian(shape, periodic, graded):
        widths = uniform_widths(shape, (1.0,) * len(shape))
        for d in graded:
            widths[d] = tanh_widths(shape[d], 1.0, 1.5)
        A = (-compact_laplacian(box_geometry(shape, (1.0,) * len(shape), periodic, widths=widths))).tocsr()
        A.sort_indices()
        return A

    for graded, match in (((), "vary along no axis"), ((0, 1), "vary along x, y")):
        A = laplacian((6, 6, 4), (False, False, True), graded)
        with pytest.raises(SpectralError, match=match):
            GradedBoxSolver.from_csr(A.indptr, A.indices, A.data, (6, 6, 4), (False, False, True))


def test_the_flow_drivers_graded_channel_takes_boxfft_in_one_iteration_a_step():
    """On a graded 3D channel (x and z periodic) boxfft is the default: it
    solves along y by tridiagonal solves under graphcg, one iteration a
    step, the flow of gpuamg's (asked for) to the solvers' tolerance."""
    from gpu_mats.backend import to_host
    from test_flow_solver import make_solver

    runs = {}
    for pc in ("default", "gpuamg"):
        options = {"flow_box_grading": 2.0, "flow_max_steps": 4, "pressure_ksp_rtol": 1e-12,
                   "flow_forcing": "pressure_gradient", "flow_forcing_value": 1.0,
                   **({"pressure_pc_type": pc} if pc != "default" else {})}
        _, solver = make_solver((8, 12, 6), (True, False, True), 0.05, options, lengths=(2.0, 2.0, 1.0))
        y = solver.geometry.centroids[:, 1]
        start = numpy.array([y * (2 - y) * (1 + 0.2 * numpy.sin(3 * solver.geometry.centroids[:, 0])),
                             0.1 * numpy.sin(numpy.pi * y), 0 * y])
        state = solver.run(solver.initial_state(start, project=True))
        runs[pc] = (solver.pressure_ksp.getType(), solver.pressure_ksp.getPC().getType(),
                    solver.pressure_iterations / 4, to_host(solver.xp, state.u))
    assert runs["default"][:2] == ("graphcg", "boxfft") and runs["default"][2] <= 2 and runs["gpuamg"][1] == "gpuamg"
    numpy.testing.assert_allclose(runs["default"][3], runs["gpuamg"][3], rtol=0, atol=1e-9)
