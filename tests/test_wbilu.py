"""wbilu: block ILU(0) with level scheduling equals PETSc's ilu on BAIJ."""

import numpy
import pytest
import scipy.sparse
from petsc4py import PETSc

import plugin  # noqa: F401
from gpu_mats.block_ilu import BlockILU, graph_levels, grid_levels
from stencils import block_stencil
from petsc_ext.matrices import baij_from_bsr
from plugin.flow.boundary import walls_at_rest
from plugin.flow.box import box_geometry
from plugin.flow.operators import FlowOperators


def unstructured_blocks(nb, bs, seed=1):
    """A random symmetric block pattern (with triangles, so ILU(0) updates
    off-diagonal blocks too) and diagonally dominant values."""
    pattern = scipy.sparse.random(nb, nb, density=0.12, random_state=seed, format="csr")
    pattern = (pattern + pattern.T + scipy.sparse.eye(nb)).tocsr()
    pattern.sort_indices()
    rng = numpy.random.default_rng(seed)
    blocks = rng.uniform(-1, 1, (pattern.nnz, bs, bs))
    rows = numpy.repeat(numpy.arange(nb), numpy.diff(pattern.indptr))
    blocks[pattern.indices == rows] += 3 * bs * numpy.eye(bs) * numpy.diff(pattern.indptr)[:, None, None]
    return pattern.indptr.astype(numpy.int64), pattern.indices.astype(numpy.int64), blocks


def momentum_blocks(dt=0.2):
    """The flow driver's Crank-Nicolson momentum matrix I + dt/2 Omega^-1 D on
    a 3D box (walls and a periodic axis), the three velocity components of a
    cell as one block: m_ij I."""
    g = box_geometry((5, 4, 6), (1.0, 1.0, 0.5), (False, True, False))
    ops = FlowOperators(g, nu=0.05, boundary_conditions=walls_at_rest(g))
    n = ops.geometry.num_cells
    M = (scipy.sparse.identity(n) + scipy.sparse.diags(0.5 * dt / ops.volumes) @ ops.D).tocsr()
    M.sort_indices()
    return M.indptr.astype(numpy.int64), M.indices.astype(numpy.int64), M.data[:, None, None] * numpy.eye(3)


SYSTEMS = {"7-point": lambda bs: block_stencil(4, bs), "unstructured": lambda bs: unstructured_blocks(40, bs)}


def pc_solution(A, pc_type, b, options=()):
    ksp = PETSc.KSP().create(comm=A.getComm())
    ksp.setOperators(A)
    ksp.setType("preonly")
    ksp.getPC().setType(pc_type)
    for name, value in options:
        PETSc.Options()[name] = value
    ksp.setFromOptions()
    for name, _ in options:
        PETSc.Options().delValue(name)
    x = b.duplicate()
    ksp.solve(b, x)
    return ksp, x


def dense_factors(f):
    """L (unit lower) and U of a BlockILU as dense matrices in the natural order."""
    bs, nb = f.block_size, f.num_rows
    L, U = numpy.eye(nb * bs), numpy.zeros((nb * bs, nb * bs))
    for r, row in enumerate(f.order):
        rows = slice(row * bs, (row + 1) * bs)
        for ptr, cols, vals, M in ((f.lower_ptr, f.lower_cols, f.lower_vals, L),
                                   (f.upper_ptr, f.upper_cols, f.upper_vals, U)):
            for e in range(ptr[r], ptr[r + 1]):
                M[rows, cols[e] * bs:(cols[e] + 1) * bs] = vals[e]
        U[rows, rows] = numpy.linalg.inv(f.dinv[r])
    return L, U


@pytest.mark.parametrize("system, bs", [(system, bs) for system in SYSTEMS for bs in (1, 3, 5, 6)] + [("momentum", 3)])
def test_applies_equal_petsc_ilu(system, bs):
    indptr, indices, blocks = momentum_blocks() if system == "momentum" else SYSTEMS[system](bs)
    A = baij_from_bsr(indptr, indices, blocks, comm=PETSc.COMM_SELF)
    assert A.getType() == "seqbaij" and A.getBlockSize() == bs
    b = A.createVecLeft()
    b.setArray(numpy.random.default_rng(bs).standard_normal(b.getSize()))
    _, reference = pc_solution(A, "ilu", b)
    ksp, x = pc_solution(A, "wbilu", b)
    assert ksp.getPC().getType() == "wbilu"
    scale = numpy.abs(reference.getArray()).max()
    assert numpy.abs(x.getArray() - reference.getArray()).max() <= 1e-12 * scale


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("bs", [1, 6])
def test_factors_are_ilu0(system, bs):
    """(LU)_ij = a_ij on the block pattern: the defining property of ILU(0)."""
    indptr, indices, blocks = SYSTEMS[system](bs)
    f = BlockILU(indptr, indices, blocks, graph_levels(indptr, indices))
    L, U = dense_factors(f)
    A = scipy.sparse.bsr_matrix((blocks, indices, indptr)).toarray()
    pattern = scipy.sparse.bsr_matrix((numpy.ones_like(blocks), indices, indptr)).toarray() != 0
    product = L @ U
    assert numpy.abs(product - A)[pattern].max() <= 1e-12 * numpy.abs(A).max()
    if system == "unstructured":  # fill outside the pattern is dropped, so LU differs from A there
        assert numpy.abs(product[~pattern]).max() > 1e-3


@pytest.mark.parametrize("system", ["7-point bs 1", "7-point bs 6", "momentum"])
def test_gmres_iterations_equal_ilu(system):
    indptr, indices, blocks = {"7-point bs 1": lambda: block_stencil(6, 1), "7-point bs 6": lambda: block_stencil(6, 6),
                               "momentum": momentum_blocks}[system]()
    A = baij_from_bsr(indptr, indices, blocks, comm=PETSc.COMM_SELF)
    b = A.createVecLeft()
    b.set(1.0)
    counts = []
    for pc_type in ("ilu", "wbilu"):
        ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
        ksp.setOperators(A)
        ksp.setType("gmres")
        ksp.getPC().setType(pc_type)
        ksp.setTolerances(rtol=1e-10)
        x = b.duplicate()
        ksp.solve(b, x)
        assert ksp.getConvergedReason() > 0
        counts.append(ksp.getIterationNumber())
    assert counts[0] == counts[1] and counts[0] > 2


def test_levels_graph_and_grid_agree():
    indptr, indices, _ = block_stencil(5, 1)
    levels = graph_levels(indptr, indices)
    assert numpy.array_equal(levels, grid_levels((5, 5, 5)))
    assert levels.max() + 1 == 3 * 5 - 2
    indptr, indices, _ = unstructured_blocks(60, 1)
    levels = graph_levels(indptr, indices)
    rows = numpy.repeat(numpy.arange(60), numpy.diff(indptr))
    lower = indices < rows
    assert (levels[indices[lower]] < levels[rows[lower]]).all()
    # each row above level 0 waits on a row of the level just below
    for row in numpy.flatnonzero(levels > 0):
        assert levels[row] - 1 in levels[indices[indptr[row]:indptr[row + 1]]]


def dmda_matrix(n, bs, stencil=PETSc.DMDA.StencilType.STAR):
    da = PETSc.DMDA().create(dim=3, sizes=(n, n, n), dof=bs, stencil_width=1, stencil_type=stencil,
                             comm=PETSc.COMM_SELF)
    da.setMatType("baij")
    A = da.createMat()
    indptr, indices, blocks = block_stencil(n, bs)
    for row in range(n ** 3):
        cols = indices[indptr[row]:indptr[row + 1]].astype(PETSc.IntType)
        A.setValuesBlocked([row], cols, numpy.hstack(list(blocks[indptr[row]:indptr[row + 1]])).ravel())
    A.assemble()
    return A


def test_dmda_levels_view_and_help(capfd):
    A = dmda_matrix(4, 2)
    b = A.createVecLeft()
    b.set(1.0)
    _, reference = pc_solution(A, "ilu", b)
    ksp, x = pc_solution(A, "wbilu", b, [("help", None)])
    assert numpy.abs(x.getArray() - reference.getArray()).max() <= 1e-12 * numpy.abs(reference.getArray()).max()
    ksp.view()
    out = capfd.readouterr().out
    assert "-pc_wbilu_levels_method <now auto" in out and "-pc_wbilu_schedule" in out
    assert "10 levels (dmda)" in out and "6.4 rows per level" in out and "setup time" in out
    assert "apply time" in out


def test_dmda_levels_refused_for_box_stencil():
    A = dmda_matrix(3, 1, PETSc.DMDA.StencilType.BOX)
    b = A.createVecLeft()
    with pytest.raises(PETSc.Error, match="DMDA levels need a star stencil"):
        pc_solution(A, "wbilu", b, [("pc_wbilu_levels_method", "dmda")])
    _, reference = pc_solution(A, "ilu", b)  # the graph levels serve any pattern
    _, x = pc_solution(A, "wbilu", b, [("pc_wbilu_levels_method", "graph")])
    assert numpy.allclose(x.getArray(), reference.getArray(), rtol=0, atol=1e-14)


def test_singular_block_names_the_row():
    indptr, indices, blocks = block_stencil(3, 3)
    rows = numpy.repeat(numpy.arange(27), numpy.diff(indptr))
    blocks[(rows == 7) & (indices <= 7)] = 0.0  # d_7 = a_77 - sum l u = 0
    A = baij_from_bsr(indptr, indices, blocks, comm=PETSc.COMM_SELF)
    b = A.createVecLeft()
    with pytest.raises(PETSc.Error, match="Zero pivot in LU factorization(.|\n)*block row 7 is singular"):
        pc_solution(A, "wbilu", b)


def test_non_square_blocks_refused():
    A = PETSc.Mat().create(comm=PETSc.COMM_SELF)
    A.setSizes((6, 6))
    A.setBlockSizes(2, 3)
    A.setType("aij")
    A.setUp()
    for i in range(6):
        A.setValue(i, i, 1.0)
    A.assemble()
    with pytest.raises(PETSc.Error, match="wbilu needs square blocks; the matrix has 2-by-3 blocks"):
        pc_solution(A, "wbilu", A.createVecLeft())


def test_block_size_that_does_not_divide_the_size_is_refused():
    """PETSc itself refuses such a matrix, so no PC ever sees one."""
    A = PETSc.Mat().create(comm=PETSc.COMM_SELF)
    with pytest.raises(ValueError, match="global size 7 not divisible by block size 3"):
        A.setSizes((7, 7), bsize=3)


@pytest.mark.mpi
def test_non_square_local_block_refused():
    """Rows and columns split differently among the ranks: no square diagonal block to factor."""
    comm = PETSc.COMM_WORLD
    rank, size = comm.getRank(), comm.getSize()
    if size == 1:
        pytest.skip("rows and columns split among two or more ranks")
    rows = [2 * (r + 2) for r in range(size)]
    A = PETSc.Mat().create(comm=comm)
    A.setSizes(((rows[rank], sum(rows)), (rows[(rank + 1) % size], sum(rows))), bsize=2)
    A.setType("baij")
    A.setUp()
    start, end = A.getOwnershipRange()
    for i in range(start, end):
        A.setValue(i, i, 1.0)
    A.assemble()
    with pytest.raises(PETSc.Error, match="wbilu needs a square local block"):
        pc_solution(A, "wbilu", A.createVecLeft())


@pytest.mark.mpi
def test_block_local_in_parallel_equals_bjacobi_ilu():
    comm = PETSc.COMM_WORLD
    indptr, indices, blocks = block_stencil(5, 3)
    A = baij_from_bsr(indptr, indices, blocks, comm=comm)
    b = A.createVecLeft()
    b.setRandom()
    _, reference = pc_solution(A, "bjacobi", b, [("sub_pc_type", "ilu")])
    _, x = pc_solution(A, "wbilu", b)
    scale = numpy.abs(reference.getArray()).max()
    assert numpy.abs(x.getArray() - reference.getArray()).max() <= 1e-12 * scale
