"""SELL-C-sigma format and its NumPy kernels against scipy's CSR."""

import numpy
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_mats import SellMatrix, diagonal, spmv
from stencils import laplacian

from conftest import csr_matrices

layouts = st.tuples(st.sampled_from([1, 2, 4, 32]), st.sampled_from([1, 3, 64]))


def sell(matrix, C=32, sigma=1, value_dtype=numpy.float64):
    return SellMatrix.from_csr(matrix.indptr, matrix.indices, matrix.data, matrix.shape,
                               slice_height=C, sigma=sigma, value_dtype=value_dtype, xp=numpy)


@settings(max_examples=150)
@given(matrix=csr_matrices(), layout=layouts, seed=st.integers(0, 2**32 - 1))
def test_products_match_csr(matrix, layout, seed):
    rng = numpy.random.default_rng(seed)
    A = sell(matrix, *layout)
    nrows, ncols = matrix.shape
    x, z = rng.standard_normal(ncols), rng.standard_normal(nrows)
    y = numpy.full(nrows, numpy.nan)  # every entry must be written
    numpy.testing.assert_allclose(spmv(A, x, y), matrix @ x, rtol=1e-13, atol=1e-13)
    numpy.testing.assert_allclose(spmv(A, x, y, alpha=-2.0, beta=0.5, z=z), -2.0 * (matrix @ x) + 0.5 * z,
                                  rtol=1e-13, atol=1e-13)
    numpy.testing.assert_allclose(spmv(A.transpose(), z, numpy.empty(ncols)), matrix.T @ z, rtol=1e-13, atol=1e-13)
    expected = numpy.zeros(nrows)
    expected[: min(nrows, ncols)] = matrix.diagonal()
    numpy.testing.assert_array_equal(diagonal(A), expected)


@settings(max_examples=60)
@given(matrix=csr_matrices(), layout=layouts, nvec=st.integers(1, 6))
def test_multi_vector_product_is_one_product_per_vector(matrix, layout, nvec):
    rng = numpy.random.default_rng(nvec)
    A = sell(matrix, *layout)
    X = rng.standard_normal((nvec, matrix.shape[1]))
    Y = rng.standard_normal((nvec, matrix.shape[0]))
    expected = 2.0 * (matrix @ X.T).T + Y
    numpy.testing.assert_allclose(spmv(A, X, Y, alpha=2.0, beta=1.0), expected, rtol=1e-13, atol=1e-12)


@settings(max_examples=60)
@given(matrix=csr_matrices(), layout=layouts)
def test_layout_is_column_major_slices_with_harmless_padding(matrix, layout):
    C, sigma = layout
    A = sell(matrix, C, sigma)
    nrows, ncols = matrix.shape
    stored = numpy.arange(nrows) if A.row_of is None else numpy.argsort(A.row_of)  # original row -> stored row
    widths = numpy.diff(A.slice_ptr) // C
    for r in range(nrows):
        s, i = divmod(stored[r], C)
        start, end = matrix.indptr[r], matrix.indptr[r + 1]
        assert end - start <= widths[s]
        slots = A.slice_ptr[s] + i + C * numpy.arange(end - start)
        numpy.testing.assert_array_equal(A.cols[slots], matrix.indices[start:end])
        numpy.testing.assert_array_equal(A.vals[slots], matrix.data[start:end])
    padding = numpy.ones(A.nslots, bool)
    padding[A.val_map] = False
    assert A.cols.dtype == numpy.int32 and A.slice_ptr[-1] == A.nslots
    assert (A.vals[padding] == 0).all()
    assert ncols == 0 or ((A.cols >= 0) & (A.cols < ncols)).all()
    if sigma > 1 and nrows:  # longest rows first inside each window
        lengths = numpy.diff(matrix.indptr)[A.row_of]
        for w in range(0, nrows, sigma):
            assert (numpy.diff(lengths[w:w + sigma]) <= 0).all()


@pytest.mark.parametrize("n", [31, 32, 33, 1])
def test_sizes_around_the_slice_height(n, rng):
    matrix = scipy.sparse.random(n, n + 3, density=0.3, format="csr", random_state=n)
    x = rng.standard_normal(n + 3)
    numpy.testing.assert_allclose(spmv(sell(matrix), x, numpy.empty(n)), matrix @ x, rtol=1e-13)


def test_float32_values_with_float64_vectors(rng):
    indptr, indices, data = laplacian(6)
    data = data * (1 + 0.1 * rng.random(data.size))
    matrix = scipy.sparse.csr_matrix((data, indices, indptr))
    A = sell(matrix, value_dtype=numpy.float32)
    assert A.vals.dtype == numpy.float32
    x = rng.standard_normal(matrix.shape[1])
    rounded = scipy.sparse.csr_matrix((data.astype(numpy.float32).astype(numpy.float64), indices, indptr))
    numpy.testing.assert_allclose(spmv(A, x, numpy.empty(matrix.shape[0])), rounded @ x, rtol=1e-14, atol=1e-14)


def test_value_refresh_and_csr_round_trip(rng):
    matrix = scipy.sparse.random(70, 50, density=0.1, format="csr", random_state=3)
    A = sell(matrix, C=8, sigma=16)
    new = rng.standard_normal(matrix.nnz)
    A.refresh_values(new)
    indptr, indices, data = A.to_csr()
    numpy.testing.assert_array_equal(indptr, matrix.indptr)
    numpy.testing.assert_array_equal(indices, matrix.indices)
    numpy.testing.assert_array_equal(data, new)
    with pytest.raises(ValueError, match="needs 350 values"):
        A.refresh_values(new[:-1])


@pytest.mark.parametrize("points, corner_sum", [(7, 3.0), (27, 19.0)])
def test_stencil_laplacians_are_symmetric_with_the_right_rows(points, corner_sum):
    indptr, indices, data = laplacian(5, points)
    matrix = scipy.sparse.csr_matrix((data, indices, indptr))
    assert abs(matrix - matrix.T).max() == 0
    assert numpy.diff(indptr).max() == points
    row_sums = numpy.asarray(matrix.sum(axis=1)).ravel()
    assert row_sums[(2 * 5 + 2) * 5 + 2] == 0  # interior row: zero row sum
    assert row_sums[0] == corner_sum  # corner: the missing (Dirichlet) neighbours


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="too large for SELL's int32"):
        SellMatrix.from_csr([0, 1], [2**31 + 5], [1.0], (1, 2**31 + 10), xp=numpy)
    with pytest.raises(ValueError, match=r"column indices must lie in \[0, 3\)"):
        SellMatrix.from_csr([0, 1], [3], [1.0], (1, 3), xp=numpy)
    with pytest.raises(ValueError, match="indptr must have 3 entries"):
        SellMatrix.from_csr([0, 1], [0], [1.0], (2, 3), xp=numpy)
    with pytest.raises(ValueError, match="slice height C and sort window sigma must be >= 1"):
        SellMatrix.from_csr([0, 1], [0], [1.0], (1, 3), slice_height=0, xp=numpy)
    A = SellMatrix.from_csr([0, 1, 2], [0, 1], [1.0, 2.0], (2, 2), xp=numpy)
    with pytest.raises(ValueError, match="x must hold contiguous vectors of length 2"):
        spmv(A, numpy.ones(3), numpy.empty(2))
    with pytest.raises(TypeError, match="must be float64"):
        spmv(A, numpy.ones(2, numpy.float32), numpy.empty(2))
    with pytest.raises(TypeError, match="matrix lives in numpy memory"):
        spmv(A, [1.0, 1.0], numpy.empty(2))
