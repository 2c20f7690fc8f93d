"""gpuamg over several MPI ranks (gpu_mats.distributed_amg, gpu_mats.row_blocks)
on the host backend: the distributed products against scipy's, the
hierarchy's cycle against its serial counterpart, singular matrices, new
values, errors and the view. Run under mpiexec -n 2 and -n 3 by make test."""

import numpy
import pytest
import scipy.sparse
from mpi4py import MPI
from petsc4py import PETSc

import plugin  # noqa: F401
from conftest import krylov_solve
from gpu_mats.amg import AggregationAMG
from gpu_mats.distributed_amg import DistributedAggregationAMG
from gpu_mats.row_blocks import asymmetry, fetch_rows, galerkin, multiply, ownership, transpose
from test_gpuamg import csr_arrays, poisson_2d, stencil, tetrahedra

pytestmark = pytest.mark.mpi
COMM = MPI.COMM_WORLD
several_ranks = pytest.mark.skipif(COMM.size == 1, reason="the PC distributes its hierarchy on several ranks only")


def split(n, empty_rank=None):
    """starts of n rows over the ranks, ``empty_rank`` given none (on more than one rank)."""
    owners = [p for p in range(COMM.size) if p != empty_rank or COMM.size == 1]
    counts = [0] * COMM.size
    for k, p in enumerate(owners):
        counts[p] = n * (k + 1) // len(owners) - n * k // len(owners)
    return numpy.concatenate(([0], numpy.cumsum(counts)))


def mine(M, starts):
    return M.tocsr()[starts[COMM.rank]:starts[COMM.rank + 1]]


def whole(rows):
    """The matrix whose rows the ranks hold as ``rows`` (global columns), on every rank."""
    return scipy.sparse.vstack(COMM.allgather(rows)).tocsr()


def test_transpose_fetch_multiply_and_galerkin_equal_scipys():
    rng = numpy.random.default_rng(3)
    A = scipy.sparse.random(40, 40, density=0.1, random_state=rng, format="csr")
    A = (A + A.T).tocsr()
    P = scipy.sparse.random(40, 9, density=0.2, random_state=rng, format="csr")
    fine, coarse = split(40), split(9, empty_rank=COMM.size - 1)
    A_rows, P_rows = mine(A, fine), mine(P, fine)
    assert abs(whole(transpose(P_rows, fine, coarse, COMM)) - P.T).max() < 1e-15
    wanted = numpy.array([0, 7, 21, 39])
    assert abs(fetch_rows(A_rows, fine, wanted, COMM) - A[wanted]).max() < 1e-15
    assert abs(whole(multiply(A_rows, P_rows, fine, COMM)) - A @ P).max() < 1e-14
    assert abs(whole(galerkin(P_rows, A_rows, fine, coarse, COMM)) - P.T @ A @ P).max() < 1e-13
    assert list(ownership(COMM.rank + 1, COMM)) == [0] + list(numpy.cumsum(range(1, COMM.size + 1)))


def test_asymmetry_sees_entries_across_ranks():
    A = poisson_2d(8).tolil()
    starts = split(64)
    i = starts[1] - 1
    j = i + 8 if i + 8 < 64 else i - 8  # neighbours on the grid: a_ij on rank 0, a_ji on rank 1 (of several)
    A[i, j] = -1.5
    A = A.tocsr()
    expected = numpy.sqrt(2 * 0.5**2) / scipy.sparse.linalg.norm(A)
    assert asymmetry(mine(A, starts), starts, COMM) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("empty_rank", [None, 1])
def test_the_distributed_cycle_is_symmetric_and_as_good_as_the_serial_one(empty_rank):
    A = stencil(16, 7)
    starts = split(A.shape[0], empty_rank)
    rows = mine(A, starts)
    amg = DistributedAggregationAMG(rows.indptr, rows.indices, rows.data, starts, COMM, numpy, coarse_size=100)
    serial = AggregationAMG(*csr_arrays(A), A.shape[0], numpy, coarse_size=100)
    assert len(amg.levels) == len(serial.levels) >= 3
    assert amg.complexities()[0] <= 1.1 * serial.complexities()[0]
    rng = numpy.random.default_rng(COMM.rank)
    v, w = rng.standard_normal((2, rows.shape[0]))
    Mv, Mw = numpy.empty_like(v), numpy.empty_like(w)
    amg.apply(v, Mv)
    amg.apply(w, Mw)
    wMv, vMw, vMv = (COMM.allreduce(float(a @ b)) for a, b in ((w, Mv), (v, Mw), (v, Mv)))
    assert wMv == pytest.approx(vMw, rel=1e-12)
    assert vMv > 0


def test_sparsified_coarse_rows_across_ranks_are_symmetric_and_lower_the_complexity():
    """The coarse levels sparsified on several ranks (the column maxima of
    other ranks' rows come by exchange): the first coarse level is exactly
    symmetric, keeps the Galerkin level's row sums and has fewer entries, and
    the operator complexity falls."""
    A = stencil(16, 7)
    starts = split(A.shape[0])
    rows = mine(A, starts)
    plain, sparse = (DistributedAggregationAMG(rows.indptr, rows.indices, rows.data, starts, COMM, numpy,
                                               coarse_size=100, sparsify=theta) for theta in (0.0, 0.2))
    assert sparse.complexities()[0] < plain.complexities()[0]
    first = plain.levels[0]
    product = galerkin(first.galerkin_P, rows, starts, first.coarse_starts, COMM)
    coarse, galerkin_whole = whole(sparse._coarse_rows(product, first.coarse_starts)), whole(product)
    assert coarse.nnz < galerkin_whole.nnz
    assert abs(coarse - coarse.T).max() == 0.0
    numpy.testing.assert_allclose(numpy.asarray(coarse.sum(axis=1)).ravel(),
                                  numpy.asarray(galerkin_whole.sum(axis=1)).ravel(), rtol=0,
                                  atol=1e-13 * abs(coarse).max())


def test_a_singular_neumann_matrix_converges_on_several_ranks_as_on_one():
    A = tetrahedra()
    rng = numpy.random.default_rng(0)
    b = rng.standard_normal(A.shape[0])
    b -= b.mean()
    counts = []
    for comm in (PETSc.COMM_SELF, PETSc.COMM_WORLD):
        ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                          "ksp_norm_type": "unpreconditioned"},
                              comm=comm, rhs=b, nullspace=True, mat_type="aij")
        assert ksp.getConvergedReason() > 0
        counts.append(ksp.getIterationNumber())
        residual = b[slice(*x.getOwnershipRange())] - (A @ whole_vector(x))[slice(*x.getOwnershipRange())]
        assert numpy.sqrt(COMM.allreduce(residual @ residual) if comm is PETSc.COMM_WORLD else residual @ residual) \
            <= 1e-7 * numpy.linalg.norm(b)
    assert counts[1] <= 1.3 * counts[0], counts


def whole_vector(x):
    return numpy.concatenate(x.getComm().tompi4py().allgather(x.getArray().copy()))


def test_new_values_on_the_same_pattern_give_the_cycle_of_a_new_set_up():
    """A scaled matrix has the aggregates and prolongations of the first: a refresh is then a new set-up."""
    A = stencil(12, 7)
    starts = split(A.shape[0])
    rows = mine(A, starts)
    scaled = mine(3.0 * A, starts)
    amg = DistributedAggregationAMG(rows.indptr, rows.indices, rows.data, starts, COMM, numpy, coarse_size=50)
    assert amg.has_pattern(scaled.indptr, scaled.indices)
    amg.refresh(scaled.data)
    fresh = DistributedAggregationAMG(scaled.indptr, scaled.indices, scaled.data, starts, COMM, numpy, coarse_size=50)
    v = numpy.random.default_rng(COMM.rank).standard_normal(rows.shape[0])
    out = [numpy.empty_like(v) for _ in range(2)]
    amg.apply(v, out[0])
    fresh.apply(v, out[1])
    assert amg.generation == 1
    assert numpy.allclose(out[0], out[1], rtol=1e-10, atol=1e-12 * abs(out[1]).max())


def test_a_matrix_asymmetric_across_ranks_is_refused_on_every_rank():
    A = poisson_2d(8).tolil()
    starts = split(64)
    i = starts[1] - 1
    A[i, i + 8 if i + 8 < 64 else i - 8] = -1.5
    with pytest.raises(PETSc.Error, match=r"symmetric matrix: \|\|A - A\^T\|\|_F"):
        krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg"}, mat_type="aij")


@several_ranks
def test_a_non_positive_diagonal_is_named_by_its_global_row_on_every_rank():
    A = poisson_2d(8).tolil()
    row = split(64)[1] + 2
    A[row, row] = 0.0
    with pytest.raises(PETSc.Error, match=rf"row {row} \(on rank 1\) of level 0 has 0"):
        krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg"}, mat_type="aij")


@several_ranks
def test_the_k_cycle_is_refused_in_parallel_with_the_reason():
    A = poisson_2d(10)
    with pytest.raises(PETSc.Error, match="K-cycle runs on one rank only"):
        krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "fcg", "pc_type": "gpuamg", "pc_gpuamg_cycle": "k"},
                     mat_type="aij")


@several_ranks
def test_the_view_shows_the_whole_hierarchy_over_the_ranks(capfd):
    A = stencil(14, 7)
    ksp, _ = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                      "pc_gpuamg_coarse_size": 100}, mat_type="aij")
    capfd.readouterr()
    ksp.getPC().view()
    out = capfd.readouterr().out
    if COMM.rank == 0:
        assert f"split over {COMM.size} ranks" in out
        assert f"    0      {A.shape[0]:4d} {A.nnz:14d}" in out


def test_the_pc_refreshes_new_values_on_every_rank_and_rebuilds_for_a_new_pattern():
    A = stencil(12, 7)
    ksp, x = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg"}, mat_type="aij")
    its = ksp.getIterationNumber()
    M = ksp.getOperators()[0]
    M.scale(2.0)
    b = x.duplicate()
    b.set(1.0)
    ksp.solve(b, x)
    ctx = ksp.getPC().getPythonContext()
    assert ctx.refreshed and ksp.getConvergedReason() > 0 and ksp.getIterationNumber() == its
    M.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, False)
    lo = M.getOwnershipRange()[0]
    M.setValue(lo, (lo + A.shape[0] // 2) % A.shape[0], -1e-3)  # a new entry on every rank, made symmetric
    M.setValue((lo + A.shape[0] // 2) % A.shape[0], lo, -1e-3)
    M.assemble()
    ksp.solve(b, x)
    assert not ctx.refreshed and ksp.getConvergedReason() > 0


@pytest.mark.gpu
def test_the_cupy_distributed_hierarchy_is_the_numpy_one():
    """Halos through host MPI (the ranks may share one GPU): on the GPU the
    levels and the cycle of the host; under CG on aijcusparse matrices the
    host's iterations."""
    import cupy

    A = stencil(20, 7)
    starts = split(A.shape[0])
    rows = mine(A, starts)
    v = numpy.random.default_rng(COMM.rank).standard_normal(rows.shape[0])
    runs = {}
    for xp in (numpy, cupy):
        amg = DistributedAggregationAMG(xp.asarray(rows.indptr), xp.asarray(rows.indices), xp.asarray(rows.data),
                                        starts, COMM, xp, coarse_size=100, halo_transport="mpi")
        y = xp.empty(rows.shape[0])
        amg.apply(xp.asarray(v), y)
        runs[xp] = (amg.sizes()[:, 0].tolist(), y if xp is numpy else y.get())
    assert runs[cupy][0] == runs[numpy][0]
    numpy.testing.assert_allclose(runs[cupy][1], runs[numpy][1], rtol=1e-8, atol=1e-12 * abs(runs[numpy][1]).max())
    counts = {}
    for mat_type in ("aijcusparse", "aij"):
        ksp, _ = krylov_solve(csr_arrays(A), A.shape[0], {"ksp_type": "cg", "pc_type": "gpuamg",
                                                          "pc_gpuamg_halo_transport": "mpi"}, mat_type=mat_type)
        assert ksp.getConvergedReason() > 0
        assert ksp.getPC().getPythonContext().amg.xp is (cupy if mat_type == "aijcusparse" else numpy)
        counts[mat_type] = ksp.getIterationNumber()
    assert abs(counts["aijcusparse"] - counts["aij"]) <= 1
