"""The gpusell Mat type against PETSc's AIJ, through petsc4py as a user would.

The tests use the vectors the matrix creates, so on a PETSc with CUDA and a GPU
they run the CUDA kernels on CUDA vectors, and with NumPy on host vectors
elsewhere. Tests marked ``mpi`` also run under mpiexec -n 2 and -n 3.
"""

import os
import subprocess
import sys

import numpy
import scipy.sparse
import pytest
from petsc4py import PETSc

import plugin  # noqa: F401  (registers gpusell)
from petsc_pairs import COMM, assert_close, nonsymmetric_poisson, pair, random_vecs
from stencils import laplacian
from petsc_ext import gpusell
from petsc_ext.device import check_scalar_type
from petsc_ext.matrices import aij_from_csr

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def options():
    """Set PETSc options for one test; they are removed afterwards."""
    db, names = PETSc.Options(), []

    def set_options(**values):
        for name, value in values.items():
            db[name] = value
            names.append(name)

    yield set_options
    for name in names:
        db.delValue(name)


@pytest.mark.mpi
def test_products_match_aij():
    A, B = pair(*nonsymmetric_poisson())
    assert B.getType() == ("mpiaijgpusell" if COMM.getSize() > 1 else "seqaijgpusell")
    x, z = random_vecs(B, 2)
    y, w = B.createVecLeft(), A.createVecLeft()
    B.mult(x, y), A.mult(x, w)
    assert_close(y, w)
    B.multTranspose(x, y), A.multTranspose(x, w)
    assert_close(y, w)
    B.multAdd(x, z, y), A.multAdd(x, z, w)
    assert_close(y, w)
    zz = z.copy()
    B.multAdd(x, zz, zz)  # y = z + A x in place
    assert_close(zz, w)
    B.multTransposeAdd(x, z, y), A.multTransposeAdd(x, z, w)
    assert_close(y, w)
    assert_close(B.getDiagonal(), A.getDiagonal(), rtol=0)


@pytest.mark.mpi
def test_mat_type_option_selects_gpusell(options):
    options(mat_type="gpusell")
    csr, (n, _) = nonsymmetric_poisson(5)
    B = PETSc.Mat().create(comm=COMM)
    B.setSizes(n)
    B.setFromOptions()
    B.setPreallocationNNZ(7)
    start, end = B.getOwnershipRange()
    indptr, indices, data = csr
    for row in range(start, end):
        B.setValues(row, indices[indptr[row]:indptr[row + 1]], data[indptr[row]:indptr[row + 1]])
    B.assemble()
    assert B.getType().endswith("aijgpusell")
    A = aij_from_csr(*csr, (n, n), comm=COMM)
    (x,) = random_vecs(B, 1)
    y, w = B.createVecLeft(), A.createVecLeft()
    B.mult(x, y), A.mult(x, w)
    assert_close(y, w)


def _dmda():
    return PETSc.DMDA().create([7, 6, 5], stencil_width=1, stencil_type=PETSc.DMDA.StencilType.STAR,
                               comm=COMM, setup=False)


def _dmplex():
    dm = PETSc.DMPlex().createBoxMesh([3, 3, 3], simplex=False, comm=COMM)
    dm.setField(0, PETSc.FE().createDefault(3, 1, False, 1, comm=COMM))
    dm.createDS()
    return dm


@pytest.mark.mpi
@pytest.mark.parametrize("make_dm", [_dmda, _dmplex], ids=["dmda", "dmplex"])
def test_dm_mat_type_gives_gpusell(options, make_dm):
    options(dm_mat_type="gpusell")
    dm = make_dm()
    dm.setFromOptions()
    dm.setUp()
    B = dm.createMat()
    assert B.getType().endswith("aijgpusell")
    indptr, indices, _ = B.getValuesCSR()  # the DM's preallocated pattern
    start, _ = B.getOwnershipRange()
    rng = numpy.random.default_rng(start)
    for row in range(indptr.size - 1):
        cols = indices[indptr[row]:indptr[row + 1]]
        B.setValues(start + row, cols, rng.standard_normal(cols.size))
    B.assemble()
    A = B.convert("aij", PETSc.Mat())
    assert A.getType() in ("seqaij", "mpiaij")
    (x,) = random_vecs(B, 1)
    y, w = B.createVecLeft(), A.createVecLeft()
    B.mult(x, y), A.mult(x, w)
    assert_close(y, w)


@pytest.mark.mpi
def test_values_follow_assembly_refresh_or_rebuild():
    csr, shape = nonsymmetric_poisson(5)
    A, B = pair(csr, shape)
    (x,) = random_vecs(B, 1)
    y, w = B.createVecLeft(), A.createVecLeft()
    B.mult(x, y)
    ctx = gpusell.context(B)
    block = ctx.local
    start, end = B.getOwnershipRange()
    for M in (A, B):  # same pattern, new values
        M.setValues(start, [start], [10.0 + start], addv=PETSc.InsertMode.ADD_VALUES)
        M.assemble()
    B.mult(x, y), A.mult(x, w)
    assert_close(y, w)
    assert ctx.local is block, "same nonzero pattern: values refreshed in place"
    B.scale(3.0), A.scale(3.0)
    B.mult(x, y), A.mult(x, w)
    assert_close(y, w)
    for M in (A, B):  # a new nonzero: the pattern changes
        M.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, False)
        M.setValues(start, [(start + 3 * shape[0] // 4) % shape[0]], [-7.0])
        M.assemble()
    B.mult(x, y), A.mult(x, w)
    assert_close(y, w)
    assert ctx.local is not block, "new nonzero pattern: SELL copy rebuilt"


@pytest.mark.mpi
def test_float32_values_and_layout_options(options):
    options(mat_gpusell_value_type="float32", mat_gpusell_slice_height=8, mat_gpusell_sigma=64)
    csr, shape = nonsymmetric_poisson(6)
    A = aij_from_csr(*csr, shape, comm=COMM)
    B = PETSc.Mat().create(comm=COMM)
    B.setSizes(shape)
    B.setType("gpusell")
    B.setFromOptions()
    B.setPreallocationCSR(A.getValuesCSR())
    B.assemble()
    ctx = gpusell.context(B)
    (x,) = random_vecs(B, 1)
    y, w = B.createVecLeft(), A.createVecLeft()
    B.mult(x, y), A.mult(x, w)
    assert (ctx.slice_height, ctx.sigma, str(ctx.local.vals.dtype)) == (8, 64, "float32")
    assert_close(y, w, rtol=1e-6)
    with pytest.raises(AssertionError):  # float32 values must round
        assert_close(y, w, rtol=1e-12)


@pytest.mark.mpi
def test_cg_with_gpusell_takes_aij_iterations():
    results = []
    for mat in pair(laplacian(10), (1000, 1000)):
        ksp = PETSc.KSP().create(comm=COMM)
        ksp.setOperators(mat)
        ksp.setType("cg")
        ksp.getPC().setType("jacobi")
        ksp.setTolerances(rtol=1e-10)
        b, x = mat.createVecLeft(), mat.createVecRight()
        b.set(1.0)
        ksp.solve(b, x)
        assert ksp.getConvergedReason() > 0
        results.append((ksp.getIterationNumber(), x))
    (its_aij, x_aij), (its_sell, x_sell) = results
    assert its_sell == its_aij
    assert_close(x_sell, x_aij, rtol=1e-9)


@pytest.mark.mpi
def test_mat_view_shows_the_format(tmp_path_factory):
    _, B = pair(*nonsymmetric_poisson(5))
    path = COMM.tompi4py().bcast(str(tmp_path_factory.mktemp("view") / "mat.txt") if COMM.getRank() == 0 else None)
    viewer = PETSc.Viewer().createASCII(path, comm=COMM)
    viewer.pushFormat(PETSc.Viewer.Format.ASCII_INFO)
    B.view(viewer)
    viewer.destroy()
    if COMM.getRank() == 0:
        text = open(path).read()
        assert "gpusell: SELL-C-sigma, C = 32, sigma = 1, values float64" in text
        assert "stored entries for 725 nonzeros: padding ratio" in text
        assert "MiB on the" in text


def test_log_events_count_products():
    _, B = pair(*nonsymmetric_poisson(4))
    (x,) = random_vecs(B, 1)
    PETSc.Log.begin()
    event = PETSc.Log.Event("GPUSELLMult")
    before = event.getPerfInfo()["count"]
    for _ in range(3):
        B.mult(x, x.duplicate())
    assert event.getPerfInfo()["count"] == before + 3


def test_convert_duplicate_and_from_aij(options):
    csr, shape = nonsymmetric_poisson(4)
    A = aij_from_csr(*csr, shape, comm=PETSc.COMM_SELF)
    B = gpusell.from_aij(A)
    assert (A.getType(), B.getType()) == ("seqaij", "seqaijgpusell")
    options(mat_gpusell_slice_height=4)
    B.setFromOptions()
    C = B.duplicate(copy=True)
    assert gpusell.context(C).slice_height == 4
    A.convert("gpusell")  # in place, as MatConvert(A, "gpusell", MAT_INPLACE_MATRIX)
    assert A.getType() == "seqaijgpusell"
    (x,) = random_vecs(C, 1)
    y, w = C.createVecLeft(), A.createVecLeft()
    C.mult(x, y), A.mult(x, w)
    assert_close(y, w)
    with pytest.raises(TypeError, match="not a gpusell matrix"):
        gpusell.context(aij_from_csr(*csr, shape, comm=PETSc.COMM_SELF))


# --- bad input ---------------------------------------------------------------


def test_wrong_vector_size_is_a_petsc_error():
    _, B = pair(*nonsymmetric_poisson(3))
    x = B.createVecLeft()
    short = PETSc.Vec().create(comm=COMM)
    short.setSizes(5)
    short.setType(x.getType())
    with pytest.raises(PETSc.Error, match="Nonconforming object sizes"):
        B.mult(short, x)


@pytest.mark.mpi
def test_vectors_in_the_other_memory_get_aijs_product():
    """PETSc's multigrid hands host vectors of its coarse grids to a GPU
    matrix: AIJ's own product serves them (event GPUSELLMultAIJ); a matrix
    whose values were written in place (the AIJ copy behind) refuses them."""
    A, B = pair(*nonsymmetric_poisson(4))
    ctx = gpusell.context(B)
    x, z = random_vecs(B, 2)
    y, w = B.createVecLeft(), A.createVecLeft()
    kept = ctx._array_class
    ctx._array_class = type(None)  # every vector now looks to the matrix as if in the other memory
    event = PETSc.Log.Event("GPUSELLMultAIJ")
    PETSc.Log.begin()
    before = event.getPerfInfo()["count"]
    try:
        B.mult(x, y), A.mult(x, w)
        assert_close(y, w)
        B.multTransposeAdd(x, z, y), A.multTransposeAdd(x, z, w)
        assert_close(y, w)
        assert_close(B.getDiagonal(), A.getDiagonal(), rtol=0)
        assert event.getPerfInfo()["count"] == before + 2
        ctx.value_buffer()
        ctx.values_changed()
        with pytest.raises(PETSc.Error, match="use vectors from MatCreateVecs"):
            B.mult(x, y)
    finally:
        ctx._array_class = kept


@pytest.mark.mpi
def test_option_out_of_range_is_refused_with_the_range(options):
    options(mat_gpusell_slice_height=0)
    B = PETSc.Mat().create(comm=COMM)
    B.setSizes(10)
    B.setType("gpusell")
    with pytest.raises(PETSc.Error, match="-mat_gpusell_slice_height 0 is out of range: valid values are 1 to 1024"):
        B.setFromOptions()


def test_unknown_backend_option_lists_the_valid_ones(options):
    options(gpu_backend="cuda")
    B = PETSc.Mat().create(comm=PETSc.COMM_SELF)
    B.setSizes(4)
    with pytest.raises(PETSc.Error, match="-gpu_backend cuda is not valid: choose one of auto, cupy, numpy"):
        B.setType("gpusell")


def test_cupy_backend_needs_a_cuda_petsc(options):
    if PETSc.Sys.hasExternalPackage("cuda"):
        pytest.skip("this PETSc has CUDA")
    options(gpu_backend="cupy")
    B = PETSc.Mat().create(comm=PETSc.COMM_SELF)
    B.setSizes(4)
    with pytest.raises(PETSc.Error, match="'cupy' was requested but cannot be used"):
        B.setType("gpusell")


def test_complex_or_single_precision_petsc_is_refused():
    check_scalar_type(numpy.float64)
    for dtype in (numpy.complex128, numpy.float32):
        with pytest.raises(TypeError, match="real double-precision scalars; this PETSc uses"):
            check_scalar_type(dtype)


def test_help_lists_the_options_with_defaults():
    script = ("import sys, petsc4py; petsc4py.init(sys.argv); import plugin; from petsc4py import PETSc; "
              "A = PETSc.Mat().create(); A.setSizes(4); A.setType('gpusell'); A.setFromOptions()")
    out = subprocess.run([sys.executable, "-c", script, "-help"], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}, check=True).stdout
    assert "-mat_gpusell_slice_height <now 32 : formerly 32>: rows per slice C (1 to 1024)" in out
    assert "-mat_gpusell_value_type <now float64 : formerly float64>" in out
    assert "-gpu_backend <now auto : formerly auto>" in out


def test_help_lists_the_backend_option_once_for_many_matrices():
    script = ("import sys, petsc4py; petsc4py.init(sys.argv); import plugin; from petsc4py import PETSc; "
              "[PETSc.Mat().create().setType('gpusell') for _ in range(3)]")
    out = subprocess.run([sys.executable, "-c", script, "-help"], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}, check=True).stdout
    assert out.count("-gpu_backend <now") == 1


def test_a_value_that_is_not_an_integer_names_the_option_and_the_value(options):
    options(mat_gpusell_slice_height="abc")
    B = PETSc.Mat().create(comm=PETSc.COMM_SELF)
    B.setSizes(4)
    B.setType("gpusell")
    with pytest.raises(PETSc.Error, match="-mat_gpusell_slice_height 'abc' is not an integer"):
        B.setFromOptions()


@pytest.mark.parametrize("size", [19, 10, 21])
def test_get_diagonal_into_a_vector_of_the_wrong_size_is_petscs_size_error(size):
    """As on AIJ: an error, where the SELL kernel would write past a shorter vector."""
    csr = scipy.sparse.random(20, 20, density=0.3, format="csr", random_state=1) + scipy.sparse.identity(20)
    csr = csr.tocsr()
    for kind in ("aij", "gpusell"):
        A = aij_from_csr(csr.indptr, csr.indices, csr.data, (20, 20), comm=PETSc.COMM_SELF, mat_type=kind)
        wrong = PETSc.Vec().createSeq(size)
        with pytest.raises(PETSc.Error, match="Nonconforming matrix and vector"):
            A.getDiagonal(wrong)


def test_a_box_stencil_given_its_grid_is_multiplied_from_the_grid(monkeypatch):
    """set_grid (the flow driver's DMDA box): while the values are a
    constant-coefficient stencil on the grid the products read no matrix
    (the SELL kernel is not called), and equal AIJ's; values that are not a
    stencil, or -mat_gpusell_stencil 0, go back to SELL."""
    from test_stencil import box_laplacian

    shape, periodic = (6, 5, 4), (False, True, False)
    A = box_laplacian(shape, periodic, (1.0, 1.0, 2.0)).tocsr()
    A.sort_indices()
    B = aij_from_csr(A.indptr, A.indices, A.data, A.shape, comm=PETSc.COMM_SELF, mat_type="gpusell")
    ctx = gpusell.context(B)
    ctx.set_grid(shape, periodic)
    x, z = B.createVecs()
    y = x.duplicate()
    rng = numpy.random.default_rng(3)
    x.setArray(rng.standard_normal(A.shape[0]))
    z.setArray(rng.standard_normal(A.shape[0]))

    def sell_called(*args):
        raise AssertionError("the SELL kernel was called")

    with monkeypatch.context() as patch:
        patch.setattr(ctx, "_spmv", sell_called)
        B.mult(x, y)
        numpy.testing.assert_allclose(y.getArray(), A @ x.getArray(), rtol=1e-13, atol=1e-13)
        B.multAdd(x, z, y)
        numpy.testing.assert_allclose(y.getArray(), A @ x.getArray() + z.getArray(), rtol=1e-13, atol=1e-13)
        B.setValue(7, 7, 3.0, addv=PETSc.InsertMode.ADD_VALUES)  # a diagonal of any values is still a stencil
        B.assemble()
        A[7, 7] += 3.0
        B.mult(x, y)
        numpy.testing.assert_allclose(y.getArray(), A @ x.getArray(), rtol=1e-13, atol=1e-13)
    assert ctx.stencil_matrix() is not None
    neighbour = int(A.indices[A.indptr[7]])  # an off-diagonal entry of row 7 changed: no longer a stencil
    B.setValue(7, neighbour, 0.5, addv=PETSc.InsertMode.ADD_VALUES)
    B.assemble()
    A[7, neighbour] += 0.5
    B.mult(x, y)
    numpy.testing.assert_allclose(y.getArray(), A @ x.getArray(), rtol=1e-13, atol=1e-13)
    assert ctx.stencil_matrix() is None
    B.setValue(7, neighbour, -0.5, addv=PETSc.InsertMode.ADD_VALUES)  # a stencil again
    B.assemble()
    B.mult(x, y)
    assert ctx.stencil_matrix() is not None
    ctx.stencil = False  # -mat_gpusell_stencil 0
    assert ctx.stencil_matrix() is None
