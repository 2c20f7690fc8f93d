"""-pc_type gpuamg (petsc_ext.gpuamg, gpu_mats.amg) on the host backend:
aggregates, symmetry of the cycle, CG iterations against pyamg's smoothed
aggregation (the CPU reference), singular Neumann matrices, errors, views,
and the flow driver's pressure solve. The CuPy twin is in tests/test_gpu.py."""

import numpy
import pytest
import scipy.sparse
from petsc4py import PETSc

import plugin  # noqa: F401
from conftest import krylov_solve
from gpu_mats.amg import AggregationAMG, AMGError, mis2_aggregates, pairwise_aggregates
from meshes import unit_mesh
from petsc_ext.options import OptionError, option_defaults
from plugin.flow.mesh import mesh_geometry
from plugin.flow.operators import compact_laplacian
from stencils import laplacian
from test_stencil import box_laplacian


def poisson_2d(n):
    one = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    eye = scipy.sparse.eye(n)
    return (scipy.sparse.kron(eye, one) + scipy.sparse.kron(one, eye)).tocsr()


def tetrahedra():
    """The cell Laplacian of an unstructured tetrahedral mesh (Neumann: singular, constants its null space)."""
    return (-compact_laplacian(mesh_geometry(unit_mesh("tetra", n=8, jitter=0.25)))).tocsr()


def stencil(n, points):
    indptr, indices, data = laplacian(n, points)
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(n**3, n**3))


PROBLEMS = {
    "2D Poisson 48^2": lambda: poisson_2d(48),
    "3D Poisson 20^3": lambda: stencil(20, 7),
    "3D 27-point 14^3": lambda: stencil(14, 27),
}


def csr_arrays(A):
    A = A.tocsr()
    A.sort_indices()
    return A.indptr, A.indices, A.data


def cg_iterations(A, b, options, nullspace=False):
    """CG's iterations on A x = b (AIJ, one rank) preconditioned by gpuamg with ``options``, checked converged."""
    ksp, _ = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg", **options},
                          comm=PETSc.COMM_SELF, rhs=b, mat_type="aij", nullspace=nullspace)
    assert ksp.getConvergedReason() > 0
    return ksp.getIterationNumber()


def pyamg_iterations(A, b):
    import pyamg

    residuals = []
    solver = pyamg.smoothed_aggregation_solver(A, B=numpy.ones((A.shape[0], 1)))
    solver.solve(b, tol=1e-8, accel="cg", residuals=residuals, maxiter=500)
    return len(residuals) - 1


def test_pairwise_aggregates_pair_neighbours_and_cover_every_row():
    A = poisson_2d(20)
    aggregates, count = pairwise_aggregates(A, 0.0)
    sizes = numpy.bincount(aggregates, minlength=count)
    assert sizes.min() >= 1 and count < 0.6 * A.shape[0]  # most rows paired
    coo = A.tocoo()
    linked = scipy.sparse.csr_matrix((numpy.ones(coo.nnz), (coo.row, coo.col)), shape=A.shape)
    for aggregate in range(count):  # every aggregate is connected in the matrix graph
        rows = numpy.flatnonzero(aggregates == aggregate)
        sub = linked[rows][:, rows]
        assert scipy.sparse.csgraph.connected_components(sub, directed=False)[0] == 1


def test_mis2_roots_are_two_steps_apart_and_their_aggregates_reach_every_row():
    A = poisson_2d(24)
    aggregates, count = mis2_aggregates(A, 0.0)
    graph = (abs(A) > 0).astype(float)
    two = ((graph @ graph) > 0).toarray()
    sizes = numpy.bincount(aggregates, minlength=count)
    assert sizes.min() >= 1 and count < A.shape[0] / 4  # compact aggregates of a root and its neighbours
    for aggregate in range(count):  # one of its rows (the root) has all the others within two steps
        rows = numpy.flatnonzero(aggregates == aggregate)
        assert two[numpy.ix_(rows, rows)].all(axis=1).any()


@pytest.mark.parametrize("aggregation", ["mis2", "pairwise"])
def test_both_aggregations_converge_with_and_without_smoothing(aggregation):
    A = stencil(12, 7)
    for smoothed in (True, False):
        ksp, _ = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                          "pc_gpuamg_aggregation": aggregation,
                                                          "pc_gpuamg_smoothed": smoothed,
                                                          "pc_gpuamg_coarse_size": 20}, comm=PETSc.COMM_SELF,
                              mat_type="aij")
        assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() < 60


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_cg_with_gpuamg_needs_at_most_1_5_times_pyamgs_iterations(name):
    A = PROBLEMS[name]()
    b = numpy.ones(A.shape[0])
    ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg", "ksp_norm_type": "unpreconditioned"},
                          comm=PETSc.COMM_SELF, rhs=b, mat_type="aij")
    assert ksp.getConvergedReason() > 0
    ours, reference = ksp.getIterationNumber(), pyamg_iterations(A, b)
    assert ours <= 1.5 * reference, (ours, reference)
    assert numpy.linalg.norm(b - A @ x.getArray()) <= 1e-7 * numpy.linalg.norm(b)


def test_the_v_cycle_is_symmetric():
    A = poisson_2d(30)
    amg = AggregationAMG(*csr_arrays(A), A.shape[0], numpy)
    rng = numpy.random.default_rng(1)
    v, w = rng.standard_normal((2, A.shape[0]))
    Mv, Mw = numpy.empty_like(v), numpy.empty_like(w)
    amg.apply(v, Mv)
    amg.apply(w, Mw)
    assert w @ Mv == pytest.approx(v @ Mw, rel=1e-12)
    assert v @ Mv > 0


@pytest.mark.parametrize("cycle", ["v", "k"])
def test_small_levels_multiplied_a_warp_per_row_give_the_sell_cycles_result(monkeypatch, cycle):
    """The csr family's products, fused smoothing step and fused coarse
    correction (CoarseCorrection: x += P x_c and the first smoothing step
    over A P) on the levels below WARP_ROWS rows against the sell family's
    products on all levels, after a set-up and after a refresh (which must
    renew the copies and A P)."""
    import gpu_mats.amg.cycle

    A = stencil(12, 27)
    b = numpy.random.default_rng(3).standard_normal(A.shape[0])
    results = []
    for warp_rows in (0, A.shape[0] + 1):  # no level, then every level
        monkeypatch.setattr(gpu_mats.amg.cycle, "WARP_ROWS", warp_rows)
        amg = AggregationAMG(*csr_arrays(A), A.shape[0], numpy, coarse_size=20, cycle=cycle)
        assert all((level.A_cycle is None) == (warp_rows == 0) for level in amg.levels[:-1])
        assert all((level.correction is None) == (warp_rows == 0) for level in amg.levels[:-1])
        assert amg.levels[-1].A_cycle is None  # the coarsest is solved by its inverse
        x, refreshed = numpy.empty_like(b), numpy.empty_like(b)
        amg.apply(b, x)
        amg.refresh(3.0 * csr_arrays(A)[2])
        amg.apply(b, refreshed)
        results.append((x, refreshed))
    (x_sell, refreshed_sell), (x_rows, refreshed_rows) = results
    numpy.testing.assert_allclose(x_rows, x_sell, rtol=1e-12, atol=1e-14)
    numpy.testing.assert_allclose(refreshed_rows, refreshed_sell, rtol=1e-12, atol=1e-14)
    numpy.testing.assert_allclose(refreshed_rows, x_rows / 3.0, rtol=1e-8)


def test_a_neumann_matrix_keeps_its_null_space_through_the_hierarchy():
    """The unstructured tetrahedra's Laplacian: constants in its null space on every level, CG with the null space attached converges."""
    A = tetrahedra()
    amg = AggregationAMG(*csr_arrays(A), A.shape[0], numpy)
    for level in amg.levels:
        indptr, indices, data = (numpy.asarray(a) for a in level.A.to_csr())
        coarse = scipy.sparse.csr_matrix((data, indices, indptr), shape=level.A.shape)
        assert abs(coarse @ numpy.ones(coarse.shape[0])).max() < 1e-10 * abs(data).max()
    rng = numpy.random.default_rng(0)
    b = rng.standard_normal(A.shape[0])
    b -= b.mean()
    ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg", "ksp_norm_type": "unpreconditioned"},
                          comm=PETSc.COMM_SELF, rhs=b, nullspace=True, mat_type="aij")
    assert ksp.getConvergedReason() > 0  # pyamg's CG stops on this singular system ("indefinite"): no reference
    assert ksp.getIterationNumber() <= 20
    assert numpy.linalg.norm(b - A @ x.getArray()) <= 1e-7 * numpy.linalg.norm(b)


def test_a_row_without_a_positive_diagonal_is_named():
    A = poisson_2d(6).tolil()
    A[7, 7] = 0.0
    with pytest.raises(PETSc.Error, match="gpuamg needs a positive diagonal: row 7 of level 0 has 0"):
        krylov_solve(csr_arrays(A.tocsr()), 36, {"ksp_type": "cg", "pc_type": "gpuamg",
                                                 "pc_gpuamg_coarse_size": 4}, comm=PETSc.COMM_SELF, mat_type="aij")


def test_view_shows_levels_and_complexities_and_help_lists_the_options(capfd):
    A = poisson_2d(40)
    with option_defaults("", {"help": True}):
        ksp, _ = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                          "pc_gpuamg_coarse_size": 50},
                              comm=PETSc.COMM_SELF, mat_type="aij")
    out = capfd.readouterr().out
    assert "-t_pc_gpuamg_passes" in out and "-t_pc_gpuamg_smoothed" in out
    viewer = PETSc.Viewer.STDOUT(PETSc.COMM_SELF)
    ksp.getPC().view(viewer)
    view = capfd.readouterr().out
    amg = ksp.getPC().getPythonContext().amg
    assert "operator complexity" in view and "grid complexity" in view
    assert len(amg.levels) >= 3 and f"{amg.levels[-1].A.shape[0]:9d}" in view
    assert "Galerkin coarse operators" in view and "sparsified" not in view
    ksp, _ = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                      "pc_gpuamg_sparsify": 0.2}, comm=PETSc.COMM_SELF, mat_type="aij")
    ksp.getPC().view(viewer)
    assert "coarse operators sparsified at 0.2" in capfd.readouterr().out


def test_pairing_the_finest_aggregates_halves_the_first_coarse_level_and_lowers_the_complexity():
    """-pc_gpuamg_mis2_pairs 1 on the jittered tetrahedra's Laplacian: the first
    coarse level has at most 0.6 of the MIS-2's rows, the operator complexity
    falls, and CG converges in at most 1.6 times the iterations (the sphere's
    2M tetrahedra, BENCHMARKS.md: 1.71 -> 1.32, 12 -> 16 iterations)."""
    A = tetrahedra()
    indptr, indices, data = csr_arrays(A)
    plain, paired = (AggregationAMG(indptr, indices, data, A.shape[0], numpy, coarse_size=20, mis2_pairs=k)
                     for k in (0, 1))
    assert paired.sizes()[1, 0] <= 0.6 * plain.sizes()[1, 0]
    assert paired.complexities()[0] < plain.complexities()[0]
    b = numpy.random.default_rng(1).standard_normal(A.shape[0])
    b -= b.mean()
    counts = [cg_iterations(A, b, {"pc_gpuamg_mis2_pairs": pairs}, nullspace=True) for pairs in (0, 1)]
    assert counts[1] <= 1.6 * counts[0], counts


def test_a_sparsified_coarse_operator_keeps_row_sums_symmetry_and_diagonal_dominance():
    """gpu_mats.amg.sparsified on the first Galerkin level of the jittered
    tetrahedra: only entries below theta x the smaller row maximum go, each
    row's sum stays, the matrix stays symmetric, no row's a_ii - sum |a_ij|
    falls, and the entries are fewer."""
    from gpu_mats.amg import sparsified

    A = tetrahedra()
    galerkin = AggregationAMG(*csr_arrays(A), A.shape[0], numpy, coarse_size=20, sparsify=0.0)
    R = galerkin.levels[0].galerkin_R
    C = R @ A @ R.T
    C = ((C + C.T) / 2).tocsr()  # exactly symmetric, so that what is kept is too
    C.sort_indices()
    S = sparsified(C, 0.2, lambda v: v[C.indices])
    assert S.nnz < 0.8 * C.nnz
    numpy.testing.assert_allclose(numpy.asarray(S.sum(axis=1)).ravel(), numpy.asarray(C.sum(axis=1)).ravel(),
                                  rtol=0, atol=1e-13 * abs(C).max())
    assert abs(S - S.T).max() == 0.0
    off = C - scipy.sparse.diags(C.diagonal())
    largest = abs(off).max(axis=1).toarray().ravel()
    dropped = (abs(off) - abs(S - scipy.sparse.diags(S.diagonal()))).tocoo()
    dropped.eliminate_zeros()
    assert dropped.nnz > 0
    assert (abs(off)[dropped.row, dropped.col] < 0.2 * numpy.minimum(largest[dropped.row], largest[dropped.col])).all()
    margin = [M.diagonal() - abs(M - scipy.sparse.diags(M.diagonal())).sum(axis=1).A.ravel() for M in (C, S)]
    assert (margin[1] >= margin[0] - 1e-13 * abs(C).max()).all()


def graded_channel(shape, beta=2.0):
    """-L of the turbulent channel's box (x and z periodic, walls at y = 0 and 2, the tanh law along y)."""
    from plugin.flow.box import box_geometry, tanh_widths, uniform_widths

    lengths = (2 * numpy.pi, 2.0, numpy.pi)
    widths = uniform_widths(shape, lengths)
    widths[1] = tanh_widths(shape[1], lengths[1], beta)
    return (-compact_laplacian(box_geometry(shape, lengths, (True, False, True), widths=widths))).tocsr()


@pytest.mark.parametrize("aggregation", ["mis2", "pairwise"])
def test_the_default_galerkin_levels_hold_stretched_cells(aggregation):
    """The channel's pressure matrix on a graded box (cells 50 times longer
    than high at the walls), float32 values, degree 3: CG with the default
    Galerkin levels converges in at most 15 iterations. Sparsified levels
    (-pc_gpuamg_sparsify 0.2, the default before) took 26 with mis2 and 46
    with pairwise aggregation here, and on the demo's 32 x 48 x 32 box
    pairwise aggregation's cycle turned indefinite (BENCHMARKS.md)."""
    A = graded_channel((12, 32, 12))
    b = numpy.random.default_rng(1).standard_normal(A.shape[0])
    b -= b.mean()
    options = {"pc_gpuamg_aggregation": aggregation, "pc_gpuamg_value_type": "float32", "pc_gpuamg_degree": 3}
    assert cg_iterations(A, b, options, nullspace=True) <= 15


@pytest.mark.parametrize("name", ["tetrahedra", "3D Poisson 20^3", "3D 27-point 14^3"])
def test_sparsified_coarse_levels_lower_the_complexity_and_keep_the_iterations(name):
    """-pc_gpuamg_sparsify 0.2 against the plain Galerkin products (the
    default): lower operator complexity, at most one more CG iteration (the
    2M-tetrahedron sphere: 1.71 -> 1.42 at 12 iterations, BENCHMARKS.md)."""
    A = tetrahedra() if name == "tetrahedra" else PROBLEMS[name]()
    indptr, indices, data = csr_arrays(A)
    plain, sparse = (AggregationAMG(indptr, indices, data, A.shape[0], numpy, coarse_size=20, sparsify=theta)
                     for theta in (0.0, 0.2))
    assert sparse.complexities()[0] < plain.complexities()[0]
    b = numpy.random.default_rng(1).standard_normal(A.shape[0])
    b -= b.mean()
    counts = [cg_iterations(A, b, {"pc_gpuamg_sparsify": theta}, nullspace=name == "tetrahedra")
              for theta in (0.0, 0.2)]
    assert counts[1] <= counts[0] + 1, counts


@pytest.mark.mpi
@pytest.mark.parametrize("name,pairs", [("2D Poisson 48^2", 0), ("3D Poisson 20^3", 0), ("3D Poisson 20^3", 1)])
def test_on_several_ranks_cg_needs_at_most_1_3_times_the_serial_iterations(name, pairs):
    """The distributed hierarchy (aggregates inside a rank, prolongations and
    Galerkin products across ranks, the coarsest level gathered) keeps the
    serial hierarchy's iterations; rank-local hierarchies needed 3 to 4 times.
    With -pc_gpuamg_mis2_pairs the finest aggregates are paired inside each rank."""
    A = PROBLEMS[name]()
    b = numpy.ones(A.shape[0])
    counts = []
    for comm in (PETSc.COMM_SELF, PETSc.COMM_WORLD):
        ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                          "pc_gpuamg_mis2_pairs": pairs,
                                                          "ksp_norm_type": "unpreconditioned"}, comm=comm,
                              rhs=b, mat_type="aij")
        assert ksp.getConvergedReason() > 0
        counts.append(ksp.getIterationNumber())
    assert counts[1] <= 1.3 * counts[0], counts


@pytest.mark.parametrize("where", ["box", "mesh"])
def test_the_flow_drivers_pressure_solve_takes_gpuamg(where):
    """-pressure_pc_type gpuamg under cg: the same flow as with ainv, in fewer
    pressure iterations (a closed cavity: the constants are the pressure
    matrix's null space)."""
    from gpu_mats.backend import to_host
    from plugin.flow.boundary import Wall
    from plugin.flow.solver import FlowSolver

    runs = []
    for pc in ("ainv", "gpuamg"):
        options = {"flow_max_steps": 4, "pressure_ksp_type": "cg", "pressure_pc_type": pc,
                   "pressure_ksp_rtol": 1e-12}
        with option_defaults("", options):
            if where == "box":
                da = PETSc.DMDA().create(dim=2, sizes=(16, 12), stencil_width=1, comm=PETSc.COMM_SELF, setup=False)
                da.setMatType("gpusell")
                da.setUp()
                solver = FlowSolver.from_dmda(da, (1.0, 1.0), 0.01, {"ymax": Wall((1.0, 0.0))})
            else:
                g = mesh_geometry(unit_mesh(("quad", "triangle"), n=6, jitter=0.3))
                solver = FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"lid": Wall((1.0, 0.0)), "wall": Wall()})
        state = solver.run(solver.initial_state())
        assert solver.pressure_ksp.getPC().getType() == pc
        runs.append((to_host(solver.xp, state.u), solver.pressure_iterations))
    (u_ainv, its_ainv), (u_amg, its_amg) = runs
    numpy.testing.assert_allclose(u_amg, u_ainv, rtol=0, atol=1e-9)
    assert its_amg < its_ainv
    amg = solver.pressure_ksp.getPC().getPythonContext().amg  # the flow's defaults on one rank: float32
    assert {level.x.dtype for level in amg.levels} == {level.A.value_dtype for level in amg.levels} == {
        numpy.dtype(numpy.float32)}


def test_the_flow_keeps_float64_cycle_vectors_under_the_k_cycle():
    """The flow's float32 cycle vectors are a default of the V-cycle: a
    K-cycle asked for gets float64 vectors, not a refusal."""
    from plugin.flow.boundary import Wall
    from plugin.flow.solver import FlowSolver

    options = {"flow_max_steps": 2, "pressure_ksp_type": "fcg", "pressure_pc_type": "gpuamg",
               "pressure_pc_gpuamg_cycle": "k"}
    with option_defaults("", options):
        g = mesh_geometry(unit_mesh(("quad", "triangle"), n=6, jitter=0.3))
        solver = FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"lid": Wall((1.0, 0.0)), "wall": Wall()})
    solver.run(solver.initial_state())
    amg = solver.pressure_ksp.getPC().getPythonContext().amg
    assert amg.cycle == "k" and {level.x.dtype for level in amg.levels} == {numpy.dtype(numpy.float64)}


def test_cacg_takes_gpuamg_as_cg_does():
    """cacg multiplies by the V-cycle on arrays (on the GPU inside its CUDA
    graphs): the same iterations as cg, to its equivalence's tolerance."""
    A = stencil(14, 7)
    counts = []
    for ksp_type in ("cg", "cacg"):
        ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": ksp_type, "pc_type": "gpuamg"},
                              comm=PETSc.COMM_SELF, mat_type="gpusell")
        assert ksp.getConvergedReason() > 0
        counts.append(ksp.getIterationNumber())
    assert abs(counts[0] - counts[1]) <= 1


def test_a_float32_hierarchy_needs_about_the_iterations_of_a_float64_one():
    """-pc_gpuamg_value_type float32: every level's operator and transfer
    stored in single precision, vectors in double; CG still reaches rtol 1e-8."""
    A = stencil(16, 7)
    runs = {}
    for value_type in ("float64", "float32"):
        ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                          "pc_gpuamg_value_type": value_type,
                                                          "ksp_norm_type": "unpreconditioned"},
                              comm=PETSc.COMM_SELF, mat_type="aij")
        amg = ksp.getPC().getPythonContext().amg
        assert {level.A.value_dtype for level in amg.levels} == {numpy.dtype(value_type)}
        assert ksp.getConvergedReason() > 0
        runs[value_type] = ksp.getIterationNumber()
    assert runs["float32"] <= runs["float64"] + 2


def test_the_coarsest_inverse_cuts_the_null_space_and_a_float32_neumann_box_converges():
    """The 32^3 walled box's pressure Laplacian (all Neumann): its coarsest
    Galerkin matrix has the constant's eigenvalue at -1e-15 of the largest,
    which a pseudo-inverse cut at 1e-15 inverted (a 1e12 inverse); with
    float32 operators, whose A 1 is 1e-7 and not 0, CG then failed
    (KSP_DIVERGED_INDEFINITE_PC, as at 256^3 on the GPU)."""
    A = box_laplacian((32, 32, 32), (False,) * 3, (1.0, 1.0, 1.0)).tocsr()
    A.sort_indices()
    amg = AggregationAMG(*csr_arrays(A), A.shape[0], numpy)
    inverse = amg.levels[-1].inverse
    assert abs(inverse @ numpy.ones(inverse.shape[0])).max() < 1e-8 * abs(inverse).max()
    assert abs(inverse).max() < 1e3
    b = A @ numpy.random.default_rng(0).standard_normal(A.shape[0])
    iterations = {}
    for value_type in ("float64", "float32"):
        ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                          "pc_gpuamg_value_type": value_type,
                                                          "ksp_norm_type": "unpreconditioned"},
                              comm=PETSc.COMM_SELF, rhs=b, nullspace=True, mat_type="aij")
        assert ksp.getConvergedReason() > 0, value_type
        assert numpy.linalg.norm(b - A @ x.getArray()) <= 1e-7 * numpy.linalg.norm(b)
        iterations[value_type] = ksp.getIterationNumber()
    assert iterations["float32"] <= iterations["float64"] + 2


def test_new_values_on_the_same_pattern_refresh_the_hierarchy_and_a_new_pattern_rebuilds_it(capfd):
    """A matrix scaled in place keeps its pattern: the set-up keeps the
    aggregates and prolongations and recomputes the Galerkin values (a scaled
    matrix has the same smoothed prolongation, so the cycle is the old one
    scaled: the same iterations, the solution scaled back). A shifted matrix
    is refreshed too and converges; a matrix of another pattern gets a new
    hierarchy."""
    A = stencil(12, 7)
    ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                      "pc_gpuamg_coarse_size": 20},
                          comm=PETSc.COMM_SELF, mat_type="aij")
    context = ksp.getPC().getPythonContext()
    amg, iterations, first = context.amg, ksp.getIterationNumber(), x.getArray().copy()
    coarse_values = amg.levels[1].A.vals.copy()
    mat = ksp.getOperators()[0]
    b = x.duplicate()
    b.set(1.0)
    mat.scale(3.0)
    ksp.solve(b, x)
    assert context.refreshed and context.amg is amg
    numpy.testing.assert_allclose(amg.levels[1].A.vals, 3.0 * coarse_values, rtol=1e-12)
    assert ksp.getIterationNumber() == iterations
    numpy.testing.assert_allclose(x.getArray(), first / 3.0, rtol=1e-9)
    mat.shift(0.5)
    ksp.solve(b, x)
    assert context.refreshed and ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= iterations
    ksp.getPC().view(PETSc.Viewer.STDOUT(PETSc.COMM_SELF))
    view = capfd.readouterr().out
    assert "last set-up (values refreshed on the same pattern)" in view and "galerkin" in view
    other = stencil(12, 27)
    from petsc_ext.matrices import aij_from_csr
    ksp.setOperators(aij_from_csr(*csr_arrays(other), other.shape, comm=PETSc.COMM_SELF, mat_type="aij"))
    ksp.solve(b, x)
    assert not context.refreshed and context.amg is not amg and ksp.getConvergedReason() > 0


def test_refresh_gives_the_hierarchy_of_a_new_set_up_for_a_scaled_matrix():
    """AggregationAMG.refresh against a new AggregationAMG of 2 A: the same
    coarse operators and Chebyshev intervals (smoothed prolongation does not
    change under scaling)."""
    A = stencil(10, 27)
    amg = AggregationAMG(*csr_arrays(A), A.shape[0], numpy, coarse_size=20)
    amg.refresh(2.0 * csr_arrays(A)[2])
    fresh = AggregationAMG(*csr_arrays(2.0 * A), A.shape[0], numpy, coarse_size=20)
    assert len(amg.levels) == len(fresh.levels) >= 3
    for ours, theirs in zip(amg.levels, fresh.levels):
        numpy.testing.assert_allclose(ours.A.to_csr()[2], theirs.A.to_csr()[2], rtol=1e-10, atol=1e-12)
        if ours.inverse is None:
            numpy.testing.assert_allclose(ours.interval, theirs.interval, rtol=1e-8)
    numpy.testing.assert_allclose(amg.levels[-1].inverse, fresh.levels[-1].inverse, rtol=1e-8, atol=1e-12)


def test_iterations_on_3d_poisson_stay_within_30_percent_from_16_to_32_cubed():
    counts = []
    for n in (16, 32):
        ksp, _ = krylov_solve(csr_arrays(stencil(n, 7)), n**3, {"ksp_type": "cg", "pc_type": "gpuamg",
                                                                  "pc_gpuamg_coarse_size": 50},
                              comm=PETSc.COMM_SELF, mat_type="aij")
        assert ksp.getConvergedReason() > 0
        counts.append(ksp.getIterationNumber())
    assert counts[1] <= 1.3 * counts[0], counts


def test_a_nonsymmetric_matrix_is_refused_with_its_measured_asymmetry():
    A = poisson_2d(8).tolil()
    A[3, 4] = -1.5  # a_34 = -1.5, a_43 = -1: ||A - A^T||_F / ||A||_F = 0.5 sqrt(2) / ||A||_F
    A = A.tocsr()
    expected = numpy.sqrt(2 * 0.5**2) / scipy.sparse.linalg.norm(A)
    with pytest.raises(PETSc.Error, match=rf"symmetric matrix: \|\|A - A\^T\|\|_F / \|\|A\|\|_F = {expected:.3g}"):
        krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg"},
                     comm=PETSc.COMM_SELF, mat_type="aij")


def test_a_one_by_one_matrix_is_solved_on_its_coarsest_level():
    ksp, x = krylov_solve((numpy.array([0, 1]), numpy.array([0]), numpy.array([4.0])), 1,
                          {"ksp_type": "cg", "pc_type": "gpuamg"}, comm=PETSc.COMM_SELF, mat_type="aij")
    assert ksp.getConvergedReason() > 0 and x.getArray()[0] == pytest.approx(0.25)
    assert len(ksp.getPC().getPythonContext().amg.levels) == 1


def test_a_block_matrix_is_refused_with_the_reason():
    from petsc_ext.matrices import aij_from_csr

    A = stencil(4, 7)
    mat = aij_from_csr(*csr_arrays(scipy.sparse.kron(A, scipy.sparse.eye(2))), (128, 128), comm=PETSc.COMM_SELF,
                       mat_type="aij")
    mat.setBlockSize(2)
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setOperators(mat)
    ksp.setType("cg")
    ksp.getPC().setType("gpuamg")
    with pytest.raises(PETSc.Error, match="gpuamg aggregates scalar unknowns; this matrix has block size 2"):
        ksp.setUp()


@pytest.mark.parametrize("option, value", [("pc_gpuamg_threshold", "1.5"), ("pc_gpuamg_degree", "0"),
                                           ("pc_gpuamg_aggregation", "classical")])
def test_an_out_of_range_option_is_a_petsc_error_naming_it(option, value):
    with pytest.raises(PETSc.Error, match=f"-t_{option}"):
        krylov_solve(csr_arrays(poisson_2d(8)), 64, {"ksp_type": "cg", "pc_type": "gpuamg", option: value},
                     comm=PETSc.COMM_SELF, mat_type="aij")


@pytest.mark.parametrize("smoothed, aggregation", [(False, "pairwise"), (True, "mis2")])
def test_the_k_cycle_under_fcg_converges_in_at_most_the_v_cycles_iterations(smoothed, aggregation):
    """Unsmoothed pairwise aggregation is Notay's AGMG setting: its V-cycle
    loses iterations as levels are added, its K-cycle does not."""
    A = stencil(24, 7)
    counts = {}
    for cycle, ksp_type in (("v", "cg"), ("k", "fcg")):
        ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": ksp_type, "pc_type": "gpuamg",
                                                          "pc_gpuamg_cycle": cycle, "pc_gpuamg_smoothed": smoothed,
                                                          "pc_gpuamg_aggregation": aggregation,
                                                          "pc_gpuamg_coarse_size": 20,
                                                          "ksp_norm_type": "unpreconditioned"},
                              comm=PETSc.COMM_SELF, mat_type="aij")
        assert ksp.getConvergedReason() > 0
        assert numpy.linalg.norm(1.0 - A @ x.getArray()) <= 1e-7 * numpy.sqrt(A.shape[0])
        counts[cycle] = ksp.getIterationNumber()
    assert counts["k"] <= counts["v"], counts
    assert len(ksp.getPC().getPythonContext().amg.levels) >= 3


def test_l1_jacobi_smoothing_converges_without_an_eigenvalue_bound():
    A = stencil(16, 27)
    ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                      "pc_gpuamg_smoother": "l1jacobi", "pc_gpuamg_coarse_size": 50},
                          comm=PETSc.COMM_SELF, mat_type="aij")
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() <= 25
    amg = ksp.getPC().getPythonContext().amg
    row_sums = numpy.asarray(abs(A).sum(axis=1)).ravel()
    numpy.testing.assert_allclose(amg.levels[0].scaling, 1.0 / row_sums)


def test_cacg_refuses_the_k_cycle():
    with pytest.raises(PETSc.Error, match="needs a linear preconditioner, and gpuamg's K-cycle is not"):
        krylov_solve(csr_arrays(stencil(8, 7)), 512, {"ksp_type": "cacg", "pc_type": "gpuamg",
                                                      "pc_gpuamg_cycle": "k"}, comm=PETSc.COMM_SELF)


@pytest.mark.parametrize("vectors", ["float64", "float32"])
@pytest.mark.parametrize("dim", [2, 3])
def test_the_boxs_geometric_levels_run_on_gpuamgs_cycle(dim, vectors):
    """-flow_pressure_levels geometric: gpuamg cycles on the box's grids
    (rediscretized levels, linear interpolation), with float64 or float32
    cycle vectors: the flow of mg's PCMG on the same grids to the solver's
    tolerance, in at most mg's pressure iterations plus one per step."""
    from gpu_mats.amg import GeometricMultigrid
    from gpu_mats.backend import to_host
    from gpu_mats.stencil import StencilMatrix, TensorTransfer
    from plugin.flow.boundary import Wall
    from plugin.flow.solver import FlowSolver

    sizes, lengths = ((16, 32), (1.0, 2.0)) if dim == 2 else ((8, 8, 16), (1.0, 1.0, 2.0))
    lid = {"ymax": Wall((1.0, 0.0))} if dim == 2 else {"xmax": Wall((0.0, 1.0, 0.0))}
    runs = {}
    for name, pressure in (("mg", {"pressure_pc_type": "mg"}),
                           ("geometric", {"pressure_pc_type": "gpuamg", "flow_pressure_levels": "geometric",
                                          "pressure_pc_gpuamg_vector_type": vectors})):
        options = {"flow_max_steps": 4, "pressure_ksp_type": "cg", "pressure_ksp_rtol": 1e-12, **pressure}
        with option_defaults("", options):
            da = PETSc.DMDA().create(dim=dim, sizes=sizes, stencil_width=1, comm=PETSc.COMM_SELF, setup=False)
            da.setMatType("gpusell")
            da.setUp()
            solver = FlowSolver.from_dmda(da, lengths, 0.01, lid)
        state = solver.run(solver.initial_state())
        runs[name] = (to_host(solver.xp, state.u), solver.pressure_iterations, solver)
    amg = runs["geometric"][2].pressure_ksp.getPC().getPythonContext().amg
    assert isinstance(amg, GeometricMultigrid)
    assert {level.x.dtype for level in amg.levels} == {numpy.dtype(vectors)}
    assert all(isinstance(level.A_cycle, StencilMatrix) for level in amg.levels[:-1])  # the box's Laplacian, where multiplied
    assert all(isinstance(level.P, TensorTransfer) for level in amg.levels[:-1])
    assert [level.A.shape[0] for level in amg.levels] == [int(numpy.prod(g.shape)) for g in runs["mg"][2].multigrid.grids]
    numpy.testing.assert_allclose(runs["geometric"][0], runs["mg"][0], rtol=0, atol=1e-9)
    assert runs["geometric"][1] <= runs["mg"][1] + 4, (runs["geometric"][1], runs["mg"][1])


@pytest.mark.parametrize("warp_rows", [0, None])  # SELL on every level; warp-per-row copies below the default
def test_float32_cycle_vectors_on_aggregated_levels(monkeypatch, warp_rows):
    """-pc_gpuamg_vector_type float32 on an aggregation (its SELL levels, or
    its warp-per-row CSR copies with the fused coarse correction): every
    level's vectors float32, the cycle the float64 cycle's to float32's
    rounding, cg to the same tolerance in at most one iteration more; the
    K-cycle with float32 vectors refused."""
    import gpu_mats.amg.cycle

    if warp_rows is not None:
        monkeypatch.setattr(gpu_mats.amg.cycle, "WARP_ROWS", warp_rows)
    A = stencil(12, 27)
    b = numpy.random.default_rng(5).standard_normal(A.shape[0])
    cycles = {}
    for vectors in (numpy.float64, numpy.float32):
        amg = AggregationAMG(*csr_arrays(A), A.shape[0], numpy, coarse_size=20, vector_dtype=vectors)
        assert len(amg.levels) > 2 and {level.x.dtype for level in amg.levels} == {numpy.dtype(vectors)}
        assert all((level.correction is None) == (warp_rows == 0) for level in amg.levels[:-1])
        cycles[vectors] = numpy.empty_like(b)
        amg.apply(b, cycles[vectors])
    error = abs(cycles[numpy.float32] - cycles[numpy.float64]).max() / abs(cycles[numpy.float64]).max()
    assert 0.0 < error < 1e-5, error  # rounded to float32 on the way, not computed in it
    solves = {}
    for vectors in ("float64", "float32"):
        ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                          "pc_gpuamg_coarse_size": 20,
                                                          "pc_gpuamg_vector_type": vectors},
                              comm=PETSc.COMM_SELF, rhs=b, mat_type="aij")
        assert ksp.getConvergedReason() > 0
        solves[vectors] = (ksp.getIterationNumber(), x.getArray().copy())
    assert solves["float32"][0] <= solves["float64"][0] + 1, solves
    numpy.testing.assert_allclose(solves["float32"][1], solves["float64"][1], rtol=0,
                                  atol=1e-6 * abs(solves["float64"][1]).max())
    with pytest.raises(AMGError, match="cycle vectors are for a V-cycle on one rank"):
        AggregationAMG(*csr_arrays(A), A.shape[0], numpy, coarse_size=20, vector_dtype=numpy.float32, cycle="k")


def test_geometric_levels_on_a_mesh_are_refused():
    from plugin.flow.boundary import Wall
    from plugin.flow.solver import FlowSolver

    g = mesh_geometry(unit_mesh(("quad", "triangle"), n=4, jitter=0.2))
    options = {"pressure_ksp_type": "cg", "pressure_pc_type": "gpuamg", "flow_pressure_levels": "geometric"}
    with option_defaults("", options), pytest.raises(OptionError, match="needs the grids of a DMDA box on one rank"):
        FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"lid": Wall((1.0, 0.0)), "wall": Wall()})


def test_the_galerkin_product_in_blocks_of_rows_equals_the_product_in_one_piece():
    """R A P computed over blocks of R's rows (to bound cuSPARSE's buffers) is the product in one piece."""
    from gpu_mats.amg import galerkin_product

    A = stencil(10, 27)
    amg = AggregationAMG(*csr_arrays(A), A.shape[0], numpy, coarse_size=20)
    R = amg.levels[0].galerkin_R
    whole = galerkin_product(R, A, R.T.tocsr())
    total = int(numpy.diff(A.indptr)[R.indices].sum())
    for products in (total // 7, total // 2, 1):  # several blocks, two, and a block per row
        blocks = galerkin_product(R, A, R.T.tocsr(), products=products)
        assert blocks.shape == whole.shape and abs(blocks - whole).max() <= 1e-12 * abs(whole).max()
