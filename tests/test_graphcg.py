"""-ksp_type graphcg against PETSc's cg: the same iterations, blocks, monitors, bad input.

On a GPU machine the solves run on CUDA vectors through gpusell (and, on one
rank, as CUDA graph replays); elsewhere with NumPy. Tests marked mpi also
run under mpiexec -n 2 and -n 3.
"""

import numpy
import pytest
import scipy.sparse
from petsc4py import PETSc

import plugin  # noqa: F401  (registers graphcg)
from stencils import laplacian
from petsc_ext.matrices import aij_from_csr

from conftest import gpu_usable, krylov_solve
from test_cacg import NegatedIdentity
from test_gpusell import COMM

Reason = PETSc.KSP.ConvergedReason


def solve(csr, n, opts, comm=COMM, **kwargs):
    return krylov_solve(csr, n, {"ksp_type": "graphcg", **opts}, comm=comm, **kwargs)


def ksp_of(A, kind="graphcg", pc="jacobi"):
    """A KSP of type ``kind`` with PC ``pc`` on A."""
    ksp = PETSc.KSP().create(comm=A.getComm())
    ksp.setOperators(A)
    ksp.setType(kind)
    ksp.getPC().setType(pc)
    return ksp


def values(x):
    return x.getArray(readonly=True).copy()


def history(ksp):
    return numpy.asarray(ksp.getConvergenceHistory())


@pytest.mark.parametrize("norm", ["preconditioned", "unpreconditioned"])
@pytest.mark.parametrize("pc", ["none", "jacobi", "gpuamg"])
def test_graphcg_takes_cg_iterations_to_cg_solution(pc, norm):
    csr, n = laplacian(12), 12**3
    opts = {"pc_type": pc, "ksp_norm_type": norm}
    cg, x = krylov_solve(csr, n, {"ksp_type": "cg", **opts})
    ksp, y = solve(csr, n, opts)
    assert cg.getConvergedReason() > 0 and ksp.getConvergedReason() > 0
    assert ksp.getIterationNumber() == cg.getIterationNumber()
    numpy.testing.assert_allclose(values(y), values(x), rtol=1e-9, atol=1e-9 * abs(values(x)).max())
    assert ksp.getResidualNorm() == pytest.approx(cg.getResidualNorm(), rel=1e-6)


def test_a_float32_cycle_takes_its_input_and_gives_its_output_without_its_roundings(monkeypatch):
    """On the unpreconditioned norm, gpuamg's float32 cycle runs on its own
    vectors: CG's update rounds the residual into them and CG's steps read
    the cycle's output as it is, so that the cycle's apply (which rounds in
    and out) is never called, and the solve is the one with it, bit for bit."""
    from petsc_ext.gpuamg import AggregationMultigridPC

    csr, n = laplacian(12), 12**3
    opts = {"pc_type": "gpuamg", "pc_gpuamg_vector_type": "float32", "ksp_norm_type": "unpreconditioned"}
    calls = []
    apply_arrays = AggregationMultigridPC.apply_arrays
    monkeypatch.setattr(AggregationMultigridPC, "apply_arrays", lambda pc, x, y: (calls.append(1),
                                                                                     apply_arrays(pc, x, y)))
    runs = []
    for handed_off in (True, False):
        if not handed_off:
            monkeypatch.setattr(AggregationMultigridPC, "rounded", lambda pc: None)
        del calls[:]
        ksp, x = solve(csr, n, opts)
        assert ksp.getConvergedReason() > 0
        runs.append((values(x), ksp.getIterationNumber(), ksp.getResidualNorm(), len(calls)))
    (x, its, rnorm, applied), (x_, its_, rnorm_, applied_) = runs
    assert numpy.array_equal(x, x_) and its == its_ and rnorm == rnorm_
    assert applied == 0 and applied_ > 0  # fewer than its on a GPU: a captured block replays with no Python


class CountedJacobi:
    """Jacobi through a Python PC (so that graphcg applies it through PETSc), counting its applications."""

    def __init__(self):
        self.applies = 0

    def setUp(self, pc):
        self.inverse = pc.getOperators()[1].getDiagonal()
        self.inverse.reciprocal()

    def apply(self, pc, x, y):
        self.applies += 1
        y.pointwiseMult(x, self.inverse)


@pytest.mark.parametrize("norm", ["preconditioned", "unpreconditioned"])
def test_the_preconditioner_is_applied_as_often_as_petsc_cg_applies_it(norm):
    """With the unpreconditioned norm each residual is tested before it is
    preconditioned, as PETSc's cg does: the residual a solve stops at is
    never preconditioned (an exact preconditioner's solve applies it once);
    with the preconditioned norm every residual is."""
    A = aij_from_csr(*laplacian(8), (512, 512), comm=PETSc.COMM_SELF, mat_type="gpusell")
    b, _ = A.createVecs()
    b.setRandom()
    runs = {}
    for kind in ("cg", "graphcg"):
        ksp = ksp_of(A, kind, "python")
        counted = CountedJacobi()
        ksp.getPC().setPythonContext(counted)
        ksp.setNormType(getattr(PETSc.KSP.NormType, norm.upper()))
        ksp.setTolerances(rtol=1e-8)
        x = A.createVecRight()
        ksp.solve(b, x)
        assert ksp.getConvergedReason() > 0
        runs[kind] = (ksp.getIterationNumber(), counted.applies, values(x))
    (its, applies, x), (graph_its, graph_applies, y) = runs["cg"], runs["graphcg"]
    assert graph_its == its and graph_applies == applies == its + (norm == "preconditioned")
    numpy.testing.assert_allclose(y, x, rtol=1e-9, atol=1e-9 * abs(x).max())


def test_every_iteration_is_monitored_with_cg_norms():
    csr, n = laplacian(10), 10**3
    runs = {}
    for kind, opts in (("cg", {"ksp_type": "cg"}), ("graphcg", {"ksp_type": "graphcg", "ksp_graphcg_block": 4})):
        A = aij_from_csr(*csr, (n, n), comm=COMM, mat_type="gpusell")
        ksp = PETSc.KSP().create(comm=COMM)
        ksp.setOperators(A)
        ksp.setOptionsPrefix(f"m{kind}_")
        for key, value in {**opts, "pc_type": "jacobi"}.items():
            PETSc.Options().setValue(f"m{kind}_{key}", value)
        ksp.setFromOptions()
        ksp.setConvergenceHistory()
        seen = []
        ksp.setMonitor(lambda _, its, rnorm: seen.append((its, rnorm)))
        b, x = A.createVecs()
        b.set(1.0)
        ksp.solve(b, x)
        runs[kind] = (ksp.getIterationNumber(), seen, history(ksp))
    its_cg, seen_cg, _ = runs["cg"]
    its, seen, hist = runs["graphcg"]
    assert its_cg <= its <= its_cg + 3  # the last block runs to its end
    assert [k for k, _ in seen] == list(range(its + 1))
    numpy.testing.assert_allclose([r for _, r in seen[:its_cg + 1]], [r for _, r in seen_cg], rtol=1e-8)
    numpy.testing.assert_allclose(hist, [r for _, r in seen], rtol=0)


@pytest.mark.parametrize("block", [1, 3, 8])
def test_fixed_blocks_end_converged_within_a_block_of_cg(block):
    csr, n = laplacian(12), 12**3
    cg, _ = krylov_solve(csr, n, {"ksp_type": "cg", "pc_type": "jacobi"})
    ksp, x = solve(csr, n, {"pc_type": "jacobi", "ksp_graphcg_block": block})
    its = ksp.getIterationNumber()
    assert ksp.getConvergedReason() > 0 and its % block == 0
    assert cg.getIterationNumber() <= its < cg.getIterationNumber() + block
    assert ksp.getPythonContext().blocks_run == its // block


def test_a_second_like_solve_checks_once():
    """The adaptive default of blocks: the first block as long as the last solve took."""
    A = aij_from_csr(*laplacian(10), (1000, 1000), comm=COMM, mat_type="gpusell")
    ksp = ksp_of(A)
    ksp.getPythonContext().loop = False  # on a GPU the loops the device ends would take the blocks' place
    ksp.setTolerances(rtol=1e-8)
    b, x = A.createVecs()
    b.set(1.0)
    ksp.solve(b, x)
    first = ksp.getIterationNumber()
    assert ksp.getPythonContext().blocks_run == first  # one at a time: no solve to learn from yet
    x.set(0.0)
    ksp.solve(b, x)
    assert ksp.getIterationNumber() == first and ksp.getPythonContext().blocks_run == 1


def test_a_nonzero_guess_starts_from_its_residual():
    csr, n = laplacian(10), 1000
    A = aij_from_csr(*csr, (n, n), comm=COMM, mat_type="gpusell")
    results = {}
    for kind in ("cg", "graphcg"):
        ksp = ksp_of(A, kind)
        ksp.setInitialGuessNonzero(True)
        ksp.setTolerances(rtol=1e-10)
        b, x = A.createVecs()
        b.set(1.0)
        x.setRandom()
        x.scale(0.0)
        x.shift(0.25)
        ksp.solve(b, x)
        results[kind] = (ksp.getIterationNumber(), values(x))
    assert results["graphcg"][0] == results["cg"][0]
    numpy.testing.assert_allclose(results["graphcg"][1], results["cg"][1], rtol=1e-10)


def test_view_names_the_block_and_the_last_solve(capsys):
    ksp, _ = solve(laplacian(6), 216, {"pc_type": "jacobi", "ksp_graphcg_block": 2})
    ksp.view()
    out = capsys.readouterr().out
    its = ksp.getIterationNumber()
    assert "type: graphcg" in out and "graphcg: block 2" in out
    assert f"last solve: {its} iterations in {its // 2} blocks, run by" in out


@pytest.mark.mpi
def test_parallel_solution_matches_serial():
    csr, n = laplacian(12), 12**3
    ksp, x = solve(csr, n, {"pc_type": "jacobi"})
    serial, xs = solve(csr, n, {"pc_type": "jacobi"}, comm=PETSc.COMM_SELF)
    assert ksp.getConvergedReason() > 0 and ksp.getIterationNumber() == serial.getIterationNumber()
    lo, hi = x.getOwnershipRange()
    numpy.testing.assert_allclose(values(x), values(xs)[lo:hi], rtol=1e-9, atol=1e-9 * abs(values(xs)).max())
    if ksp.getComm().getSize() > 1:  # the view says how the dot products were summed
        how = "MPI through host memory" if ksp.getPythonContext().xp is numpy else "an NCCL all-reduce on the device"
        assert f"  dot products summed over {ksp.getComm().getSize()} ranks by {how}" in \
            ksp.getPythonContext().describe(ksp)


SINGLE = {"ksp_norm_type": "unpreconditioned", "ksp_graphcg_single_reduction": 1}


@pytest.mark.mpi
@pytest.mark.parametrize("pc", [{"pc_type": "none"}, {"pc_type": "jacobi"}, {"pc_type": "gpuamg"},
                                {"pc_type": "gpuamg", "pc_gpuamg_vector_type": "float32"}])
def test_single_reduction_takes_the_iterations_of_cg_single_reduction(pc):
    """-ksp_graphcg_single_reduction is Chronopoulos and Gear's iteration, as
    PETSc's cg -ksp_cg_single_reduction: the same iterations, norms and
    solution (on several ranks, one sum of the two dot products an
    iteration; gpuamg's float32 cycle in parallel takes float64 vectors)."""
    if COMM.getSize() > 1 and pc.get("pc_gpuamg_vector_type") == "float32":
        pytest.skip("float32 cycle vectors are one rank's")
    csr, n = laplacian(12), 12**3
    cg, x = krylov_solve(csr, n, {"ksp_type": "cg", "ksp_norm_type": "unpreconditioned",
                                  "ksp_cg_single_reduction": 1, **pc})
    ksp, y = solve(csr, n, {**SINGLE, **pc})
    two, z = solve(csr, n, {"ksp_norm_type": "unpreconditioned", **pc})
    assert ksp.getPythonContext().single_reduction and not two.getPythonContext().single_reduction
    assert cg.getConvergedReason() > 0 and ksp.getConvergedReason() > 0
    assert ksp.getIterationNumber() == cg.getIterationNumber() == two.getIterationNumber()
    for other in (x, z):
        numpy.testing.assert_allclose(values(y), values(other), rtol=1e-9, atol=1e-9 * abs(values(other)).max())
    assert ksp.getResidualNorm() == pytest.approx(cg.getResidualNorm(), rel=1e-6)


def test_single_reduction_needs_the_unpreconditioned_norm():
    with pytest.raises(PETSc.Error, match="single_reduction takes the unpreconditioned norm"):
        solve(laplacian(4), 64, {"pc_type": "jacobi", "ksp_norm_type": "preconditioned",
                                 "ksp_graphcg_single_reduction": 1})


@pytest.mark.parametrize("single", [False, True])
def test_indefinite_operator_and_preconditioner_are_reported(single):
    """What CG's steps flag, Chronopoulos and Gear's flag too."""
    opts = SINGLE if single else {}
    indptr, indices, data = laplacian(6)
    A = (scipy.sparse.csr_matrix((data, indices, indptr)) - 3.0 * scipy.sparse.eye(216)).tocsr()
    ksp, _ = solve((A.indptr, A.indices, A.data), 216, {"pc_type": "none", **opts})
    assert ksp.getConvergedReason() == Reason.DIVERGED_INDEFINITE_MAT
    M = aij_from_csr(*laplacian(6), (216, 216), comm=PETSc.COMM_SELF, mat_type="gpusell")
    ksp = ksp_of(M, pc="python")
    for key, value in opts.items():
        PETSc.Options().setValue(key, value)
    try:
        ksp.setFromOptions()
    finally:
        for key in opts:
            PETSc.Options().delValue(key)
    ksp.getPC().setPythonContext(NegatedIdentity())
    b, x = M.createVecs()
    b.set(1.0)
    ksp.solve(b, x)
    assert ksp.getPythonContext().single_reduction == single
    assert ksp.getConvergedReason() == Reason.DIVERGED_INDEFINITE_PC


# --- the loop the device ends (here on NumPy: the host loop; on a GPU a WHILE node) ---


def device_loop(csr, n, limits, test=(1, 1e-8, 0.0, 1e5), guess=None, single_reduction=False):
    """DeviceCG from x = ``guess`` (None: 0), b = 1 with Jacobi, then loops of at most each of
    ``limits`` iterations (the first from the start): the iterations of each, and x.
    ``single_reduction``: Chronopoulos and Gear's iterations, in the unpreconditioned order."""
    from gpu_mats.device_cg import DeviceCG

    A = scipy.sparse.csr_matrix((csr[2], csr[1], csr[0]), shape=(n, n))
    inverse_diagonal = 1.0 / A.diagonal()
    cg = DeviceCG(numpy, n, max(limits))

    def multiply(v, out):
        out[...] = A @ v

    def precondition(r, out):
        numpy.multiply(inverse_diagonal, r, out=out)

    if guess is not None:
        cg.x[...] = guess
    cg.start(numpy.ones(n), guess is not None, multiply, precondition, reference=test[0],
             unpreconditioned=single_reduction, single_reduction=single_reduction)
    counts = []
    for k, limit in enumerate(limits):
        cg.loop(limit, test, multiply, precondition, start=k == 0)
        counts.append(len(cg.read()[0]) - 1)
    return counts, cg.x.copy()


@pytest.mark.parametrize("single", [False, True])
def test_device_loop_stops_where_petsc_default_test_does(single):
    csr, n = laplacian(10), 1000
    cg, x = krylov_solve(csr, n, {"ksp_type": "cg", "pc_type": "jacobi", "ksp_norm_type": "unpreconditioned",
                                  "ksp_cg_single_reduction": int(single)}, comm=PETSc.COMM_SELF)
    counts, y = device_loop(csr, n, [200], single_reduction=single)
    assert cg.getConvergedReason() > 0 and counts == [cg.getIterationNumber()]
    numpy.testing.assert_allclose(y, values(x), rtol=1e-10)


@pytest.mark.parametrize("norm", ["natural", "unpreconditioned", "preconditioned"])
def test_device_loop_after_a_guess_stops_where_petsc_default_test_does(norm):
    """PETSc's test measures from ||b|| (in the KSP's norm) after a nonzero guess, not from the start's residual."""
    from gpu_mats.device_cg import NORMS

    csr, n = laplacian(10), 1000
    ksp = ksp_of(aij_from_csr(*csr, (n, n), comm=PETSc.COMM_SELF, mat_type="aij"), kind="cg")
    ksp.setNormType(getattr(PETSc.KSP.NormType, norm.upper()))
    ksp.setInitialGuessNonzero(True)
    ksp.setTolerances(rtol=1e-6)
    b, x = ksp.getOperators()[0].createVecs()
    b.set(1.0)
    x.set(0.1)
    ksp.solve(b, x)
    counts, y = device_loop(csr, n, [200], test=(NORMS.index(norm), 1e-6, 0.0, 1e5), guess=numpy.full(n, 0.1))
    assert ksp.getConvergedReason() > 0 and counts == [ksp.getIterationNumber()]
    numpy.testing.assert_allclose(y, values(x), rtol=1e-8)


@pytest.mark.parametrize("single", [False, True])
def test_device_loop_stopped_at_its_limit_resumes_to_the_same_bits(single):
    csr, n = laplacian(10), 1000
    (whole,), x = device_loop(csr, n, [200], single_reduction=single)
    counts, y = device_loop(csr, n, [5, 200], single_reduction=single)
    assert counts == [5, whole - 5] and numpy.array_equal(x, y)


def test_device_loop_stops_on_divergence_and_flags():
    indptr, indices, data = laplacian(6)
    indefinite = (scipy.sparse.csr_matrix((data, indices, indptr)) - 3.0 * scipy.sparse.eye(216)).tocsr()
    counts, _ = device_loop((indefinite.indptr, indefinite.indices, indefinite.data), 216, [100])
    assert counts[0] < 100  # the FLAG stopped it
    counts, _ = device_loop(laplacian(6), 216, [100], test=(1, 1e-12, 0.0, 0.5))
    assert counts == [0]  # the start's norm is above dtol times itself: no iteration


# --- bad input ---------------------------------------------------------------


def test_indefinite_matrix_is_reported_not_returned_as_converged():
    indptr, indices, data = laplacian(6)
    A = (scipy.sparse.csr_matrix((data, indices, indptr)) - 3.0 * scipy.sparse.eye(216)).tocsr()
    ksp, _ = solve((A.indptr, A.indices, A.data), 216, {"pc_type": "none"})
    assert ksp.getConvergedReason() == Reason.DIVERGED_INDEFINITE_MAT


def test_indefinite_preconditioner_is_reported():
    A = aij_from_csr(*laplacian(6), (216, 216), comm=PETSc.COMM_SELF, mat_type="gpusell")
    ksp = ksp_of(A, pc="python")
    ksp.getPC().setPythonContext(NegatedIdentity())
    b, x = A.createVecs()
    b.set(1.0)
    ksp.solve(b, x)
    assert ksp.getConvergedReason() == Reason.DIVERGED_INDEFINITE_PC


@pytest.mark.parametrize("kind", ["graphcg", "cacg"])
def test_nan_in_the_right_hand_side_is_diverged_nanorinf(kind):
    rhs = numpy.ones(64)
    rhs[3] = numpy.nan
    ksp, _ = solve(laplacian(4), 64, {"ksp_type": kind, "pc_type": "jacobi"}, rhs=rhs, comm=PETSc.COMM_SELF)
    assert ksp.getConvergedReason() == Reason.DIVERGED_NANORINF


def test_max_it_stops_with_diverged_max_it():
    ksp, _ = solve(laplacian(8), 512, {"pc_type": "jacobi", "ksp_graphcg_block": 4}, max_it=6)
    assert ksp.getConvergedReason() == Reason.DIVERGED_MAX_IT and ksp.getIterationNumber() == 6


def test_norm_none_is_refused_by_petsc():
    with pytest.raises(PETSc.Error, match="does not support norm type NONE"):
        solve(laplacian(3), 27, {"ksp_norm_type": "none"})


# --- the GPU: kernels against their twins, graphs against launches -----------


@pytest.mark.gpu
def test_cuda_steps_match_their_numpy_twins(rng):
    if not gpu_usable():
        pytest.skip("no usable GPU")
    import cupy

    from gpu_mats.kernels import family

    cuda, host = family("pcg", cupy), family("pcg", numpy)
    n = 100_003
    a, b, c = (rng.standard_normal(n) for _ in range(3))
    sums = {}
    for kernels, xp in ((cuda, cupy), (host, numpy)):
        partials = xp.zeros((3, kernels.partial_count(n)))
        total = xp.zeros(3)
        kernels.partial_dots(partials, *(xp.asarray(v) for v in (a, b, b, c, c, c)))
        kernels.sum_partials(total, partials)
        s, history = xp.asarray([2.0] + [0.0] * 8), xp.zeros((3, 3))
        kernels.alpha_step(s, xp.asarray([4.0, 0.0, 0.0]))
        x, r, p = (xp.asarray(v).copy() for v in (a, b, c))
        kernels.update_iterate(s, x, r, p, xp.asarray(a))
        s[4] = 1.0  # ROW: the step writes row 2
        kernels.beta_step(s, xp.asarray([1.0, 3.0, 5.0]), history, False)
        kernels.update_direction(s, p, xp.asarray(b))
        q = p.copy()
        kernels.update_direction(s, q, xp.asarray(c, dtype=numpy.float32))  # a float32 cycle's z, as it is
        verdicts = []
        for mode, row in ((0, 0), (1, 2), (1, 1), (2, 1)):  # START, AFTER_ITERATION, RESUME
            s[4] = row
            kernels.loop_test(s, history, 1, 0.5, 0.0, 1e5, 2, mode, 0)
            verdicts.append(float(s[5]))
        t, u = s.copy(), xp.zeros(3)
        kernels.direction_step(t, u, (partials, xp.zeros(1, dtype=numpy.uint32), xp.asarray(a),
                                      xp.asarray(c, dtype=numpy.float32)))
        sums[xp.__name__] = [numpy.asarray(v.get() if xp is cupy else v)
                             for v in (total, s, history, x, r, p, q, t, u)]
        sums[xp.__name__].append(numpy.asarray(verdicts))
    for got, want in zip(sums["cupy"], sums["numpy"]):
        numpy.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 1000, 300_001])
def test_steps_with_their_dots_give_the_bits_of_dots_then_a_step(rng, n):
    """alpha_step and beta_step that take their dot products (the last block
    of the launch summing the partials) give the bits of partial_dots,
    sum_partials and then the step, on the GPU and on the host, launch after
    launch (the block count left at 0)."""
    if not gpu_usable():
        pytest.skip("no usable GPU")
    import cupy

    from gpu_mats.kernels import family

    p, w, r, z = (rng.standard_normal(n) for _ in range(4))
    r = abs(r) + 0.5
    z = abs(z) + 0.5  # r . z positive: no flag
    for xp in (cupy, numpy):
        k = family("pcg", xp)
        p_, w_, r_, z_ = (xp.asarray(v) for v in (p, w, r, z))
        partials, arrivals = xp.zeros((3, k.partial_count(n))), xp.zeros(1, dtype=numpy.uint32)
        runs = []
        for fused in (False, True, True):
            s, sums, history = xp.asarray([2.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]), xp.zeros(3), xp.zeros((4, 3))
            if not fused:
                k.partial_dots(partials, p_, w_)
                k.sum_partials(sums, partials)
            k.alpha_step(s, sums, (partials, arrivals, p_, w_) if fused else None)
            if not fused:
                k.partial_dots(partials, r_, z_, r_, r_, z_, z_)
                k.sum_partials(sums, partials)
            k.beta_step(s, sums, history, False, (partials, arrivals, r_, z_) if fused else None)
            runs.append([numpy.asarray(a.get() if xp is cupy else a) for a in (s, sums, history)])
        assert int(arrivals[0]) == 0
        for separate, fused, again in zip(*runs):
            assert numpy.array_equal(separate, fused) and numpy.array_equal(fused, again)
        numpy.testing.assert_allclose(runs[1][2][2], [r @ z, r @ r, z @ z], rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("norm", [0.4, 0.05])  # above the target (the loop goes on), below it (it stops)
def test_a_beta_step_with_the_loop_test_gives_the_bits_of_the_two(rng, norm):
    """beta_step given the loop's test takes it in the same launch as its dot
    products: the scalars, history and verdict of beta_step then loop_test,
    on the GPU and on the host."""
    if not gpu_usable():
        pytest.skip("no usable GPU")
    import cupy

    from gpu_mats.kernels import family
    from gpu_mats.kernels.pcg import AFTER_ITERATION, GO

    r, z = rng.standard_normal(5000), rng.standard_normal(5000)
    r *= norm / numpy.linalg.norm(r)
    z = abs(z) * numpy.sign(r)  # r . z positive: no flag
    test = (1, 0.1, 0.0, 1e5, 10)  # the unpreconditioned norm's column, rtol, atol, dtol, limit
    for xp in (cupy, numpy):
        k = family("pcg", xp)
        runs = []
        for fused in (False, True):
            s = xp.asarray([2.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.1, 1e5, 0.0])  # the target 0.1 (rtol x a norm of 1)
            sums, history = xp.zeros(3), xp.zeros((4, 3))
            partials, arrivals = xp.zeros((3, k.partial_count(r.size))), xp.zeros(1, dtype=numpy.uint32)
            dots = (partials, arrivals, xp.asarray(r), xp.asarray(z))
            k.beta_step(s, sums, history, False, dots, (*test, 0) if fused else None)
            if not fused:
                k.loop_test(s, history, *test, AFTER_ITERATION, 0)
            runs.append([numpy.asarray(a.get() if xp is cupy else a) for a in (s, sums, history)])
        for separate, fused in zip(*runs):
            assert numpy.array_equal(separate, fused)
        assert runs[1][0][GO] == (1.0 if norm > 0.1 else 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize("norm", [0.4, 0.05])  # above the target (the loop goes on), below it (it stops)
def test_record_and_direction_steps_with_their_dots_and_test_give_the_bits_of_their_parts(rng, norm):
    """The steps of a solve on the unpreconditioned norm (record_step before
    the preconditioner, direction_step after it): taking their dot products,
    and the record the loop's test, in one launch gives the bits of the parts
    in turn, on the GPU and on the host; the GPU's scalars are the host's."""
    if not gpu_usable():
        pytest.skip("no usable GPU")
    import cupy

    from gpu_mats.kernels import family
    from gpu_mats.kernels.pcg import AFTER_ITERATION, BETA, GO, RZ

    r, z = rng.standard_normal(5000), rng.standard_normal(5000)
    r *= norm / numpy.linalg.norm(r)
    z = abs(z) * numpy.sign(r)  # r . z positive: no flag
    test = (1, 0.1, 0.0, 1e5, 10)
    results = {}
    for xp in (cupy, numpy):
        k = family("pcg", xp)
        runs = []
        for fused in (False, True):
            s = xp.asarray([2.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.1, 1e5, 0.0])  # rz 2, row 1, the target 0.1
            sums, history = xp.zeros(3), xp.zeros((4, 3))
            partials, arrivals = xp.zeros((3, k.partial_count(r.size))), xp.zeros(1, dtype=numpy.uint32)
            r_, z_ = xp.asarray(r), xp.asarray(z)
            if not fused:
                k.partial_dots(partials, r_, r_)
                k.sum_partials(sums, partials)
            k.record_step(s, sums, history, False, (partials, arrivals, r_) if fused else None,
                          (*test, 0) if fused else None)
            if not fused:
                k.loop_test(s, history, *test, AFTER_ITERATION, 0)
                k.partial_dots(partials, r_, z_)
                k.sum_partials(sums, partials)
            k.direction_step(s, sums, (partials, arrivals, r_, z_) if fused else None)
            runs.append([numpy.asarray(a.get() if xp is cupy else a) for a in (s, sums, history)])
        for separate, fused in zip(*runs):
            assert numpy.array_equal(separate, fused)
        s, _, history = runs[1]
        assert s[GO] == (1.0 if norm > 0.1 else 0.0) and s[RZ] == pytest.approx(r @ z, rel=1e-12)
        assert s[BETA] == pytest.approx((r @ z) / 2.0, rel=1e-12)
        numpy.testing.assert_allclose(history[2], [0.0, r @ r, 0.0], rtol=1e-12)
        results[xp.__name__] = runs[1]
    for got, want in zip(results["cupy"], results["numpy"]):
        numpy.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def fused_against_parts(n, vectors, launch, atol):
    """``launch(k, fused, arrays)`` on CuPy and on NumPy: the parts (fused
    False), then the fused launch twice, each from fresh copies of
    ``vectors`` (name: host array) beside CG's scalars s (rz 2, alpha 0.5,
    the history's row 1, the target 0.1), sums, history, partials and
    arrivals. The fused launch must give the parts' bits, launch after
    launch, and the GPU's values the host's (rtol 1e-12, ``atol(want)``);
    returns each backend's fused run (name: array), CuPy's then NumPy's."""
    import cupy

    from gpu_mats.kernels import family

    results = {}
    for xp in (cupy, numpy):
        k = family("pcg", xp)
        partials, arrivals = xp.zeros((3, k.partial_count(n))), xp.zeros(1, dtype=numpy.uint32)
        runs = []
        for fused in (False, True, True):
            arrays = {"s": xp.asarray([2.0, 0.5, 0.0, 0.0, 1.0, 0.0, 0.1, 1e5, 0.0]), "sums": xp.zeros(3),
                      "history": xp.zeros((4, 3)), **{name: xp.array(v) for name, v in vectors.items()}}
            launch(k, fused, {**arrays, "partials": partials, "arrivals": arrivals})
            runs.append({name: numpy.asarray(a.get() if xp is cupy else a) for name, a in arrays.items()})
        assert int(arrivals[0]) == 0
        for name in runs[0]:
            assert numpy.array_equal(runs[0][name], runs[1][name]), name
            assert numpy.array_equal(runs[1][name], runs[2][name]), name
        results[xp.__name__] = runs[1]
    for name, want in results["numpy"].items():
        numpy.testing.assert_allclose(results["cupy"][name], want, rtol=1e-12, atol=atol(want), err_msg=name)
    return results["cupy"], results["numpy"]


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 5000, 300_001])
@pytest.mark.parametrize("norm", [0.4, 0.05, None])  # the loop goes on, it stops; no test (a block)
def test_an_update_with_the_record_gives_the_bits_of_the_update_then_the_record(rng, n, norm):
    """update_record_step (the end of an iteration on the unpreconditioned
    norm) gives the bits of update_iterate, then record_step with its dot
    product and the loop's test, on the GPU and on the host, launch after
    launch; the GPU's values are the host's."""
    if not gpu_usable():
        pytest.skip("no usable GPU")
    from gpu_mats.kernels.pcg import GO

    x, r, p, w = (rng.standard_normal(n) for _ in range(4))
    if norm is not None:
        r *= norm / numpy.linalg.norm(r)
        w *= 1e-3 * norm / numpy.linalg.norm(w)
    test = None if norm is None else (1, 0.1, 0.0, 1e5, 10, 0)

    def launch(k, fused, a):
        if fused:
            k.update_record_step(a["s"], a["sums"], a["history"], a["x"], a["r"], a["p"], a["w"], a["partials"],
                                 a["arrivals"], test)
        else:
            k.update_iterate(a["s"], a["x"], a["r"], a["p"], a["w"])
            k.record_step(a["s"], a["sums"], a["history"], False, (a["partials"], a["arrivals"], a["r"]), test)

    for run in fused_against_parts(n, {"x": x, "r": r, "p": p, "w": w}, launch, lambda want: 1e-15):
        numpy.testing.assert_allclose(run["r"], r - 0.5 * w, rtol=1e-15)
        numpy.testing.assert_allclose(run["history"][2], [0.0, run["r"] @ run["r"], 0.0], rtol=1e-12)
        if norm is not None:
            assert run["s"][GO] == (1.0 if norm > 0.1 else 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 5000, 300_001])
@pytest.mark.parametrize("norm", [0.4, 0.05, None])  # the loop goes on, it stops; no test (a block)
def test_chronopoulos_gear_steps_give_the_bits_of_their_parts(rng, n, norm):
    """single_step taking its dot products gives the bits of partial_dots,
    sum_partials and then the step; update_record_step given z and A z (the
    direction, A p's recurrence, the update and r's record with the loop's
    test in one launch) those of single_update then record_step, on the GPU
    and on the host, launch after launch; the GPU's values are the host's."""
    if not gpu_usable():
        pytest.skip("no usable GPU")
    from gpu_mats.kernels.pcg import ALPHA, BETA, GO, RZ

    x, r, p, w, q = (rng.standard_normal(n) for _ in range(5))
    if norm is not None:
        r *= norm / numpy.linalg.norm(r)
    # z nearly orthogonal to r (r . z small and positive: where n > 1 the update moves r's norm little), A z = 4 z
    z = q - (q @ r) / (r @ r) * r + 1e-3 * r
    az = 4.0 * z
    test = None if norm is None else (1, 0.1, 0.0, 1e5, 10, 0)

    def launch(k, fused, a):
        s, sums, history, partials, arrivals = (a[name] for name in ("s", "sums", "history", "partials", "arrivals"))
        if fused:
            k.single_step(s, sums, (partials, arrivals, a["r"], a["z"], a["az"]))
            k.update_record_step(s, sums, history, a["x"], a["r"], a["p"], a["w"], partials, arrivals, test,
                                 a["rounded"], a["z"], a["az"])
        else:
            k.partial_dots(partials, a["r"], a["z"], a["az"], a["z"])
            k.sum_partials(sums, partials)
            k.single_step(s, sums)
            k.single_update(s, a["x"], a["r"], a["p"], a["w"], a["z"], a["az"])
            a["rounded"][...] = a["r"]
            k.record_step(s, sums, history, False, (partials, arrivals, a["r"]), test)

    vectors = {"x": x, "r": r, "p": p, "w": w, "z": z, "az": az, "rounded": numpy.zeros(n, dtype=numpy.float32)}
    beta = (r @ z) / 2.0
    # fma on the GPU: rounding-level differences
    for run in fused_against_parts(n, vectors, launch, lambda want: 1e-14 * max(abs(want).max(), 1.0)):
        s, r_ = run["s"], run["r"]
        assert s[RZ] == pytest.approx(r @ z, rel=1e-12) and s[BETA] == pytest.approx(beta, rel=1e-12)
        assert s[ALPHA] == pytest.approx((r @ z) / (z @ az - beta * (r @ z) / 0.5), rel=1e-10)
        numpy.testing.assert_allclose(run["p"], z + beta * p, rtol=1e-12, atol=1e-14)
        numpy.testing.assert_allclose(r_, r - s[ALPHA] * (az + beta * w), rtol=1e-12, atol=1e-14)
        numpy.testing.assert_allclose(run["history"][2], [0.0, r_ @ r_, 0.0], rtol=1e-12)
        assert numpy.array_equal(run["rounded"], r_.astype(numpy.float32))
        if norm is not None:
            assert s[GO] == (1.0 if numpy.linalg.norm(r_) > 0.1 else 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize("loop", [True, False])
@pytest.mark.parametrize("single", [False, True])
def test_graph_replays_give_the_bits_of_launches(loop, single):
    """One KSP (one gpuamg hierarchy): the solve launched kernel by kernel,
    then captured (its second run) and replayed, in blocks or in a loop the
    device ends: the same iterate, bit for bit; so too for Chronopoulos and
    Gear's iterations (``single``), in the unpreconditioned norm they take."""
    if not gpu_usable():
        pytest.skip("no usable GPU")
    from gpu_mats.kernels import conditional_loops

    if loop and conditional_loops() is not None:
        pytest.skip(conditional_loops())
    csr, n = laplacian(16), 16**3
    A = aij_from_csr(*csr, (n, n), comm=PETSc.COMM_SELF, mat_type="gpusell")
    ksp = ksp_of(A, pc="gpuamg")
    ksp.setInitialGuessNonzero(True)
    if single:
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    ctx = ksp.getPythonContext()
    ctx.loop, ctx.single_reduction = loop, single
    b, x = A.createVecs()
    b.set(1.0)
    runs = []
    for graphs in (False, False, True, True, True):
        ctx.use_graphs = graphs
        x.set(0.5)
        ksp.solve(b, x)
        runs.append((values(x), ksp.getIterationNumber(), ctx.runs))
    replayed = "CUDA graph replays of loops the device ends" if loop else "CUDA graph replays"
    assert [run[2] for run in runs] == ["kernel launches"] * 2 + [replayed] * 3
    assert ctx.blocks_run == 1  # the second solve on learnt the count: one block, start included
    for result, its, _ in runs[2:]:
        assert its == runs[1][1] and numpy.array_equal(result, runs[1][0])
