"""CUDA kernels against their NumPy twins, and gpusell on CUDA vectors.

Run on a machine with a GPU, CuPy and a PETSc built with CUDA: pytest -m gpu.
"""

import dataclasses

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_mats import SellMatrix, diagonal, spmv

from conftest import csr_matrices

pytestmark = pytest.mark.gpu
layouts = st.tuples(st.sampled_from([1, 4, 32, 64]), st.sampled_from([1, 3, 256]),
                    st.sampled_from([numpy.float64, numpy.float32]))


def both(matrix, C, sigma, value_dtype):
    import cupy

    return tuple(SellMatrix.from_csr(matrix.indptr, matrix.indices, matrix.data, matrix.shape, slice_height=C,
                                     sigma=sigma, value_dtype=value_dtype, xp=xp) for xp in (numpy, cupy))


@settings(max_examples=120)
@given(matrix=csr_matrices(max_rows=300, max_cols=300), layout=layouts, seed=st.integers(0, 2**32 - 1),
       nvec=st.integers(1, 9))
def test_cuda_kernels_match_numpy(matrix, layout, seed, nvec):
    import cupy

    host, device = both(matrix, *layout)
    for name in ("slice_ptr", "cols", "vals", "val_map"):  # built on the GPU, same arrays
        numpy.testing.assert_array_equal(getattr(device, name).get(), getattr(host, name))
    assert (host.row_of is None) == (device.row_of is None)
    rng = numpy.random.default_rng(seed)
    nrows, ncols = matrix.shape
    x, z = rng.standard_normal(ncols), rng.standard_normal(nrows)
    tol = dict(rtol=1e-12, atol=1e-12)
    y = cupy.full(nrows, cupy.nan)  # poisoned: every entry must be written
    numpy.testing.assert_allclose(spmv(device, cupy.asarray(x), y).get(), spmv(host, x, numpy.empty(nrows)), **tol)
    expected = spmv(host, x, numpy.empty(nrows), alpha=0.5, beta=-3.0, z=z)
    got = spmv(device, cupy.asarray(x), cupy.empty(nrows), alpha=0.5, beta=-3.0, z=cupy.asarray(z))
    numpy.testing.assert_allclose(got.get(), expected, **tol)
    X, Y = rng.standard_normal((nvec, ncols)), rng.standard_normal((nvec, nrows))
    numpy.testing.assert_allclose(spmv(device, cupy.asarray(X), cupy.asarray(Y), beta=1.0).get(),
                                  spmv(host, X, Y.copy(), beta=1.0), **tol)
    numpy.testing.assert_allclose(spmv(device.transpose(), cupy.asarray(z), cupy.empty(ncols)).get(),
                                  spmv(host.transpose(), z, numpy.empty(ncols)), **tol)
    numpy.testing.assert_array_equal(diagonal(device).get(), diagonal(host))


@settings(max_examples=60)
@given(matrix=csr_matrices(max_rows=300, max_cols=300, square=True), layout=layouts, seed=st.integers(0, 2**32 - 1))
def test_cuda_fused_smoothing_step_matches_numpy_and_the_unfused_step(matrix, layout, seed):
    """The sell family's chebyshev_step (r = z - A d, d_next = a d + c s r,
    x += d_next in one kernel) against its NumPy twin, and the twin against
    an SpMV followed by the multigrid family's update."""
    import cupy

    from gpu_mats.kernels.multigrid import host as multigrid_host
    from gpu_mats.kernels.sell import cuda, host as sell_host

    A_host, A_device = both(matrix, *layout)
    n = matrix.shape[0]
    d, z, scaling, x = numpy.random.default_rng(seed).standard_normal((4, n))
    for in_place in (False, True):  # z a vector of its own, or z = r
        outputs = {}
        for kernels, xp, A in ((sell_host, numpy, A_host), (cuda, cupy, A_device)):
            r = xp.asarray(z.copy()) if in_place else xp.full(n, xp.nan)
            d_next, x_out = xp.full(n, xp.nan), xp.asarray(x.copy())
            kernels.chebyshev_step(A, xp.asarray(d), d_next, r, r if in_place else xp.asarray(z), xp.asarray(scaling),
                                   x_out, 0.7, 1.3)
            outputs[xp] = [v if xp is numpy else v.get() for v in (r, d_next, x_out)]
        for got, expected in zip(outputs[cupy], outputs[numpy]):
            numpy.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    r, unfused_d, unfused_x = spmv(A_host, d, numpy.empty(n), alpha=-1.0, beta=1.0, z=z), d.copy(), x.copy()
    multigrid_host.chebyshev_step(unfused_x, unfused_d, r, scaling, 0.7, 1.3)
    numpy.testing.assert_allclose(outputs[numpy][1], unfused_d, rtol=1e-12, atol=1e-12)
    numpy.testing.assert_allclose(outputs[numpy][2], unfused_x, rtol=1e-12, atol=1e-12)


def test_empty_slices_added_onto_themselves_are_left_alone():
    import cupy
    import scipy.sparse

    matrix = scipy.sparse.csr_matrix(([1.0], ([70], [3])), shape=(100, 5))
    host, device = both(matrix, 32, 1, numpy.float64)
    y = cupy.arange(100, dtype=float)
    spmv(device, cupy.ones(5), y, beta=1.0)
    expected = numpy.arange(100.0)
    expected[70] += 1.0
    numpy.testing.assert_array_equal(y.get(), expected)


def test_gpusell_products_stay_on_the_device():
    from petsc4py import PETSc

    import plugin  # noqa: F401
    from stencils import laplacian
    from petsc_ext.matrices import aij_from_csr

    csr, n = laplacian(12), 12**3
    A = aij_from_csr(*csr, (n, n), comm=PETSc.COMM_SELF)
    B = aij_from_csr(*csr, (n, n), comm=PETSc.COMM_SELF, mat_type="gpusell")
    x, y = B.createVecs()
    assert x.getType() == "seqcuda"
    x.set(1.0)  # set on the device
    B.mult(x, y)
    B.multTranspose(y, x)
    on_gpu = 2  # PETSC_OFFLOAD_GPU: no copy was made to the host
    assert (x.getOffloadMask(), y.getOffloadMask()) == (on_gpu, on_gpu)
    w = A.createVecLeft()
    A.mult(y, w)  # reference on the host
    B.mult(y, x)
    assert numpy.allclose(x.getArray(readonly=True), w.getArray(readonly=True), rtol=1e-13, atol=1e-13)
    host = PETSc.Vec().createSeq(n)  # a vector in the other memory gets AIJ's own product
    host.set(1.0)
    event = PETSc.Log.Event("GPUSELLMultAIJ")
    PETSc.Log.begin()
    before = event.getPerfInfo()["count"]
    B.mult(host, y)
    A.mult(host, w)
    assert event.getPerfInfo()["count"] == before + 1
    assert numpy.allclose(y.getArray(readonly=True), w.getArray(readonly=True), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("value_dtype", [numpy.float64, numpy.float32])
@pytest.mark.parametrize("rows_per_thread", [1, 2, 4])
def test_every_row_grouping_gives_the_same_products(value_dtype, rows_per_thread, monkeypatch):
    import cupy
    import scipy.sparse

    from gpu_mats.kernels.sell import cuda

    monkeypatch.setitem(cuda.TUNING, numpy.dtype(value_dtype), {"rows_per_thread": rows_per_thread, "block": 128})
    matrix = scipy.sparse.random(1001, 777, density=0.01, format="csr", random_state=rows_per_thread)
    host, device = both(matrix, 32, 64, value_dtype)
    rng = numpy.random.default_rng(7)
    X, Z = rng.standard_normal((3, 777)), rng.standard_normal((3, 1001))
    got = spmv(device, cupy.asarray(X), cupy.full((3, 1001), cupy.nan), alpha=2.0, beta=-1.0, z=cupy.asarray(Z))
    numpy.testing.assert_allclose(got.get(), spmv(host, X, numpy.empty((3, 1001)), alpha=2.0, beta=-1.0, z=Z),
                                  rtol=1e-12, atol=1e-12)


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120), levels=st.integers(1, 2))
def test_cuda_local_solves_and_approximate_inverses_match_numpy(seed, n, levels):
    import cupy
    import scipy.sparse

    from gpu_mats.approximate_inverse import ChebyshevPolynomial, FactoredInverse, SparseApproximateInverse

    rng = numpy.random.default_rng(seed)
    B = scipy.sparse.random(n, n, density=min(1.0, 1.5 / n), random_state=rng, data_rvs=rng.standard_normal)
    A = (B @ B.T + scipy.sparse.diags(rng.random(n) + 0.5)).tocsr()
    A.sort_indices()
    host, device = both(A, 32, 1, numpy.float64)
    for build in (lambda M: FactoredInverse(M, levels=levels), lambda M: SparseApproximateInverse(M, levels=levels)):
        h, d = build(host), build(device)
        sell_h, sell_d = (h.G, d.G) if hasattr(h, "G") else (h.M, d.M)
        for a, b in zip(sell_d.to_csr(), sell_h.to_csr()):
            numpy.testing.assert_allclose(cupy.asnumpy(a), b, rtol=1e-10, atol=1e-13)
        r = rng.standard_normal(n)
        numpy.testing.assert_allclose(_applied(d, cupy.asarray(r)).get(), _applied(h, r), rtol=1e-10, atol=1e-12)
    # converged Lanczos (as many steps as rows): the extremes agree to rounding
    h, d = ChebyshevPolynomial(host, degree=3, lanczos_steps=n), ChebyshevPolynomial(device, degree=3, lanczos_steps=n)
    numpy.testing.assert_allclose(d.interval, h.interval, rtol=1e-8)


def _applied(inverse, r):
    z = r * numpy.nan  # poisoned: apply must write every entry
    inverse.apply(r, z)
    return z


def test_cuda_local_solves_report_the_same_failing_task():
    import cupy
    import scipy.sparse

    from gpu_mats.local_solves import LocalSystemError, solve_local_systems

    A = scipy.sparse.csr_matrix(numpy.array([[2.0, -1, 0, 0], [-1, 2, -1, 0], [0, -1, -0.1, -1], [0, 0, -1, 2]]))
    pattern = scipy.sparse.tril(A).tocsr()
    rhs = numpy.ones(pattern.nnz)
    failures = []
    for xp in (numpy, cupy):
        with pytest.raises(LocalSystemError) as info:
            solve_local_systems((xp.asarray(A.indptr), xp.asarray(A.indices), xp.asarray(A.data)),
                                (xp.asarray(pattern.indptr), xp.asarray(pattern.indices)), xp.asarray(rhs), xp)
        failures.append((info.value.task, info.value.pivot))
    assert failures[0] == failures[1] == (2, 2)


@pytest.mark.parametrize("dtype", [numpy.float64, numpy.float32])
@pytest.mark.parametrize("longest, lanes", [(8, 4), (36, 8), (72, 16), (400, 32)])
def test_cuda_csr_warp_kernels_match_numpy(dtype, longest, lanes):
    """The CSR product with 4 to 32 threads per row (plain, and y = alpha A x
    + beta z with z apart or z = y), fused smoothing step, restricted
    residual and coarse correction, on rows from empty to thousands of
    entries, against their NumPy twins and scipy."""
    import cupy
    import scipy.sparse

    from gpu_mats.kernels.csr import cuda, host

    rng = numpy.random.default_rng(longest)
    lengths = numpy.concatenate([[0, 1, 31, 32, 33], [3000] * (longest == 400),
                                 rng.integers(0, longest, 200)]).astype(numpy.int64)
    assert cuda.lanes(lengths.size, lengths.sum()) == lanes
    rows = numpy.repeat(numpy.arange(lengths.size), lengths)
    cols = numpy.concatenate([rng.choice(5000, k, replace=False) for k in lengths])
    A = scipy.sparse.csr_matrix((rng.standard_normal(rows.size), (rows, cols)), shape=(lengths.size, 5000))
    arrays = (A.indptr.astype(numpy.int64), A.indices.astype(numpy.int32), A.data.astype(dtype))
    on_device = tuple(cupy.asarray(a) for a in arrays)
    x, z = rng.standard_normal(5000), rng.standard_normal(lengths.size)
    expected = numpy.empty(lengths.size)
    host.spmv(*arrays, x, expected)
    numpy.testing.assert_allclose(expected, A.astype(dtype).astype(numpy.float64) @ x, rtol=1e-12, atol=1e-12)
    y = cupy.full(lengths.size, cupy.nan)
    cuda.spmv(*on_device, cupy.asarray(x), y)
    numpy.testing.assert_allclose(y.get(), expected, rtol=1e-12, atol=1e-12)
    for in_place in (False, True):  # z a vector of its own, or z = y
        host_y, device_y = z.copy(), cupy.asarray(z)
        host.spmv(*arrays, x, host_y, None if in_place else z.copy(), -0.5, 2.0)
        cuda.spmv(*on_device, cupy.asarray(x), device_y, None if in_place else cupy.asarray(z), -0.5, 2.0)
        numpy.testing.assert_allclose(host_y, 2.0 * z - 0.5 * expected, rtol=1e-12, atol=1e-12)
        numpy.testing.assert_allclose(device_y.get(), host_y, rtol=1e-12, atol=1e-12)

    square = A[:, :lengths.size].tocsr()
    arrays = (square.indptr.astype(numpy.int64), square.indices.astype(numpy.int32), square.data.astype(dtype))
    d, scaling, x0 = rng.standard_normal((3, lengths.size))
    outputs = []
    for kernels, xp in ((host, numpy), (cuda, cupy)):
        r, d_next, x_out = xp.full(lengths.size, xp.nan), xp.full(lengths.size, xp.nan), xp.asarray(x0.copy())
        kernels.chebyshev_step(*(xp.asarray(a) for a in arrays), xp.asarray(d), d_next, r, xp.asarray(z),
                               xp.asarray(scaling), x_out, 0.7, 1.3)
        outputs.append([v if xp is numpy else v.get() for v in (r, d_next, x_out)])
    residual = z - square.astype(dtype).astype(numpy.float64) @ d
    numpy.testing.assert_allclose(outputs[0][0], residual, rtol=1e-12, atol=1e-12)
    numpy.testing.assert_allclose(outputs[0][1], 0.7 * d + 1.3 * scaling * residual, rtol=1e-12, atol=1e-12)
    for got, expected in zip(outputs[1], outputs[0]):
        numpy.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)

    # the restricted residual: A's pattern taken for R's and R A's, b and y as long as A's columns
    pattern = (A.indptr.astype(numpy.int64), A.indices.astype(numpy.int32))
    b_fine, y_fine = rng.standard_normal((2, 5000))
    r_data, ra_data = A.data.astype(dtype), rng.standard_normal(A.nnz).astype(dtype)
    outputs = []
    for kernels, xp in ((host, numpy), (cuda, cupy)):
        bc = xp.full(lengths.size, xp.nan)
        kernels.restrict_residual(*(xp.asarray(a) for a in (*pattern, r_data, ra_data, b_fine, y_fine)), bc)
        outputs.append(bc if xp is numpy else bc.get())
    R, RA = (scipy.sparse.csr_matrix((v.astype(numpy.float64), A.indices, A.indptr), shape=A.shape)
             for v in (r_data, ra_data))
    numpy.testing.assert_allclose(outputs[0], R @ b_fine - RA @ y_fine, rtol=1e-12, atol=1e-12)
    numpy.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-12, atol=1e-12)

    # the coarse correction: A's pattern taken for P's and A P's (xc as long as A's columns), square's rows for
    # the level's own operator (y and b as long as its rows)
    xc, b0, y0 = rng.standard_normal(5000), rng.standard_normal(lengths.size), rng.standard_normal(lengths.size)
    p_data, ap_data = A.data.astype(dtype), rng.standard_normal(A.nnz).astype(dtype)
    outputs = []
    for kernels, xp in ((host, numpy), (cuda, cupy)):
        x_out, r, d = (xp.full(lengths.size, xp.nan) for _ in range(3))
        kernels.residual_correction(*(xp.asarray(a) for a in (*pattern, p_data, ap_data, *arrays, xc, b0, y0)),
                                    x_out, r, d, xp.asarray(scaling), 1.3)
        outputs.append([v if xp is numpy else v.get() for v in (x_out, r, d)])
    P, AP = (scipy.sparse.csr_matrix((v.astype(numpy.float64), A.indices, A.indptr), shape=A.shape)
             for v in (p_data, ap_data))
    residual = b0 - square.astype(dtype).astype(numpy.float64) @ y0 - AP @ xc
    numpy.testing.assert_allclose(outputs[0][1], residual, rtol=1e-12, atol=1e-12)
    numpy.testing.assert_allclose(outputs[0][2], 1.3 * scaling * residual, rtol=1e-12, atol=1e-12)
    numpy.testing.assert_allclose(outputs[0][0], y0 + P @ xc + 1.3 * scaling * residual, rtol=1e-12, atol=1e-12)
    for got, expected in zip(outputs[1], outputs[0]):
        numpy.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


# float32 vectors: both compute in float64 and round once; an fma's last bit can round the other way
VECTOR_TOLERANCES = {numpy.float64: 1e-13, numpy.float32: 1e-6}


@pytest.mark.parametrize("value_type", [numpy.float64, numpy.float32])
def test_cuda_sell_and_csr_kernels_on_float32_vectors_match_numpy(value_type):
    """An aggregation cycle's kernels on float32 vectors (SELL's product and
    smoothing step, the warp-per-row CSR product, smoothing step, restricted
    residual and coarse correction): computed in float64, stored in float32,
    as the twins."""
    import cupy
    import scipy.sparse

    from gpu_mats.kernels import family

    rng = numpy.random.default_rng(21)
    n = 3000
    matrix = scipy.sparse.random(n, n, density=6 / n, random_state=21, format="csr") + scipy.sparse.eye(n)
    matrix.sort_indices()
    csr = (matrix.indptr.astype(numpy.int64), matrix.indices.astype(numpy.int32), matrix.data.astype(value_type))
    sell = {xp: SellMatrix.from_csr(matrix.indptr, matrix.indices, matrix.data, matrix.shape, slice_height=32,
                                    value_dtype=value_type, xp=xp) for xp in (numpy, cupy)}
    vectors = rng.standard_normal((5, n)).astype(numpy.float32)
    calls = {  # name: (family, its call on (xp, the vectors x, y, z, w, v in xp's memory))
        "sell spmv": ("sell", lambda xp, x, y, z, w, v: (sell[xp], x, y, z, -0.5, 2.0)),
        "sell chebyshev_step": ("sell", lambda xp, x, y, z, w, v: (sell[xp], x, y, z, w, v, 0.0 * x + 1.0, 0.7, 1.3)),
        "csr spmv": ("csr", lambda xp, x, y, z, w, v: (*map(xp.asarray, csr), x, y, z, -0.5, 2.0)),
        "csr chebyshev_step": ("csr", lambda xp, x, y, z, w, v: (*map(xp.asarray, csr), x, y, z, w, 0.5 * x, v, 0.7,
                                                                  1.3)),
        "csr restrict_residual": ("csr", lambda xp, x, y, z, w, v: (*map(xp.asarray, csr), xp.asarray(csr[2][::-1]),
                                                                     x, y, z)),
        "csr residual_correction": ("csr", lambda xp, x, y, z, w, v: (*map(xp.asarray, csr), xp.asarray(csr[2][::-1]),
                                                                       *map(xp.asarray, csr), x, y, z, w, v,
                                                                       0.0 * x, 0.5 * x + 1.0, 1.3)),
    }
    for name, (kernels, call) in calls.items():
        outputs = []
        for xp in (numpy, cupy):
            arrays = [xp.asarray(v.copy()) for v in vectors]
            getattr(family(kernels, xp), name.split()[1])(*call(xp, *arrays))
            outputs.append([a if xp is numpy else a.get() for a in arrays])
        for got, expected in zip(*outputs[::-1]):
            assert got.dtype == expected.dtype == numpy.float32
            numpy.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6, err_msg=name)
        assert any((changed != vector).any() for changed, vector in zip(outputs[0], vectors)), name


@pytest.mark.parametrize("vector_type", list(VECTOR_TOLERANCES))
@pytest.mark.parametrize("value_type", [numpy.float64, numpy.float32])
def test_cuda_stencil_kernels_match_numpy(value_type, vector_type):
    """The stencil family's product and fused smoothing step on boxes with
    walls, periodic sides and outflows, 2D and 3D, against the NumPy twins
    (which tests/test_stencil.py holds to the CSR matrices), on float64 and
    float32 vectors."""
    import cupy

    from gpu_mats.kernels.stencil import cuda, host
    from gpu_mats.stencil import StencilMatrix
    from test_stencil import BOXES, box_laplacian

    rng = numpy.random.default_rng(9)
    for shape, periodic, lengths, open_sides in BOXES.values():
        A = box_laplacian(shape, periodic, lengths, open_sides)
        on_host = StencilMatrix.from_csr(A.indptr, A.indices, A.data, shape, periodic, value_type)
        on_device = StencilMatrix.from_csr(*(cupy.asarray(a) for a in (A.indptr, A.indices, A.data)), shape,
                                           periodic, value_type)
        assert on_device.couplings == on_host.couplings
        x, z, d, scaling, x0 = rng.standard_normal((5, A.shape[0])).astype(vector_type)
        tolerance = VECTOR_TOLERANCES[vector_type]
        for alpha, beta in ((1.0, 0.0), (-0.5, 2.0)):
            expected = numpy.empty_like(x)
            host.spmv(on_host, x, expected, z, alpha, beta)
            y = cupy.full(x.size, cupy.nan, dtype=vector_type)
            cuda.spmv(on_device, cupy.asarray(x), y, cupy.asarray(z), alpha, beta)
            numpy.testing.assert_allclose(y.get(), expected, rtol=tolerance, atol=tolerance)
        outputs = []
        for kernels, S, xp in ((host, on_host, numpy), (cuda, on_device, cupy)):
            r, d_next = (xp.full(x.size, xp.nan, dtype=vector_type) for _ in range(2))
            x_out = xp.asarray(x0.copy())
            kernels.chebyshev_step(S, xp.asarray(d), d_next, r, xp.asarray(z), xp.asarray(scaling), x_out, 0.7, 1.3)
            outputs.append([v if xp is numpy else v.get() for v in (r, d_next, x_out)])
        for got, expected in zip(outputs[1], outputs[0]):
            assert got.dtype == vector_type
            numpy.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("vector_type", list(VECTOR_TOLERANCES))
@pytest.mark.parametrize("operator", ["sell", "csr", "stencil"])
def test_the_first_two_smoothing_steps_in_one_kernel_give_the_bits_of_two(operator, vector_type):
    """chebyshev_first (d0 = c0 scaling b, r = b - A d0, d_next = a d0 + c
    scaling r, x = d0 + d_next) of SELL, warp-per-row CSR and stencil
    operators: the bits of the multigrid family's chebyshev_start then the
    operator's chebyshev_step, on the GPU; and the NumPy twin's values."""
    import cupy

    from gpu_mats.amg.cycle import WarpRows
    from gpu_mats.kernels.multigrid import cuda as multigrid
    from gpu_mats.stencil import StencilMatrix
    from test_stencil import BOXES, box_laplacian

    shape, periodic, lengths, open_sides = BOXES[next(iter(BOXES))]
    A = box_laplacian(shape, periodic, lengths, open_sides).tocsr()
    A.sort_indices()
    made = {"sell": lambda xp: SellMatrix.from_csr(A.indptr, A.indices, A.data, A.shape, slice_height=32,
                                                   value_dtype=numpy.float32, xp=xp),
            "csr": lambda xp: WarpRows(A, numpy.float32, xp),
            "stencil": lambda xp: StencilMatrix.from_csr(*(xp.asarray(a) for a in (A.indptr, A.indices, A.data)),
                                                         shape, periodic, numpy.float32)}[operator]
    rng = numpy.random.default_rng(17)
    b, scaling = rng.standard_normal((2, A.shape[0])).astype(vector_type)
    c0, a, c = 0.6, 0.3, 1.1
    outputs = {}
    for name, xp in (("fused", cupy), ("twin", numpy), ("two kernels", cupy)):
        M = made(xp)
        d, d_next, r, x = (xp.full(b.size, xp.nan, dtype=vector_type) for _ in range(4))
        if name == "two kernels":
            multigrid.chebyshev_start(x, d, cupy.asarray(b), cupy.asarray(scaling), c0)
            M.chebyshev_step(d, d_next, r, cupy.asarray(b), cupy.asarray(scaling), x, a, c)
        else:
            M.chebyshev_first(xp.asarray(b), xp.asarray(scaling), d_next, r, x, c0, a, c)
        outputs[name] = [v if xp is numpy else v.get() for v in (d_next, r, x)]
    tolerance = VECTOR_TOLERANCES[vector_type]
    for fused, two, twin in zip(outputs["fused"], outputs["two kernels"], outputs["twin"]):
        assert fused.dtype == vector_type and not numpy.isnan(fused).any()
        numpy.testing.assert_array_equal(fused, two)
        numpy.testing.assert_allclose(fused, twin, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("vector_type", list(VECTOR_TOLERANCES))
def test_cuda_tensor_transfers_match_numpy(vector_type):
    """The stencil family's tensor_transfer (a box's interpolation between
    grids and its transpose) against the NumPy twin, on each box's hierarchy."""
    import cupy

    from gpu_mats.kernels.stencil import cuda, host
    from gpu_mats.stencil import TensorTransfer
    from test_stencil import BOXES, box_transfers

    rng = numpy.random.default_rng(10)
    for shape, periodic, lengths, _ in BOXES.values():
        for fine, coarse, P in box_transfers(tuple(2 * n for n in shape), periodic, lengths):
            on_host = TensorTransfer.between(P, fine.shape, coarse.shape, numpy)
            on_device = TensorTransfer.between(P, fine.shape, coarse.shape, cupy)
            for T_host, T_device in zip(on_host, on_device):
                x = rng.standard_normal(T_host.shape[1]).astype(vector_type)
                z = rng.standard_normal(T_host.shape[0]).astype(vector_type)
                expected = numpy.empty(T_host.shape[0], dtype=vector_type)
                host.transfer(T_host, x, expected, z, 0.5, -2.0)
                y = cupy.full(T_host.shape[0], cupy.nan, dtype=vector_type)
                cuda.transfer(T_device, cupy.asarray(x), y, cupy.asarray(z), 0.5, -2.0)
                tolerance = VECTOR_TOLERANCES[vector_type]
                numpy.testing.assert_allclose(y.get(), expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dim", [2, 3])
def test_cuda_eddy_viscosities_match_numpy(dim):
    """The les family's kernel (Sigma's singular values in closed form)
    against its twin (numpy.linalg.svd), on random gradients and on the
    laminar flows of tests/test_subgrid.py."""
    import cupy

    from gpu_mats.subgrid import MODELS, eddy_viscosity
    from test_subgrid import laminar_cases

    rng = numpy.random.default_rng(23)
    tensors = rng.standard_normal((1000, dim, dim))
    if dim == 3:
        tensors = numpy.concatenate([tensors, list(laminar_cases().values())])
    gradient = numpy.moveaxis(tensors, 0, -1).reshape(dim * dim, -1)
    width = rng.uniform(0.01, 0.1, gradient.shape[1])
    for model in MODELS:
        expected = eddy_viscosity(numpy, model, gradient, width, numpy.empty(width.size))
        got = eddy_viscosity(cupy, model, cupy.asarray(gradient), cupy.asarray(width), cupy.full(width.size, cupy.nan))
        numpy.testing.assert_allclose(got.get(), expected, rtol=1e-9, atol=1e-14 * expected.max(), err_msg=model)
        assert (got.get() >= 0.0).all()


def test_cuda_block_products_match_numpy():
    import cupy

    from gpu_mats.kernels.blas import cuda, host

    rng = numpy.random.default_rng(11)
    for n in (5, 4096, 5000):
        W = rng.standard_normal((9, n))
        numpy.testing.assert_allclose(cuda.ts_gram(cupy.asarray(W), cupy.asarray(W)[4:]).get(), host.ts_gram(W, W[4:]),
                                      rtol=1e-12, atol=1e-12)
        C, A, B = rng.standard_normal((3, n)), rng.standard_normal((3, 4)), rng.standard_normal((9, n))[:4]
        expected = C.copy()
        host.gemm_accumulate(expected, -0.5, A, B)
        Cd = cupy.asarray(C)
        cuda.gemm_accumulate(Cd, -0.5, cupy.asarray(A), cupy.asarray(B))
        numpy.testing.assert_allclose(Cd.get(), expected, rtol=1e-12, atol=1e-12)
        numpy.testing.assert_allclose(expected, C - 0.5 * A @ B, rtol=1e-12)
        w = cupy.full(n, cupy.nan)  # poisoned: every entry must be written
        cuda.three_term(w, 2.0, cupy.asarray(W[0]), -1.0, cupy.asarray(W[1]), 0.5, cupy.asarray(W[2]))
        numpy.testing.assert_allclose(w.get(), 2 * W[0] - W[1] + 0.5 * W[2])
        scaled, expected_scaled = cupy.full(n, cupy.nan), numpy.empty(n)
        host.three_term(numpy.empty(n), 2.0, W[0], -1.0, W[1], 0.0, W[2], W[3], expected_scaled)
        cuda.three_term(w, 2.0, cupy.asarray(W[0]), -1.0, cupy.asarray(W[1]), 0.0, cupy.asarray(W[2]),
                        cupy.asarray(W[3]), scaled)
        numpy.testing.assert_allclose(scaled.get(), expected_scaled, rtol=1e-15)
        for dtype in (numpy.float64, numpy.float32, numpy.int32):  # the copy: bit for bit, any 4-byte words
            x = (W[4] * 1e3).astype(dtype)
            expected, copied = numpy.full(n, 7, dtype=dtype), cupy.full(n, 7, dtype=dtype)
            host.copy(expected, x)
            cuda.copy(copied, cupy.asarray(x))
            assert numpy.array_equal(copied.get(), expected) and numpy.array_equal(expected, x)
        filled, expected = cupy.full((3, n), cupy.nan), numpy.full((3, n), numpy.nan)
        cuda.fill(filled[1], -2.5)
        host.fill(expected[1], -2.5)
        assert numpy.array_equal(filled.get(), expected, equal_nan=True)


def test_cuda_multigrid_kernels_match_numpy():
    import cupy

    from gpu_mats.kernels.multigrid import cuda, host

    rng = numpy.random.default_rng(11)
    for n in (5, 4096, 5000):
        W = rng.standard_normal((9, n))
        dense = rng.standard_normal((7, n))
        y = cupy.full(7, cupy.nan)
        cuda.matvec(y, cupy.asarray(dense), cupy.asarray(W[0]))
        expected_y = numpy.empty(7)
        host.matvec(expected_y, dense, W[0])
        numpy.testing.assert_allclose(y.get(), expected_y, rtol=1e-12)
        for a in (0.0, 0.7):  # a = 0: d is not read (poisoned)
            x, d = W[4].copy(), (W[5].copy() if a else numpy.full(n, numpy.nan))
            xd, dd = cupy.asarray(x), cupy.asarray(d)
            host.chebyshev_step(x, d, W[6], W[7], a, 1.3)
            cuda.chebyshev_step(xd, dd, cupy.asarray(W[6]), cupy.asarray(W[7]), a, 1.3)
            numpy.testing.assert_allclose(dd.get(), d, rtol=1e-14, atol=1e-14)  # fma: last-bit differences
            numpy.testing.assert_allclose(xd.get(), x, rtol=1e-14, atol=1e-14)
        x, d = numpy.full(n, numpy.nan), numpy.full(n, numpy.nan)  # from zero: neither x nor d is read
        xd, dd = cupy.asarray(x), cupy.asarray(d)
        host.chebyshev_start(x, d, W[6], W[7], 1.3)
        cuda.chebyshev_start(xd, dd, cupy.asarray(W[6]), cupy.asarray(W[7]), 1.3)
        numpy.testing.assert_allclose(d, 1.3 * W[7] * W[6], rtol=1e-15)
        numpy.testing.assert_array_equal(x, d)
        numpy.testing.assert_allclose(dd.get(), d, rtol=1e-15)
        numpy.testing.assert_array_equal(xd.get(), dd.get())
        for pairs in (1, 2, 3):  # the K-cycle's inner products, left in device memory
            out, expected_out = cupy.full(3, 7.0), numpy.full(3, 7.0)
            xs, ys = W[:pairs], W[3:3 + pairs]
            cuda.dot_pairs(out[:pairs], [cupy.asarray(v) for v in xs], [cupy.asarray(v) for v in ys])
            host.dot_pairs(expected_out[:pairs], xs, ys)
            numpy.testing.assert_allclose(out.get(), expected_out, rtol=1e-12)
        for coefficients in ((2.0, 0.5, 0.3, 1.7, -0.4), (0.0, 0.5, 0.3, 1.7, -0.4), (2.0, 0.5, 2.0, 1.0, 0.1)):
            s = numpy.array(coefficients)  # a zero curvature rho1, then a negative rho2: their steps dropped
            rt, x = cupy.full(n, cupy.nan), cupy.full(n, cupy.nan)
            expected_rt, expected_x = numpy.empty(n), numpy.empty(n)
            cuda.kcycle_residual(rt, cupy.asarray(s), cupy.asarray(W[0]), cupy.asarray(W[1]))
            host.kcycle_residual(expected_rt, s, W[0], W[1])
            cuda.kcycle_combine(x, cupy.asarray(s), cupy.asarray(W[2]), cupy.asarray(W[3]))
            host.kcycle_combine(expected_x, s, W[2], W[3])
            numpy.testing.assert_allclose(rt.get(), expected_rt, rtol=1e-14, atol=1e-14)
            numpy.testing.assert_allclose(x.get(), expected_x, rtol=1e-14, atol=1e-14)


def test_cuda_smoothing_kernels_on_float32_vectors_match_numpy():
    """The multigrid family's smoothing updates and dense product on a float32
    cycle's vectors: computed in float64, stored in float32, as the twins."""
    import cupy

    from gpu_mats.kernels.multigrid import cuda, host

    rng = numpy.random.default_rng(12)
    n = 5000
    W = rng.standard_normal((4, n)).astype(numpy.float32)
    for a in (0.0, 0.7):
        x, d = W[0].copy(), W[1].copy()
        xd, dd = cupy.asarray(x), cupy.asarray(d)
        host.chebyshev_step(x, d, W[2], W[3], a, 1.3)
        cuda.chebyshev_step(xd, dd, cupy.asarray(W[2]), cupy.asarray(W[3]), a, 1.3)
        for got, expected in ((dd, d), (xd, x)):
            assert got.dtype == expected.dtype == numpy.float32
            numpy.testing.assert_allclose(got.get(), expected, rtol=1e-6, atol=1e-6)
    x, d = numpy.full(n, numpy.nan, numpy.float32), numpy.full(n, numpy.nan, numpy.float32)
    xd, dd = cupy.asarray(x), cupy.asarray(d)
    host.chebyshev_start(x, d, W[2], W[3], 1.3)
    cuda.chebyshev_start(xd, dd, cupy.asarray(W[2]), cupy.asarray(W[3]), 1.3)
    numpy.testing.assert_allclose(dd.get(), d, rtol=1e-6)
    numpy.testing.assert_array_equal(xd.get(), dd.get())
    dense = rng.standard_normal((7, n))
    y, expected = cupy.full(7, cupy.nan, dtype=numpy.float32), numpy.empty(7, numpy.float32)
    cuda.matvec(y, cupy.asarray(dense), cupy.asarray(W[0]))
    host.matvec(expected, dense, W[0])
    numpy.testing.assert_allclose(y.get(), expected, rtol=1e-5, atol=1e-5)


def test_cacg_solve_keeps_its_vectors_on_the_device():
    from petsc4py import PETSc

    import plugin  # noqa: F401
    from stencils import laplacian
    from petsc_ext.matrices import aij_from_csr

    A = aij_from_csr(*laplacian(16), (4096, 4096), comm=PETSc.COMM_SELF, mat_type="gpusell")
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setOperators(A)
    ksp.setType("cacg")
    ksp.getPC().setType("jacobi")
    b, x = A.createVecs()
    b.set(1.0)
    ksp.solve(b, x)
    assert ksp.getConvergedReason() > 0
    assert (b.getOffloadMask(), x.getOffloadMask()) == (2, 2)  # PETSC_OFFLOAD_GPU: no host copies


@pytest.mark.mpi
@pytest.mark.parametrize("pc", ["jacobi", "ainv", "gpuamg"])
def test_cacg_graph_replays_compute_what_kernel_launches_do(pc):
    """The basis built by CUDA graph replays (with NCCL halos in parallel,
    gpuamg's levels' too) against the same kernels launched one by one."""
    from petsc4py import PETSc

    from stencils import laplacian

    from conftest import krylov_solve

    runs = []
    for graph in ("true", "false"):
        ksp, x = krylov_solve(laplacian(24), 24**3, {"ksp_type": "cacg", "ksp_cacg_s": 8, "pc_type": pc,
                                                    "ksp_cacg_graph": graph}, comm=PETSc.COMM_WORLD)
        assert ksp.getConvergedReason() > 0
        runs.append((ksp.getIterationNumber(), x, ksp.getPythonContext().basis_runs))
    (its_graph, x_graph, how), (its, x, how_launched) = runs
    assert how == "CUDA graph replays" and how_launched == "kernel launches"
    assert its_graph == its
    assert (x_graph - x).norm() <= 1e-12 * x.norm()


@pytest.mark.mpi
@pytest.mark.parametrize("pc", ["jacobi", "gpuamg"])
def test_graphcg_sums_by_nccl_inside_its_graphs_on_gpus(pc):
    """On ranks with a GPU each, graphcg's dot products summed by an NCCL
    all-reduce: its blocks, with gpusell's and gpuamg's NCCL halos, are
    captured and replayed, every rank sees the same norms, and the solves
    take the iterations and give the solution of sums through host memory."""
    import cupy
    from petsc4py import PETSc

    from petsc_ext.matrices import aij_from_csr
    from petsc_ext.options import option_defaults
    from stencils import laplacian

    comm = PETSc.COMM_WORLD
    if comm.getSize() == 1 or comm.getSize() > cupy.cuda.runtime.getDeviceCount():
        pytest.skip("NCCL between ranks needs a GPU for each rank")
    n = 24**3
    A = aij_from_csr(*laplacian(24), (n, n), comm=comm, mat_type="gpusell")
    b, x = A.createVecs()
    b.setRandom()
    runs = {}
    for transport in ("nccl", "mpi"):
        ksp = PETSc.KSP().create(comm=comm)
        ksp.setOptionsPrefix(f"{transport}_")
        ksp.setOperators(A)
        ksp.setTolerances(rtol=1e-9)
        with option_defaults(f"{transport}_", {"ksp_type": "graphcg", "pc_type": pc,
                                               "ksp_graphcg_transport": transport}):
            ksp.setFromOptions()
        ksp.setConvergenceHistory(reset=True)
        ctx = ksp.getPythonContext()
        for _ in range(3):  # launched, captured, replayed
            x.set(0.0)
            ksp.solve(b, x)
            assert ksp.getConvergedReason() > 0
        history = numpy.asarray(ksp.getConvergenceHistory())
        assert history.size == ksp.getIterationNumber() + 1
        assert all(numpy.array_equal(history, other) for other in comm.tompi4py().allgather(history))
        runs[transport] = (ksp.getIterationNumber(), x.getArray(readonly=True).copy(), ctx.runs,
                           ctx._work.graphs.replays)
    (its, solution, how, replays), (its_mpi, solution_mpi, how_mpi, replays_mpi) = runs["nccl"], runs["mpi"]
    assert (how, how_mpi) == ("CUDA graph replays", "kernel launches")
    assert replays > 0 and replays_mpi == 0
    assert its == its_mpi
    numpy.testing.assert_allclose(solution, solution_mpi, rtol=0, atol=1e-10 * abs(solution_mpi).max())


def test_cuda_explicit_update_matches_numpy():
    import cupy

    from gpu_mats.kernels.flow import cuda, host

    rng = numpy.random.default_rng(5)
    u, s, r = rng.standard_normal((3, 3, 1001))
    w = rng.standard_normal(1001)
    expected = numpy.empty_like(u)
    host.explicit_update(expected, u, s, r, w)
    got = cupy.full(u.shape, cupy.nan)
    cuda.explicit_update(got, *(cupy.asarray(a) for a in (u, s, r, w)))
    numpy.testing.assert_allclose(got.get(), expected, rtol=1e-15, atol=1e-15)


def _cavity_steps(backend, diffusion, conditions=None, mat_type="gpusell", **extra_options):
    """Twenty steps of a 2D cavity on 24 x 20 cells (or of the box with
    ``conditions`` by side), on the given backend and matrix type."""
    from petsc4py import PETSc

    import plugin  # noqa: F401
    from petsc_ext.options import option_defaults
    from plugin.flow.boundary import Wall
    from plugin.flow.solver import FlowSolver

    da = PETSc.DMDA().create(dim=2, sizes=(24, 20), stencil_width=1, comm=PETSc.COMM_SELF, setup=False)
    da.setMatType(mat_type)
    da.setUp()
    options = {"gpu_backend": backend, "flow_diffusion": diffusion, "flow_max_steps": 20,
               "pressure_ksp_rtol": 1e-12, "momentum_ksp_rtol": 1e-12, **extra_options}
    with option_defaults("", options):
        solver = FlowSolver.from_dmda(da, (1.0, 1.0), 0.01, conditions or {"ymax": Wall((1.0, 0.0))})
    state = solver.run(solver.initial_state())
    return solver, state, _fields(solver, state)


def _fields(solver, state):
    """u, u_s and p of ``state`` on the host."""
    from gpu_mats.backend import to_host

    return {name: to_host(solver.xp, getattr(state, name)) for name in ("u", "u_s", "p")}


def _assert_same_flow(got, expected, rtol):
    """Each field of ``got`` within rtol of ``expected``'s largest value (p up to a constant)."""
    for name, value in expected.items():
        field = got[name]
        if name == "p":  # defined up to a constant
            value, field = value - value.mean(), field - field.mean()
        assert abs(field - value).max() <= rtol * abs(value).max(), name


def test_pressure_multigrid_keeps_its_levels_on_the_gpu():
    """-pressure_pc_type mg on the gpusell pressure matrix: every level but the
    coarsest (SVD on the host) multiplies on the GPU, on CUDA vectors."""
    solver, _, on_gpu = _cavity_steps("cupy", "explicit", pressure_ksp_type="cg", pressure_pc_type="mg")
    pc = solver.pressure_ksp.getPC()
    assert pc.getMGLevels() == solver.multigrid.depth == 4  # 24 x 20 -> 12 x 10 -> 6 x 5 -> 3 x 5
    for level in range(1, 4):
        operator = pc.getMGSmoother(level).getOperators()[0]
        assert (operator.getType(), operator.createVecRight().getType()) == ("seqaijgpusell", "seqcuda")
        interpolation = pc.getMGInterpolation(level)
        assert interpolation.getType() == ("seqaijgpusell" if level > 1 else "seqaij")
    _, _, reference = _cavity_steps("cupy", "explicit")
    _assert_same_flow(on_gpu, reference, 1e-8)


@pytest.mark.parametrize("diffusion", ["explicit", "implicit"])
def test_flow_steps_on_the_gpu_match_numpy_and_stay_on_the_device(diffusion):
    import cupy

    solver, state, on_gpu = _cavity_steps("cupy", diffusion)
    assert solver.xp is cupy
    assert all(isinstance(getattr(state, name), cupy.ndarray) for name in ("u", "u_old", "u_s", "p"))
    pressure = (solver.stepper.b, solver.stepper.q)
    assert [vec.getOffloadMask() for vec in pressure] == [2, 2]  # PETSC_OFFLOAD_GPU: never copied to the host
    _, _, on_host = _cavity_steps("numpy", diffusion)
    _assert_same_flow(on_gpu, on_host, 1e-9)


@pytest.mark.parametrize("mean_free", [False, True])
def test_fischers_basis_on_the_gpu_is_its_numpy_twins(rng, mean_free):
    """The guess kernels' CUDA drivers against their NumPy twins: a run of
    guesses and updates past the basis's restart, the same basis, state and
    guesses (its increments mean-free or not), and the same copies of what
    each update changes (keep)."""
    import cupy
    import scipy.sparse
    import scipy.sparse.linalg
    from cupyx.scipy.sparse import csr_matrix

    from gpu_mats.previous_solutions import PreviousSolutions

    n = 3000
    A = scipy.sparse.diags([-1.0, 2.5, -1.0], [-1, 0, 1], shape=(n, n)).tocsr()
    runs = {}
    for xp, matrix in ((numpy, A), (cupy, csr_matrix(A))):
        basis, x, w, aw = PreviousSolutions(xp, n, 3, mean_free), xp.zeros(n), xp.zeros(n), xp.zeros(n)
        guesses, saved = [], basis.saved()
        for k in range(5):
            b = xp.asarray(numpy.sin(numpy.arange(n) * (0.01 + 0.002 * k)))
            basis.guess(b, x)
            guesses.append(_host_copy(xp, x))
            basis.keep(saved)
            guesses.extend(_host_copy(xp, a) for a in saved)
            solution = xp.asarray(scipy.sparse.linalg.spsolve(A.tocsc(), _host_copy(xp, b)))
            basis.update(solution, lambda v, out, matrix=matrix: xp.copyto(out, matrix @ v), w, aw)
        runs[xp.__name__] = (guesses, _host_copy(xp, basis.X), _host_copy(xp, basis.state))
    (host_guesses, host_X, host_state), (gpu_guesses, gpu_X, gpu_state) = runs["numpy"], runs["cupy"]
    assert list(gpu_state) == list(host_state) and host_state[0] == 2  # five updates of three: a restart
    numpy.testing.assert_allclose(gpu_X, host_X, rtol=0, atol=1e-11 * abs(host_X).max())
    for got, expected in zip(gpu_guesses, host_guesses):
        numpy.testing.assert_allclose(got, expected, rtol=0, atol=1e-11 * max(abs(expected).max(), 1.0))


def test_remove_mean_over_a_global_length_is_its_twin(rng):
    """pcg's remove_mean with the length of all ranks' rows (a basis over several ranks) and without."""
    import cupy

    from gpu_mats.kernels import family

    v, sums = rng.standard_normal(1000), numpy.array([12.5])
    for total in (None, 2500):
        expected, out = v.copy(), cupy.asarray(v)
        family("pcg", numpy).remove_mean(expected, sums, total)
        family("pcg", cupy).remove_mean(out, cupy.asarray(sums), total)
        numpy.testing.assert_allclose(out.get(), expected, rtol=0, atol=1e-15)
        assert expected[0] == v[0] - 12.5 / (total or 1000)


def _host_copy(xp, a):
    """A host copy of the array ``a`` of ``xp``."""
    return a.get() if xp is not numpy else a.copy()


def test_the_flows_step_graph_holds_fischers_guess():
    """Fischer's guess (the flow's default under gpuamg; PETSc's KSPGuess
    fischer, model 2, kept by the flow) in the captured step: the step stays
    one graph, its fields are the NumPy run's, and its pressure takes fewer
    iterations than from the extrapolated pressure."""
    fischer = {"flow_dt": 0.01, "flow_max_steps": 40}
    solver, _, on_gpu = _cavity_steps("cupy", "implicit", **fischer)
    stepper = solver.stepper
    assert stepper.step_graphs is not None and stepper.step_graphs.refused is None and stepper.step_graphs.replays > 0
    assert stepper.fischer is not None and stepper.fischer.count > 0
    _, _, on_host = _cavity_steps("numpy", "implicit", **fischer)
    _assert_same_flow(on_gpu, on_host, 1e-8)
    plain, _, _ = _cavity_steps("cupy", "implicit", flow_pressure_guess="extrapolated", **fischer)
    assert solver.pressure_iterations < plain.pressure_iterations, (solver.pressure_iterations,
                                                                   plain.pressure_iterations)


def test_phase_times_on_the_gpu_come_from_events_without_waiting():
    """A phase's GPU time is read between CUDA events after the phase, not by
    waiting for the device at its end; the phases of a run are positive and
    add up to at most its wall time per step; inside a replayed step's graph,
    each phase is timed by events the graph records itself."""
    import cupy

    from plugin.flow.phases import PhaseTimer

    timer = PhaseTimer(cupy)
    with timer("Pressure"):
        a = cupy.ones(10**6)
        a *= 2.0
    assert timer.seconds["Pressure"] == 0.0  # recorded, not read: no wait at the phase's end
    timer.settle()
    assert timer.seconds["Pressure"] > 0.0
    every = PhaseTimer.EVERY["Step"]  # a replay: one use in ``every`` timed by events
    for _ in range(2 * every + 1):
        with timer("Step"):
            a *= 2.0
    timer.settle()
    assert (timer.uses["Step"], timer.timed["Step"]) == (2 * every + 1, 2) and timer.seconds["Step"] > 0.0
    with timer("Step", steps=0):  # a loop's launch, its steps counted once it is done: timed every time
        a *= 2.0
    timer.add_steps("Step", 5)
    timer.settle()
    assert (timer.uses["Step"], timer.timed["Step"]) == (2 * every + 6, 7)
    for graphs in (False, True):  # the whole step as one graph, the CFL number's reduction in it, and the first
        # step's from the start's rate; one dt, so that the graphs of each arrangement are captured and replayed
        # (loops of up to 4 steps, each pass's first step stamped: 120 steps replay them many times)
        solver, _, _ = _cavity_steps("cupy", "implicit", flow_cuda_graphs=graphs, flow_dt=0.01, flow_max_steps=120,
                                     flow_graph_steps=4)
        timing = solver.timing()
        inside = dict(timing["graph_phases"])  # read on the replays of the marked graphs (one launch in ``every``)
        whole = inside.pop("Step", None)  # the same replays' whole step: its phases are parts of it
        assert (solver.stepper.phases.graph_timed >= 2 and set(inside) == set(PhaseTimer.PHASES[:5])
                and min(inside.values()) > 0 and sum(inside.values()) <= whole < timing["seconds_per_step"]
                ) if graphs else (inside == {} and whole is None), (inside, whole)
        timed = {"Step", "CFL"} if graphs else set(PhaseTimer.PHASES) - {"Step", "Capture"}
        assert {name for name, seconds in timing["phases"].items() if seconds > 0} == timed, timing["phases"]
        assert sum(timing["phases"].values()) <= timing["seconds_per_step"]
        host = timing["host_seconds_per_step"]  # one wait a step where each step was a graph's
        assert (host is not None and 0 < host < timing["seconds_per_step"]) if graphs else host is None
        replayed, first = timing["host_seconds_per_step_replayed"], timing["first_run_seconds"]  # the one-off apart
        assert (first > 0 and 0 <= replayed < host) if graphs else (replayed is None and first is None)
        captured = timing["captured_steps"]  # a replay's GPU time apart from the graphs' first runs and captures
        assert (0 < captured["captures"] < captured["steps"] < timing["steps"] and captured["seconds"] > 0
                and 0 < captured["capture_seconds"] < first) if graphs else (
            captured == {"steps": 0, "seconds": 0.0, "captures": 0, "capture_seconds": 0.0})


def test_a_captured_explicit_part_gives_the_bits_of_a_launched_one(rng):
    """One step from one state, its explicit part launched, then run again
    (the graph's warm-up), captured and replayed: the same fields, bit for
    bit (one iteration a block in both solves, so that each run takes the
    same iterations); and the outflow faces' upwinding against its twin."""
    import cupy

    from gpu_mats.kernels import family
    from gpu_mats.kernels.cuda_graphs import KeyedGraphs

    solver, state, _ = _cavity_steps("cupy", "implicit", pressure_ksp_graphcg_block=1,
                                     momentum_ksp_graphcg_block=1)
    stepper = solver.stepper
    assert stepper.explicit_graphs is not None
    restore = _restorer(state, stepper)  # Fischer's basis: each step starts from the same
    stepper.explicit_graphs = stepper.step_graphs = None  # the step's parts as launched, its explicit part alone
    launched = stepper.advance(state, state.dt_old)
    reference = {name: getattr(launched, name).copy() for name in ("u", "u_s", "p")}
    stepper.explicit_graphs = KeyedGraphs()
    for _ in range(4):
        restore()
        new = stepper.advance(state, state.dt_old)
        for name, value in reference.items():
            assert cupy.array_equal(getattr(new, name), value), name
    assert stepper.explicit_graphs.replays == 3 and stepper.explicit_graphs.refused is None  # the 2nd captured
    u_s, faces = rng.standard_normal(1000), rng.choice(1000, 37, replace=False).astype(numpy.int64)
    out = cupy.empty(1000)
    family("flow", cupy).upwind_outflow(out, cupy.asarray(u_s), cupy.asarray(faces))
    expected = u_s.copy()
    family("flow", numpy).upwind_outflow(expected, expected, faces)
    assert numpy.array_equal(out.get(), expected)


@pytest.mark.mpi
def test_on_gpus_of_several_ranks_the_explicit_part_is_captured_with_its_nccl_halos(tmp_path):
    """On ranks with a GPU each, the explicit part's CUDA graph holds
    gpusell's NCCL halo exchanges, and the solves' blocks graphcg's NCCL
    sums: one step from one state, launched, then captured and replayed,
    gives the same fields, bit for bit; the step as a whole stays launched,
    with the reason said."""
    import cupy
    from petsc4py import PETSc

    from gpu_mats.kernels.cuda_graphs import KeyedGraphs
    from meshes import prism_layers_mesh, shared_file
    from petsc_ext.options import option_defaults
    from plugin.flow.boundary import Wall
    from plugin.flow.distribution import distribute
    from plugin.flow.solver import FlowSolver

    comm = PETSc.COMM_WORLD
    if comm.getSize() == 1 or comm.getSize() > cupy.cuda.runtime.getDeviceCount():
        pytest.skip("NCCL between ranks needs a GPU for each rank")
    path, _ = shared_file(tmp_path, lambda: prism_layers_mesh(n=8), "prisms.msh")
    g = distribute(path, comm.tompi4py(), "metis").geometry
    walls = {name: Wall((1.0, 0.0, 0.0) if name == "zmax" else (0.0, 0.0, 0.0)) for name in g.boundary_names}
    with option_defaults("", {"flow_max_steps": 3, "flow_dt": 0.01, "flow_diffusion": "implicit",
                              "pressure_ksp_graphcg_block": 1, "momentum_ksp_graphcg_block": 1}):
        solver = FlowSolver(g, comm, "gpusell", 0.05, walls)
    state = solver.run(solver.initial_state())
    stepper = solver.stepper
    assert stepper.explicit_graphs is not None and stepper.step_graphs is None
    assert "one rank" in stepper.step_refusal
    restore = _restorer(state, stepper)  # Fischer's basis (its sums over the ranks): each step starts from the same
    stepper.explicit_graphs = None
    launched = stepper.advance(state, state.dt_old)
    reference = {name: getattr(launched, name).copy() for name in ("u", "u_s", "p")}
    assert float(abs(reference["u"]).max()) > 0  # the lid moves the fluid
    stepper.explicit_graphs = KeyedGraphs()
    for _ in range(4):
        restore()
        new = stepper.advance(state, state.dt_old)
        for name, value in reference.items():
            assert cupy.array_equal(getattr(new, name), value), name
    assert stepper.explicit_graphs.replays == 3 and stepper.explicit_graphs.refused is None
    for ksp in (stepper.pressure_ksp, stepper.momentum_ksp):
        assert ksp.getPythonContext().runs == "CUDA graph replays"


def _tetrahedra_steps(backend, beta, wall="zero", normal_flux=True):
    """Twenty steps of the consistent scheme (every correction, the
    convected velocities' too, the face memory with -flow_face_memory_beta
    ``beta``, -flow_wall_pressure_gradient ``wall``, -flow_wall_normal_flux
    ``normal_flux``) in a lid-driven unit cube of jittered tetrahedra."""
    from petsc4py import PETSc

    import plugin  # noqa: F401
    from meshes import unit_mesh
    from petsc_ext.options import option_defaults
    from plugin.flow.boundary import Wall
    from plugin.flow.mesh import mesh_geometry
    from plugin.flow.solver import FlowSolver

    g = mesh_geometry(unit_mesh("tetra", n=3, jitter=0.25))
    options = {"gpu_backend": backend, "flow_scheme": "consistent", "flow_convection_skewness": True,
               "flow_max_steps": 20, "flow_face_memory_beta": beta, "flow_wall_pressure_gradient": wall,
               "flow_wall_normal_flux": normal_flux, "pressure_ksp_rtol": 1e-12, "momentum_ksp_rtol": 1e-12}
    with option_defaults("", options):
        solver = FlowSolver(g, PETSc.COMM_SELF, "gpusell", 0.01, {"lid": Wall((1.0, 0.0, 0.0)), "wall": Wall()})
    state = solver.run(solver.initial_state())
    return solver, state, _fields(solver, state)


@pytest.mark.parametrize("beta, wall, normal_flux", [("fourier", "zero", True), ("damping", "zero", True),
                                                     ("fourier", "interior", True), ("fourier", "zero", False)])
def test_the_consistent_scheme_steps_on_the_gpu_as_numpy_and_as_its_graph(beta, wall, normal_flux):
    """On tetrahedra, with every correction of the consistent scheme, either
    face memory, either wall pressure gradient (interior: u^p's held
    interpolation too) and the walls without their normal flux: the GPU's
    steps match NumPy's, and a captured step gives the bits of its queued
    launch."""
    solver, state, on_gpu = _tetrahedra_steps("cupy", beta, wall, normal_flux)
    _, _, on_host = _tetrahedra_steps("numpy", beta, wall, normal_flux)
    _assert_same_flow(on_gpu, on_host, 1e-9)
    _captured_step_matches_its_launch(solver, state)


def test_a_captured_step_gives_the_bits_of_its_queued_launch():
    """One step from one state, its solves queued (graphcg's loops the device
    ends) and launched kernel by kernel, then as the whole step's CUDA graph
    (its warm-up, its capture, replays): the same fields and iterations, bit
    for bit; the run before it took its steps so, no capture refused."""
    solver, state, _ = _cavity_steps("cupy", "implicit")
    _captured_step_matches_its_launch(solver, state)


def _captured_step_matches_its_launch(solver, state):
    import cupy

    from gpu_mats.kernels.cuda_graphs import KeyedGraphs
    from test_flow_solver import _EagerGraphs

    stepper = solver.stepper
    assert stepper.step_graphs is not None and stepper.step_graphs.refused is None, stepper.step_refusal
    restore = _restorer(state, stepper)  # Fischer's basis: each step starts from the same
    stepper.step_graphs = _EagerGraphs()
    launched = stepper.advance(state, state.dt_old)
    reference = {name: getattr(launched, name).copy() for name in ("u", "u_s", "p")}
    iterations = (stepper.momentum_iterations, stepper.pressure_iterations)
    stepper.step_graphs = KeyedGraphs()
    for _ in range(4):
        restore()
        new = stepper.advance(state, state.dt_old)
        assert (stepper.momentum_iterations, stepper.pressure_iterations) == iterations
        for name, value in reference.items():
            assert cupy.array_equal(getattr(new, name), value), name
    assert stepper.step_graphs.replays == 3 and stepper.step_graphs.refused is None


def _restorer(state, stepper):
    """A function that puts ``state``'s time levels back to their values now, in the same arrays (the buffers
    its steps' graphs were captured on), and the stepper's Fischer basis for the pressure (which each step
    moves on) where it has one."""
    saved = {name: getattr(state, name).copy()
             for name in ("u", "u_old", "u_s", "u_s_old", "p", "p_old", "implicit", "implicit_old")
             if getattr(state, name) is not None}
    basis = None if stepper.fischer is None else stepper.fischer.basis
    arrays = () if basis is None else (basis.X, basis.state)
    kept = [a.copy() for a in arrays]

    def restore():
        for name, value in saved.items():
            getattr(state, name)[...] = value
        for array, value in zip(arrays, kept):
            array[...] = value
    return restore


def test_a_new_dt_captures_the_arrangements_run_before_at_once():
    """Steps of a new dt (implicit diffusion: a new momentum matrix, its
    preconditioner set up before the capture), whose arrangements of the
    buffers earlier steps ran: each captured at its first run, with the
    bits of the same steps where each new graph is launched kernel by
    kernel first. The one launched first is the step of the new dt's ratio:
    its capture fails (the implicit Rhie-Chow guess's face share of a new
    dt is worked out with temporaries, which a capture cannot allocate),
    and it runs launched, as the fallback does."""
    import cupy

    from gpu_mats.kernels.cuda_graphs import KeyedGraphs

    # graphs of one step each: four places of the buffers in the pools
    solver, state, _ = _cavity_steps("cupy", "implicit", flow_dt=0.01, flow_graph_steps=1)
    stepper, restore = solver.stepper, _restorer(state, solver.stepper)
    runs = []
    for relaunch in (True, False):
        restore()
        stepper.step_graphs, now = KeyedGraphs(relaunch), state
        solver.matrices.set_momentum_dt(0.01)
        for _ in range(8):  # each of the 4 arrangements launched, then captured
            now = stepper.advance(now, 0.01)
        stepper.phases.reset()
        solver.matrices.set_momentum_dt(0.008)
        for _ in range(8):
            now = stepper.advance(now, 0.008)
        timer = stepper.phases
        runs.append(({name: getattr(now, name).copy() for name in ("u", "u_s", "p")},
                     timer.uses["Capture"] - timer.captures, timer.captures, stepper.step_graphs.refused))
    (relaunched, launched, captures, refused), (at_once, once, captured, not_refused) = runs
    assert (launched, captures) == (5, 3) and (once, captured) == (1, 4) and refused is None and not_refused is None
    for name, value in relaunched.items():
        assert cupy.array_equal(at_once[name], value), name


@pytest.mark.parametrize("graph_steps, dt", [(1, 0.01), (4, 0.01), (8, 0.01), (8, 0.0)])
def test_steps_launched_ahead_give_the_bits_of_steps_waited_for(graph_steps, dt):
    """One solver, the same run twice from one state: its captured steps
    launched ahead of the host in graphs of ``graph_steps`` (each graph
    queued before the host waits for the one before, the steps after the
    first of a graph taken together: FlowSolver._take_launched), then each
    step waited for before the next is launched: the same fields,
    iterations and lid force, bit for bit. ``dt`` fixed, or 0: adaptive,
    to t_end (the held dt, its changes and the last steps' shortening)."""
    import cupy

    from plugin.flow.forces import GroupForce

    # with a fixed dt one graph key, the arrangements of the buffers captured in the first steps; an adaptive dt
    # held from about t = 1, each run from t = 1.5 or so to t_end
    solver, state, _ = _cavity_steps("cupy", "implicit", flow_max_steps=50 if dt else 60, flow_dt=dt, flow_t_end=2.5,
                                     flow_graph_steps=graph_steps)
    stepper, lid, restore = solver.stepper, GroupForce(solver, "ymax"), _restorer(state, solver.stepper)
    advance, runs, held = stepper.advance, [], solver._held_dt
    for ahead in (True, False):
        restore()
        solver._held_dt = held  # and the momentum matrix of that dt, as the first run found them
        solver.matrices.set_momentum_dt(held)
        solver.reset_timing()
        stepper.advance = advance if ahead else lambda state, dt, more, loop: advance(state, dt)
        forces = []
        end = solver.run(state, lambda s: forces.append(lid(s)), watched_only=True)
        fields = {name: getattr(end, name).copy() for name in ("u", "u_s", "p")}
        runs.append((fields, solver.pressure_iterations, numpy.array(forces), stepper.steps_ahead))
    (ahead, its, forces, taken), (waited, its_waited, forces_waited, none) = runs
    assert taken >= (20 if dt else 1) and none == 0
    assert its == its_waited and numpy.array_equal(forces, forces_waited)
    for name in ("u", "u_s", "p"):
        assert cupy.array_equal(ahead[name], waited[name]), name


def test_the_functional_kernel_matches_its_twin(rng):
    """Rows of weighted sums over four arrays (a force, probe pressures), an empty row among them."""
    import cupy

    from gpu_mats.kernels import family

    sources = [rng.standard_normal(size) for size in (500, 250, 1000, 400)]
    starts = numpy.array([0, 300, 300, 1000, 1003], dtype=numpy.int64)
    which = rng.integers(0, 4, 1003).astype(numpy.int32)
    index = numpy.array([rng.integers(0, sources[a].size) for a in which], dtype=numpy.int64)
    weight = rng.standard_normal(1003)
    expected = numpy.empty(4)
    family("flow", numpy).functional(expected, starts, which, index, weight, *sources)
    out = cupy.empty(4)
    family("flow", cupy).functional(out, *(cupy.asarray(a) for a in (starts, which, index, weight, *sources)))
    numpy.testing.assert_allclose(out.get(), expected, rtol=1e-13, atol=1e-13)
    assert expected[1] == 0.0


def test_the_gather_kernel_writes_its_twins_values_into_pinned_memory_from_a_graph(rng):
    """A step's readback: sources of several shapes (an empty one among them)
    gathered by one kernel into pinned host memory, launched and replayed
    from a CUDA graph after the sources changed: the twin's values, exactly."""
    import cupy
    import cupyx

    from gpu_mats.kernels import family
    from gpu_mats.kernels.cuda_graphs import capture

    shapes = [(3, 7), (1,), (0,), (2, 4, 3), (1000,)]
    sources = [cupy.asarray(rng.standard_normal(shape)) for shape in shapes]
    kernels = family("flow", cupy)
    plan = kernels.gather_plan(sources)
    out = cupyx.empty_pinned(sum(a.size for a in sources), numpy.float64)
    expected = numpy.empty_like(out)

    def twin():
        family("flow", numpy).gather(expected, family("flow", numpy).gather_plan([a.get() for a in sources]))

    out.fill(numpy.nan)
    kernels.gather(out, plan)
    cupy.cuda.get_current_stream().synchronize()
    twin()
    assert numpy.array_equal(out, expected)
    graph = capture(lambda: kernels.gather(out, plan))
    for source in sources:
        source *= -2.0
    out.fill(numpy.nan)
    graph.launch(cupy.cuda.get_current_stream())
    cupy.cuda.get_current_stream().synchronize()
    twin()
    assert numpy.array_equal(out, expected) and not numpy.isnan(out).any()


def test_a_step_loops_kernels_match_their_twins(rng):
    """The kernels of a loop of steps against their NumPy twins: the status
    a loop starts from; each step's verdict over rates, changes and rules at
    and around the edges of the held dt's band, the CFL limit and the
    steady threshold, a rate of zero, NaN and infinity, the solves' flag
    cleared or not; the solves' convergence from their stores (converged,
    flagged, NaN, above TARGET); a step's values gathered into the row the
    status names."""
    import cupy
    import cupyx

    from gpu_mats.kernels import family
    from gpu_mats.kernels.flow import FINE, LOOP_SLOTS
    from gpu_mats.kernels.pcg import FLAG, ROW, SLOTS, TARGET

    device, host = family("flow", cupy), family("flow", numpy)
    expected, status = numpy.zeros(LOOP_SLOTS), cupy.zeros(LOOP_SLOTS)
    host.loop_start(expected, 5, 8)
    device.loop_start(status, 5, 8)
    assert numpy.array_equal(status.get(), expected)
    dt, band = 0.01, 1.25
    cases = []
    for limit in (dt, numpy.nextafter(dt, 0.0), band * dt, numpy.nextafter(band * dt, 0.0), 1.1 * dt, 2 * dt):
        for fixed in (False, True):
            cases.append((0.5 / limit, 1e-3, (0.5, numpy.inf, band, 0.9, 0.0, fixed)))
            cases.append((1.0, 1e-3, (0.5, limit, band, 0.9, 0.0, fixed)))  # the other limit binds
    cases += [(rate, change, (0.5, numpy.inf, band, cfl_max, steady, False))
              for rate, cfl_max in ((45.0, 0.45), (45.0, numpy.nextafter(0.45, 0.0)), (0.0, 0.9), (numpy.nan, 0.9),
                                    (numpy.inf, 0.9))
              for change, steady in ((1e-3, 0.0), (1e-3, 0.1), (1e-3, numpy.nextafter(0.1, 1.0)), (numpy.nan, 0.1))]
    for k, (rate, change, rule) in enumerate(cases):
        for fine in (1.0, 0.0):
            start = numpy.array([8.0, k % 4, 4.0, 1.0, 1.0, fine])
            expected[...] = start
            host.step_verdict(expected, numpy.array([rate]), numpy.array([change]), dt, rule, 0)
            status[...] = cupy.asarray(start)
            device.step_verdict(status, cupy.array([rate]), cupy.array([change]), dt, rule, 0)
            assert numpy.array_equal(status.get(), expected), (rate, change, rule, fine)
    assert expected[FINE] == 1.0  # FINE set again for the next step's solves
    # the solves' stores: converged, flagged, a NaN in the last row, above TARGET, a later row converged
    stores = numpy.zeros((5, SLOTS + 3 * 9))
    kinds = [(3, 0.0, 0.04, 0.2), (3, 1.0, 0.04, 0.2), (3, 0.0, numpy.nan, 0.2), (2, 0.0, 0.09, 0.2),
             (7, 0.0, 0.0625, 0.25)]
    for store, (row, flag, norm, target) in zip(stores, kinds):
        store[ROW], store[FLAG], store[TARGET] = row, flag, target
        store[SLOTS:].reshape(-1, 3)[:row + 1] = rng.uniform(1.0, 2.0, (row + 1, 3))
        store[SLOTS + 3 * row + 1] = norm
    pcg, pcg_host = family("pcg", cupy), family("pcg", numpy)
    for picked in ([0], [1], [2], [3], [4], [0, 4], [0, 3, 4]):
        for column in (1, 2):
            flag, want = cupy.ones(1), numpy.ones(1)
            pcg.clear_unless_converged(flag, cupy.asarray(stores[picked]), column)
            pcg_host.clear_unless_converged(want, stores[picked], column)
            assert flag.get()[0] == want[0], (picked, column)
    flag = numpy.ones(1)
    pcg_host.clear_unless_converged(flag, stores[[0, 4]], 1)
    assert flag[0] == 1.0
    pcg_host.clear_unless_converged(flag, stores[[3]], 1)
    assert flag[0] == 0.0
    # rows of a loop's readback
    sources = [cupy.asarray(rng.standard_normal(shape)) for shape in [(2, 3), (1,), (4,)]]
    out, want = cupyx.empty_pinned((6, 11), numpy.float64), numpy.zeros((6, 11))
    out.fill(0.0)
    status = cupy.asarray([3.0, 2.0, 4.0, 1.0, 1.0, 1.0])
    device.gather(out, device.gather_plan(sources), status)
    cupy.cuda.get_current_stream().synchronize()
    host.gather(want, host.gather_plan([a.get() for a in sources]), status.get())
    assert numpy.array_equal(out, want) and not want[:5].any() and want[5].any()


def test_the_stamp_kernel_and_its_twin_count_nanoseconds_into_pinned_memory_from_a_graph():
    """Two clock stamps around a sleep of the host (the device waiting on
    it, a replayed graph's stamps between), launched and replayed: both
    twins count at least the sleep's nanoseconds, in order, the device's
    into pinned host memory; and two laps, each the time since its stamp,
    sum both sleeps."""
    import time

    import cupy
    import cupyx

    from gpu_mats.kernels import family
    from gpu_mats.kernels.cuda_graphs import capture

    pause = 20_000_000  # ns
    for xp in (numpy, cupy):
        kernels, stream = family("flow", xp), cupy.cuda.get_current_stream()
        clock = numpy.zeros(4, numpy.int64) if xp is numpy else cupyx.zeros_pinned(4, numpy.int64)

        def between():
            kernels.stamp(clock, 1)
            kernels.stamp(clock, 2)
        kernels.stamp(clock, 0)  # on the GPU, compiled here: a capture cannot
        stream.synchronize()
        time.sleep(pause / 1e9)
        if xp is numpy:
            between()
        else:
            capture(between).launch(stream)
        kernels.stamp(clock, 3)
        stream.synchronize()
        stamps = clock.tolist()
        assert stamps[1] - stamps[0] >= pause and 0 <= stamps[2] - stamps[1] <= stamps[3] - stamps[1], (xp, stamps)
        clock[:] = 0
        for _ in range(2):  # a loop's two passes
            kernels.stamp(clock, 0)
            stream.synchronize()
            time.sleep(pause / 1e9)
            kernels.lap(clock, 1, 0)
            stream.synchronize()
        assert 2 * pause <= clock[1] < clock[0], (xp, clock.tolist())


@pytest.mark.parametrize("levels", ["auto", "algebraic"])
def test_a_float32_cycle_on_the_gpu_gives_the_hosts_flow(levels):
    """-pressure_pc_gpuamg_vector_type float32 on the box's levels or on an
    aggregation (the cycle's vectors float32, rounded from and back into
    cg's float64 ones), replayed as CUDA graphs: the NumPy twin's steps, and
    the float64 cycle's, to the solvers' tolerance."""
    coarsest = {"pressure_pc_gpuamg_coarse_size": 50} if levels == "algebraic" else {}  # levels, not one dense
    levels = {"flow_pressure_levels": levels, **coarsest}
    f32 = {"pressure_pc_type": "gpuamg", "pressure_pc_gpuamg_vector_type": "float32", **levels}
    solver, _, on_gpu = _cavity_steps("cupy", "explicit", **f32)
    amg = solver.pressure_ksp.getPC().getPythonContext().amg
    assert {level.x.dtype for level in amg.levels} == {numpy.dtype(numpy.float32)} and len(amg.levels) > 2
    assert solver.pressure_ksp.getPC().getPythonContext().graphs.replays > 0
    _, _, on_host = _cavity_steps("numpy", "explicit", **f32)
    _, _, float64 = _cavity_steps("cupy", "explicit", pressure_pc_type="gpuamg", **levels)
    for other in (on_gpu, float64):
        _assert_same_flow(other, on_host, 1e-8)


@pytest.mark.parametrize("model, diffusion", [("smagorinsky", "explicit"), ("wale", "explicit"),
                                              ("wale", "implicit")])
def test_an_eddy_viscosity_on_the_gpu_gives_the_hosts_flow(model, diffusion):
    """-flow_les on the GPU, its kernels inside the captured steps: the
    NumPy twin's flow, to the solvers' tolerance."""
    from gpu_mats.backend import to_host

    solver, _, on_gpu = _cavity_steps("cupy", diffusion, flow_les=model, flow_max_steps=40)
    assert solver.stepper.step_graphs is not None and solver.stepper.step_graphs.replays > 0
    host_solver, _, on_host = _cavity_steps("numpy", diffusion, flow_les=model, flow_max_steps=40)
    nu_t = to_host(solver.xp, solver.stepper.eddy.nu_t)
    assert nu_t.max() > 0.0
    numpy.testing.assert_allclose(nu_t, host_solver.stepper.eddy.nu_t, rtol=1e-8, atol=1e-12 * nu_t.max())
    _assert_same_flow(on_gpu, on_host, 1e-8)


@pytest.mark.parametrize("forcing", ["pressure_gradient", "flow_rate"])
def test_a_forced_channel_on_the_gpu_gives_the_hosts_flow(forcing):
    """-flow_forcing inside the captured steps (the flow rate held by kernels
    reading its correction from device memory): the NumPy twin's flow, and
    the same mean pressure gradient."""
    from gpu_mats.backend import to_host
    from test_forcing import channel

    runs = {}
    for backend in ("cupy", "numpy"):
        _, solver, state, history = channel(forcing, 1.0, steps=60, shape=(8, 12), diffusion="explicit",
                                            gpu_backend=backend)
        runs[backend] = (to_host(solver.xp, state.u), history[-1][1], solver)
    gpu, host = runs["cupy"], runs["numpy"]
    assert gpu[2].stepper.step_graphs is not None and gpu[2].stepper.step_graphs.replays > 0
    assert abs(gpu[0] - host[0]).max() <= 1e-8 * abs(host[0]).max()
    assert gpu[1] == pytest.approx(host[1], rel=1e-8)


def test_plane_statistics_on_the_gpu_match_numpy():
    from plugin.flow.statistics import PlaneStatistics
    from test_statistics import box, manufactured

    results = []
    for backend in ("cupy", "numpy"):
        _, solver = box(gpu_backend=backend)
        assert solver.xp.__name__ == backend
        stats = PlaneStatistics(solver)
        for t, a in ((0.0, 1.0), (1.0, 2.0), (3.0, 0.5)):
            stats.sample(manufactured(solver, t, a, 1.0))
        results.append(stats.profiles())
    for got, expected in zip(*results):
        numpy.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


def test_the_graded_box_solver_on_the_gpu_gives_the_hosts_solve():
    """GradedBoxSolver with cuFFT and the Thomas sweeps on CuPy arrays against NumPy's."""
    import cupy

    from gpu_mats.spectral import GradedBoxSolver
    from plugin.flow.box import box_geometry, tanh_widths, uniform_widths
    from plugin.flow.operators import compact_laplacian

    shape, periodic = (16, 24, 8), (True, False, True)
    widths = uniform_widths(shape, (6.0, 2.0, 3.0))
    widths[1] = tanh_widths(24, 2.0, 2.0)
    A = (-compact_laplacian(box_geometry(shape, (6.0, 2.0, 3.0), periodic, widths=widths))).tocsr()
    A.sort_indices()
    b = numpy.random.default_rng(6).standard_normal(A.shape[0])
    b -= b.mean()
    solves = []
    for xp in (numpy, cupy):
        S = GradedBoxSolver.from_csr(*(xp.asarray(a) for a in (A.indptr, A.indices, A.data)), shape, periodic)
        x = xp.full(b.size, xp.nan)
        S.solve(xp.asarray(b), x)
        solves.append(x if xp is numpy else x.get())
    numpy.testing.assert_allclose(solves[1], solves[0], rtol=0, atol=1e-12 * abs(solves[0]).max())
    assert abs(A @ solves[1] - b).max() < 1e-11 * abs(b).max()


@pytest.mark.parametrize("shape, axes", [((6, 10, 8), (0, 2)), ((6, 10, 8), (1, 2)), ((6, 10, 8), (0, 1)),
                                         ((6, 10, 8), (0, 1, 2)), ((9, 7), (1,)), ((9, 7), (0,))])
def test_the_spectral_familys_transforms_and_sweeps_agree_with_numpys(shape, axes):
    """cuFFT's plans of the advanced layout (the batch axis anywhere) give
    numpy.fft's transforms; the sweeps (real and complex rows) the NumPy
    twin's, and the solve of each column's tridiagonal system, its (0, 0)
    column's mean removed."""
    import cupy

    from gpu_mats.kernels import family

    rng = numpy.random.default_rng(len(axes) + sum(shape))
    x = rng.standard_normal(shape)
    half = list(shape)
    half[axes[-1]] = shape[axes[-1]] // 2 + 1
    spectrum = cupy.empty(half, dtype=complex)
    family("spectral", cupy).real_transform(cupy.asarray(x), axes, spectrum)
    expected = numpy.fft.rfftn(x, axes=axes)
    numpy.testing.assert_allclose(spectrum.get(), expected, rtol=0, atol=1e-12 * abs(expected).max())
    back = cupy.empty(shape)
    family("spectral", cupy).inverse_real_transform(spectrum, axes, back)
    numpy.testing.assert_allclose(back.get(), x * numpy.prod([shape[a] for a in axes]), rtol=0,
                                  atol=1e-11 * abs(x).max() * numpy.prod(shape))

    outer, m, inner = 3, 9, 5
    couplings = rng.uniform(0.5, 1.5, m - 1)
    diagonal = rng.uniform(4.0, 5.0, (outer, m, inner))
    pivots = diagonal.copy()
    for j in range(1, m):
        pivots[:, j] = diagonal[:, j] - couplings[j - 1] ** 2 / pivots[:, j - 1]
    for rows in (rng.standard_normal((outer, m, inner)), rng.standard_normal((outer, m, inner, 2)) @ [1.0, 1.0j]):
        solved = []
        for xp in (numpy, cupy):
            r = xp.array(rows)  # a copy: the sweeps work in place
            family("spectral", xp).tridiagonal_sweeps(xp.asarray(couplings), xp.asarray(1.0 / pivots), 0.5, r)
            solved.append(r if xp is numpy else r.get())
        numpy.testing.assert_allclose(solved[1], solved[0], rtol=0, atol=1e-13 * abs(solved[0]).max())
        T = numpy.diag(diagonal[1, :, 2]) - numpy.diag(couplings, 1) - numpy.diag(couplings, -1)
        numpy.testing.assert_allclose(solved[1][1, :, 2], numpy.linalg.solve(T, 0.5 * rows[1, :, 2]), rtol=1e-12)
        assert abs(solved[1][0, :, 0].mean()) < 1e-14 * abs(solved[1][0, :, 0]).max()


def test_boxfft_on_periodic_sides_is_replayed_by_graphcg_and_the_channels_step_graph():
    """On the graded channel (periodic in x and z) boxfft's solve allocates
    nothing: graphcg takes it and the whole step is replayed as a CUDA graph,
    one pressure iteration a step, the NumPy twin's flow."""
    from gpu_mats.backend import to_host
    from test_flow_solver import make_solver

    runs = {}
    for backend in ("cupy", "numpy"):
        options = {"gpu_backend": backend, "flow_box_grading": 2.0, "flow_max_steps": 30, "pressure_ksp_rtol": 1e-12,
                   "flow_forcing": "pressure_gradient", "flow_forcing_value": 1.0, "pressure_pc_type": "boxfft",
                   "flow_dt": 0.002}
        _, solver = make_solver((8, 12, 6), (True, False, True), 0.05, options, lengths=(2.0, 2.0, 1.0))
        y = solver.geometry.centroids[:, 1]
        start = numpy.array([y * (2 - y) * (1 + 0.2 * numpy.sin(3 * solver.geometry.centroids[:, 0])),
                             0.1 * numpy.sin(numpy.pi * y), 0 * y])
        state = solver.run(solver.initial_state(start, project=True))
        runs[backend] = (solver, to_host(solver.xp, state.u))
    solver, u = runs["cupy"]
    assert solver.pressure_ksp.getType() == "graphcg" and solver.pressure_ksp.getPC().getType() == "boxfft"
    assert solver.pressure_iterations <= solver.steps_run + 1
    assert solver.stepper.step_graphs is not None and solver.stepper.step_graphs.refused is None
    assert solver.stepper.step_graphs.replays > 0
    numpy.testing.assert_allclose(u, runs["numpy"][1], rtol=0, atol=1e-9 * abs(u).max())


@pytest.mark.parametrize("box", ["3D walls", "3D periodic x and z", "2D periodic y"])
def test_the_box_transforms_on_the_gpu_give_the_hosts_solve(box):
    """boxfft's solve with cupyx.scipy.fft (cuFFT) against scipy.fft's."""
    import cupy

    from gpu_mats.spectral import SpectralBoxSolver
    from gpu_mats.stencil import StencilMatrix
    from test_stencil import box_laplacian

    shape, periodic = {"3D walls": ((16, 12, 20), (False,) * 3), "3D periodic x and z": ((8, 6, 10), (True, False, True)),
                       "2D periodic y": ((12, 9), (False, True))}[box]
    A = box_laplacian(shape, periodic, (1.0,) * (len(shape) - 1) + (2.0,)).tocsr()
    A.sort_indices()
    b = A @ numpy.random.default_rng(13).standard_normal(A.shape[0])
    solutions = []
    for xp in (numpy, cupy):
        S = StencilMatrix.from_csr(*(xp.asarray(a) for a in (A.indptr, A.indices, A.data)), shape, periodic)
        x = xp.full(b.size, xp.nan)
        SpectralBoxSolver(S).solve(xp.asarray(b), x)
        solutions.append(x if xp is numpy else x.get())
    numpy.testing.assert_allclose(solutions[1], solutions[0], rtol=0, atol=1e-12 * abs(solutions[0]).max())
    assert numpy.linalg.norm(b - A @ solutions[1]) <= 1e-12 * numpy.linalg.norm(b)


def test_the_box_transforms_in_the_flow_on_the_gpu_match_numpy():
    """-pressure_pc_type boxfft in the flow driver on CUDA vectors: one cg
    iteration a step, the NumPy backend's steps."""
    solver, _, on_gpu = _cavity_steps("cupy", "explicit", pressure_pc_type="boxfft")
    assert solver.pressure_iterations == solver.steps_run
    assert solver.stepper.q.getOffloadMask() == 2  # PETSC_OFFLOAD_GPU: the solve stayed on the device
    _, _, on_host = _cavity_steps("numpy", "explicit", pressure_pc_type="boxfft")
    for name, value in on_host.items():
        assert abs(on_gpu[name] - value).max() <= 1e-9 * abs(value).max(), name


def _open_box():
    """A pulsing inflow at xmin, an outflow at pressure 0.5 at xmax, slip at ymin, a moving wall at ymax."""
    from plugin.flow.boundary import Inflow, Outflow, Slip, Wall

    def pulse(x, t):
        return numpy.column_stack([(1 + numpy.sin(20 * t)) * x[:, 1] * (1.2 - x[:, 1]), 0.1 * x[:, 1]])

    return {"xmin": Inflow(pulse, steady=False), "xmax": Outflow(0.5), "ymin": Slip(), "ymax": Wall((0.5, 0.0))}


@pytest.mark.parametrize("diffusion", ["explicit", "implicit"])
def test_open_boundaries_on_the_gpu_match_numpy(diffusion):
    """Inflow (time-dependent), outflow with a pressure, slip and a moving wall:
    the boundary sources summed on the device (cupyx), the backflow clipping
    and the slip matrix give the NumPy backend's steps."""
    import cupy

    solver, state, on_gpu = _cavity_steps("cupy", diffusion, _open_box())
    assert solver.xp is cupy and isinstance(state.u_s, cupy.ndarray)
    assert solver.matrices.mats["normal_term"].getType() == "seqaijgpusell"
    _, _, on_host = _cavity_steps("numpy", diffusion, _open_box())
    for name, value in on_host.items():
        assert abs(on_gpu[name] - value).max() <= 1e-9 * abs(value).max(), name


@pytest.mark.parametrize("diffusion", ["explicit", "implicit"])
def test_aijcusparse_matrices_take_their_values_from_the_gpu_and_step_as_gpusell(diffusion):
    """-dm_mat_type aijcusparse: every matrix is made from the operators the
    GPU assembled by COO (values by MatSetValuesCOO from device arrays), and so
    are C's new values each step and the momentum matrix's for a new dt; the
    open box's steps are gpusell's."""
    from petsc_ext.matrices import COO_IN_CSR_ORDER

    solver, _, cusparse = _cavity_steps("cupy", diffusion, _open_box(), mat_type="aijcusparse")
    m = solver.matrices
    made = [m.poisson, *m.mats.values(), *([m.momentum] if diffusion == "implicit" else [])]
    assert {mat.getType() for mat in made} == {"seqaijcusparse"}
    assert all(mat.query(COO_IN_CSR_ORDER) is not None for mat in made)
    _, _, gpusell = _cavity_steps("cupy", diffusion, _open_box())
    for name, value in gpusell.items():
        assert abs(cusparse[name] - value).max() <= 1e-9 * abs(value).max(), name


def test_cacg_replays_the_gpuamg_cycle_in_its_cuda_graphs():
    """Solved three times by one cacg, the basis build (with its V-cycles) is
    captured on a repeat and replayed: the same solution every time, cg's."""
    from petsc4py import PETSc

    from conftest import krylov_solve
    from stencils import laplacian

    n = 32
    reference = krylov_solve(laplacian(n), n**3, {"ksp_type": "cg", "pc_type": "gpuamg"}, comm=PETSc.COMM_SELF)[1]
    ksp, x = krylov_solve(laplacian(n), n**3, {"ksp_type": "cacg", "ksp_cacg_s": 4, "pc_type": "gpuamg"},
                          comm=PETSc.COMM_SELF)
    b = x.duplicate()
    b.set(1.0)
    for _ in range(2):
        x.set(0.0)
        ksp.solve(b, x)
        assert ksp.getConvergedReason() > 0 and ksp.getPythonContext().basis_runs == "CUDA graph replays"
        assert (x - reference).norm() <= 1e-6 * reference.norm()


def test_gpuamg_replays_its_cycle_as_one_cuda_graph_and_refreshes_new_values_in_place():
    """Under cg the V-cycle is captured at its second use and replayed: the
    solution of the eager cycle (-pc_gpuamg_cuda_graph false). The matrix
    scaled in place refreshes the hierarchy (same aggregates, new Galerkin
    values), new graphs are captured, and cg and cacg (its own graphs) give
    the first solution over 3."""
    from petsc4py import PETSc

    from conftest import krylov_solve
    from stencils import laplacian

    n = 32
    eager = krylov_solve(laplacian(n), n**3, {"ksp_type": "cg", "pc_type": "gpuamg", "pc_gpuamg_cuda_graph": False},
                         comm=PETSc.COMM_SELF)[1]
    for ksp_type in ("cg", "cacg"):
        ksp, x = krylov_solve(laplacian(n), n**3, {"ksp_type": ksp_type, "pc_type": "gpuamg"}, comm=PETSc.COMM_SELF)
        context = ksp.getPC().getPythonContext()
        b = x.duplicate()
        b.set(1.0)
        for _ in range(2):
            x.set(0.0)
            ksp.solve(b, x)
            assert (x - eager).norm() <= 1e-6 * eager.norm()
        if ksp_type == "cg":
            assert context.graphs.replays > 0
        amg = context.amg
        ksp.getOperators()[0].scale(3.0)
        for _ in range(2):
            x.set(0.0)
            ksp.solve(b, x)
            assert context.refreshed and context.amg is amg and ksp.getConvergedReason() > 0
            assert (3.0 * x - eager).norm() <= 1e-6 * eager.norm()
        if ksp_type == "cg":
            assert context.graphs.replays > 0  # the new set-up's graphs


def test_the_k_cycle_runs_as_one_cuda_graph_under_fcg_with_the_hosts_iterations():
    """-pc_gpuamg_cycle k on the GPU (inner products in device memory, the
    cycle captured and replayed) needs the host's fcg iterations, and l1-Jacobi
    smoothing too."""
    from petsc4py import PETSc

    from conftest import krylov_solve
    from stencils import laplacian

    n = 24
    for options in ({"ksp_type": "fcg", "pc_gpuamg_cycle": "k", "pc_gpuamg_smoothed": False,
                     "pc_gpuamg_aggregation": "pairwise"}, {"ksp_type": "cg", "pc_gpuamg_smoother": "l1jacobi"}):
        runs = {}
        for mat_type in ("gpusell", "aij"):
            ksp, x = krylov_solve(laplacian(n), n**3, {"pc_type": "gpuamg", "pc_gpuamg_coarse_size": 100, **options},
                                  comm=PETSc.COMM_SELF, mat_type=mat_type)
            b = x.duplicate()
            b.set(1.0)
            x.set(0.0)
            ksp.solve(b, x)  # a second solve: the cycle replayed from its graph on the GPU
            assert ksp.getConvergedReason() > 0
            graphs = ksp.getPC().getPythonContext().graphs  # None on the host
            runs[mat_type] = (ksp.getIterationNumber(), x.getArray().copy(), graphs and graphs.replays)
        assert runs["gpusell"][2] > 0
        assert abs(runs["gpusell"][0] - runs["aij"][0]) <= 1, (options, runs["gpusell"][0], runs["aij"][0])
        numpy.testing.assert_allclose(runs["gpusell"][1], runs["aij"][1], rtol=1e-6)


def test_the_galerkin_product_in_blocks_of_rows_on_the_gpu_equals_the_hosts():
    """gpuamg's Galerkin product over blocks of R's rows (cupyx row slices
    and vstack; large problems only, so forced here by a small block size)
    equals scipy's product in one piece."""
    import cupy
    import cupyx.scipy.sparse
    import scipy.sparse

    from gpu_mats.amg import AggregationAMG, galerkin_product
    from stencils import laplacian

    indptr, indices, data = laplacian(12, 27)
    A = scipy.sparse.csr_matrix((data, indices, indptr), shape=(12**3, 12**3))
    R = AggregationAMG(indptr, indices, data, 12**3, numpy, coarse_size=20).levels[0].galerkin_R
    whole = galerkin_product(R, A, R.T.tocsr())
    Rd, Ad = cupyx.scipy.sparse.csr_matrix(R), cupyx.scipy.sparse.csr_matrix(A)
    for products in (R.nnz, 1000):
        blocks = galerkin_product(Rd, Ad, Rd.T.tocsr(), products=products)
        assert isinstance(blocks.data, cupy.ndarray)
        numpy.testing.assert_allclose(blocks.toarray().get(), whole.toarray(), rtol=0, atol=1e-12 * abs(whole).max())


def test_gpuamg_builds_the_hosts_hierarchy_on_the_gpu_and_needs_its_iterations():
    """-pc_type gpuamg on gpusell with CUDA vectors: the hierarchy built with
    CuPy and cupyx (MIS-2 aggregates, smoothed prolongation, Galerkin
    products) has the host's levels, and CG needs the host's iterations."""
    import cupy
    from petsc4py import PETSc

    from conftest import krylov_solve
    from stencils import laplacian

    n = 24
    runs = {}
    for mat_type in ("gpusell", "aij"):
        ksp, x = krylov_solve(laplacian(n), n**3, {"ksp_type": "cg", "pc_type": "gpuamg",
                                                   "pc_gpuamg_coarse_size": 200},
                              comm=PETSc.COMM_SELF, mat_type=mat_type)
        amg = ksp.getPC().getPythonContext().amg
        runs[mat_type] = (ksp.getIterationNumber(), [level.A.shape[0] for level in amg.levels],
                          [level.A.nnz for level in amg.levels], x.getArray().copy(), amg.xp)
    device, host = runs["gpusell"], runs["aij"]
    assert device[4] is cupy and host[4] is numpy
    assert device[1] == host[1]  # the same aggregates: the same rows on every level
    # cuSPARSE's products may keep a few entries that cancel where scipy's drop them (6 of 37,281 seen)
    numpy.testing.assert_allclose(device[2], host[2], rtol=1e-3)
    assert abs(device[0] - host[0]) <= 1
    numpy.testing.assert_allclose(device[3], host[3], rtol=1e-6)


@pytest.mark.parametrize("system", ["7-point", "unstructured"])
@pytest.mark.parametrize("bs", [1, 3, 6])
def test_cuda_block_ilu_matches_numpy(system, bs):
    """Factors and sweeps (every schedule) of the CUDA kernels equal the NumPy twins to rounding."""
    import cupy

    from gpu_mats.block_ilu import BlockILU, graph_levels
    from test_wbilu import SYSTEMS

    indptr, indices, blocks = SYSTEMS[system](bs)
    levels = graph_levels(indptr, indices)
    host = BlockILU(indptr, indices, blocks, levels)
    device = BlockILU(indptr, indices, blocks, levels, xp=cupy)
    for name in ("dinv", "lower_vals", "upper_vals"):
        numpy.testing.assert_allclose(getattr(device, name).get(), getattr(host, name), rtol=1e-12, atol=1e-13)
    b = numpy.random.default_rng(bs).standard_normal(host.num_rows * bs)
    expected = host.apply(b, numpy.empty_like(b))
    for schedule in ("launch", "graph", "persistent"):
        device.schedule = schedule
        for _ in range(2):  # the graph is captured by the first apply, replayed by the second
            x = cupy.full(b.size, numpy.nan)
            device.apply(cupy.asarray(b), x)
            numpy.testing.assert_allclose(x.get(), expected, rtol=1e-12, atol=1e-12 * numpy.abs(expected).max())
    inplace = cupy.asarray(b)
    device.apply(inplace, inplace)
    numpy.testing.assert_allclose(inplace.get(), expected, rtol=1e-12, atol=1e-12 * numpy.abs(expected).max())


def test_cuda_block_ilu_reports_the_singular_row():
    import cupy

    from gpu_mats.block_ilu import BlockILU, SingularBlockError, graph_levels
    from stencils import block_stencil

    indptr, indices, blocks = block_stencil(3, 3)
    rows = numpy.repeat(numpy.arange(27), numpy.diff(indptr))
    blocks[(rows == 7) & (indices <= 7)] = 0.0
    with pytest.raises(SingularBlockError, match="block row 7 is singular"):
        BlockILU(indptr, indices, blocks, graph_levels(indptr, indices), xp=cupy)


@pytest.mark.parametrize("schedule", ["launch", "graph", "persistent"])
def test_wbilu_on_cuda_vectors_equals_petsc_ilu(schedule, capfd):
    """An aijcusparse matrix with block size 6: wbilu runs on the GPU and
    gives PETSc's BAIJ ilu; GMRES takes the same iterations."""
    from petsc4py import PETSc

    import plugin  # noqa: F401
    from stencils import block_stencil
    from petsc_ext.arrays import get_array, restore_array
    from petsc_ext.matrices import baij_from_bsr
    from test_wbilu import pc_solution

    indptr, indices, blocks = block_stencil(6, 6)
    baij = baij_from_bsr(indptr, indices, blocks, comm=PETSc.COMM_SELF)
    gpu = baij.convert("aijcusparse")
    assert gpu.getBlockSize() == 6
    b_host = baij.createVecLeft()
    b_host.setRandom()
    _, reference = pc_solution(baij, "ilu", b_host)
    b = gpu.createVecLeft()
    b.setArray(b_host.getArray())
    ksp, x = pc_solution(gpu, "wbilu", b, [("pc_wbilu_schedule", schedule)])
    assert type(get_array(x, "r")).__module__.startswith("cupy")  # the solution's valid copy is on the GPU
    restore_array(x, "r")
    capfd.readouterr()
    ksp.view()
    view = capfd.readouterr().out
    assert f"schedule {schedule} (GPU)" in view and "(CUDA events)" in view
    numpy.testing.assert_allclose(x.getArray(), reference.getArray(), rtol=0,
                                  atol=1e-12 * numpy.abs(reference.getArray()).max())
    counts = []
    for A, pc_type, rhs in ((baij, "ilu", b_host), (gpu, "wbilu", b)):
        solver = PETSc.KSP().create(comm=PETSc.COMM_SELF)
        solver.setOperators(A)
        solver.setType("gmres")
        solver.getPC().setType(pc_type)
        solver.setTolerances(rtol=1e-10)
        solver.solve(rhs, rhs.duplicate())
        counts.append(solver.getIterationNumber())
    assert counts[0] == counts[1]


@pytest.mark.parametrize("name", ["triangles-and-quads", "prisms", "box"])
def test_operators_assembled_on_the_gpu_equal_the_hosts(name):
    """-flow_assembly device: every operator of both gradients' schemes (and of
    -flow_wall_pressure_gradient interior) built with CuPy and cupyx (inflow, outflow, slip and walls on a mesh; a box
    periodic along one axis) is the host's to rounding."""
    import cupy

    from meshes import MESHES, unit_mesh
    from plugin.flow.box import box_geometry
    from plugin.flow.mesh import mesh_geometry
    from plugin.flow.operators import FlowOperators
    from plugin.flow.scheme import PARTS, Scheme
    from test_boundary_conditions import channel

    if name == "box":
        g = box_geometry((6, 5, 4), (1.0, 2.0, 0.5), (False, False, True))
        from plugin.flow.boundary import Inflow, Outflow, Slip, Wall
        conditions = {0: Inflow((1.0, 0.0, 0.0)), 1: Outflow(0.5), 2: Slip(), 3: Wall((1.0, 0.0, 0.0))}
    else:
        kinds, jitter = MESHES[name]
        g, named = channel(mesh_geometry(unit_mesh(kinds, n=3, jitter=jitter)))
        conditions = {g.boundary_names[key]: c for key, c in named.items()}
    every_part = dataclasses.replace(PARTS["consistent"], convection_correction=True)
    interior = dataclasses.replace(every_part, wall_pressure_gradient="interior")  # held_difference too
    for scheme in (Scheme(diffusion_correction=True), every_part, interior):  # Green-Gauss, least squares
        host = FlowOperators(g, 0.01, conditions, scheme=scheme)
        device = FlowOperators(g, 0.01, conditions, xp=cupy, scheme=scheme)
        _same_operators(host, device)


def test_the_flow_assembles_its_operators_where_gpusell_keeps_its_matrices():
    """-flow_assembly auto with gpusell follows -gpu_backend: the host's
    backend assembles on the host even beside a GPU (no device memory
    taken); PETSc's cusparse types assemble on the GPU."""
    import cupy

    from petsc_ext.options import option_defaults
    from plugin.flow.solver import assembly_module

    for backend, expected in (("numpy", numpy), ("cupy", cupy), ("auto", cupy)):
        with option_defaults("", {"gpu_backend": backend}):
            assert assembly_module("auto", "gpusell") is expected, backend
            assert assembly_module("auto", "aijcusparse") is cupy
            assert assembly_module("host", "gpusell") is numpy


def _same_operators(host, device):
    from plugin.flow.operators import host_matrix

    for matrix in ("L", "D", "G", "Gamma", "Gs", "Ms", "E_C", "flux_rate", "normal_term", "velocity_gradient",
                   "velocity_gradient_source", "held_difference", "diffusion_correction", "pressure_correction",
                   "skewness_correction", "convection_correction"):
        if getattr(host, matrix) is None:
            continue
        expected, got = getattr(host, matrix).toarray(), host_matrix(getattr(device, matrix)).toarray()
        numpy.testing.assert_allclose(got, expected, rtol=0, atol=1e-13 * abs(expected).max(), err_msg=matrix)
    assert device.diffusion_rate() == pytest.approx(host.diffusion_rate(), rel=1e-14)
    numpy.testing.assert_allclose(device.face_diffusion.get(), host.face_diffusion, rtol=1e-14, atol=0)


def test_the_largest_difference_on_the_gpu_matches_its_twin_and_keeps_nan(rng):
    """blas's max |x - y| (the CFL and steady-state reductions) against NumPy's, with and without y, on
    no entries, and with a NaN, which must come out (the blow-up checks read it)."""
    import cupy

    from gpu_mats.kernels import family

    cuda, host = family("blas", cupy), family("blas", numpy)
    for n in (0, 1, 1000, 1_000_003):
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        for second in (None, y):
            expected = numpy.zeros(1)
            host.max_abs(expected, x, second)
            out, scratch = cupy.full(1, -1.0), cupy.zeros(cuda.reduction_slots(n))
            cuda.max_abs(out, cupy.asarray(x), None if second is None else cupy.asarray(second), scratch)
            assert out.get()[0] == expected[0], (n, second is None)
    x[12345] = numpy.nan
    out = cupy.zeros(1)
    cuda.max_abs(out, cupy.asarray(x), None, cupy.zeros(cuda.reduction_slots(x.size)))
    assert numpy.isnan(out.get()[0])


@pytest.mark.parametrize("held", [False, True], ids=["walls only (singular)", "a held value in every layer"])
def test_the_extruded_solve_on_the_gpu_gives_the_hosts(held):
    """layerfft's multigrid sections with cuFFT and CuPy: the NumPy twin's
    iterations and solution, and scipy's direct solve; direct sections are
    refused for device arrays."""
    import cupy

    from gpu_mats.amg.shifted import ShiftedAMG
    from gpu_mats.extruded import ExtrudedSolver
    from test_extruded import direct_solution, layered_system
    from test_shifted_amg import SHIFTS, neumann_grid

    A, order, b = layered_system(held, n=16)
    solutions, iterations = [], []
    for xp in (numpy, cupy):
        x = xp.full(b.size, xp.nan)
        solver = ExtrudedSolver(A, order, "multigrid", xp, rtol=1e-11)
        solver.solve(xp.asarray(b), x)
        solutions.append(x if xp is numpy else x.get())
        iterations.append(solver.section_solver.iterations)
    assert iterations[0] == iterations[1]
    numpy.testing.assert_allclose(solutions[1], solutions[0], rtol=0, atol=1e-11 * abs(solutions[0]).max())
    numpy.testing.assert_allclose(solutions[1], direct_solution(A, b, held), rtol=0, atol=1e-9 * abs(solutions[0]).max())
    with pytest.raises(ValueError, match="direct 2D solves run on the host"):
        ExtrudedSolver(A, order, "direct", cupy)
    L, c = neumann_grid()
    B = numpy.random.default_rng(5).standard_normal((L.shape[0], len(SHIFTS), 2))
    host = ShiftedAMG(L, c, SHIFTS, numpy, coarse_size=40)
    device = ShiftedAMG(L, c, SHIFTS, cupy, coarse_size=40)
    assert [level.L.shape for level in device.levels] == [level.L.shape for level in host.levels]
    X, Y = numpy.empty_like(B), cupy.empty(B.shape)
    host.apply(B, X)
    device.apply(cupy.asarray(B), Y)
    numpy.testing.assert_allclose(Y.get(), X, rtol=0, atol=1e-12 * abs(X).max())


def _layerfft_flows_agree(g, comm):
    """The flow of -pressure_pc_type layerfft on ``g`` (a periodic extrusion) on CUDA vectors (multigrid
    sections, the auto choice there) against the host's (direct sections): one cg iteration a step, the
    same velocities; each rank's wavenumbers solved where ``comm`` has several."""
    from gpu_mats.backend import to_host
    from petsc_ext.options import option_defaults
    from plugin.flow.boundary import Wall
    from plugin.flow.solver import FlowSolver

    start = numpy.array([numpy.sin(numpy.pi * g.centroids[:, 2]), 0.3 * numpy.cos(numpy.pi * g.centroids[:, 2]),
                         0.2 * g.centroids[:, 0]])
    runs = {}
    for backend in ("cupy", "numpy"):
        options = {"gpu_backend": backend, "flow_max_steps": 5, "flow_dt": 0.002, "pressure_ksp_rtol": 1e-12,
                   "pressure_pc_type": "layerfft", "pressure_pc_layerfft_rtol": 1e-13}
        with option_defaults("", options):
            solver = FlowSolver(g, comm, "gpusell", 0.05, {name: Wall() for name in g.boundary_names})
        state = solver.run(solver.initial_state(start, project=True))
        context = solver.pressure_ksp.getPC().getPythonContext()
        runs[backend] = (solver.pressure_iterations / solver.steps_run, to_host(solver.xp, state.u),
                         context.solver.sections, context.solver.ranks)
    assert runs["cupy"][2:] == ("multigrid", comm.getSize()) and runs["numpy"][2] == "direct"
    assert runs["cupy"][0] == runs["numpy"][0] == 1.0
    numpy.testing.assert_allclose(runs["cupy"][1], runs["numpy"][1], rtol=0, atol=1e-9)


def test_layerfft_in_the_flow_on_the_gpu_gives_the_hosts_flow():
    from petsc4py import PETSc

    from test_extruded import prism_layers

    _layerfft_flows_agree(prism_layers(n=16), PETSc.COMM_SELF)


@pytest.mark.mpi
def test_layerfft_on_each_ranks_columns_on_the_gpu_gives_the_hosts_flow(tmp_path, monkeypatch):
    """The same on the ranks of PETSc's world, the mesh cut by its
    cross-section: the transforms cross ranks through host memory."""
    from cupy.cuda import nccl
    from petsc4py import PETSc

    from meshes import prism_layers_mesh, shared_file
    from plugin.flow.distribution import distribute

    # the ranks may share one GPU, where NCCL refuses to run: the halos go through MPI, as where CuPy has none
    monkeypatch.setattr(nccl, "available", False)
    path, _ = shared_file(tmp_path, lambda: prism_layers_mesh(n=16), "prisms.msh")
    _layerfft_flows_agree(distribute(path, PETSc.COMM_WORLD.tompi4py(), "columns", (("zmin", "zmax"),)).geometry,
                          PETSc.COMM_WORLD)


@pytest.mark.mpi
def test_each_rank_keeps_its_flow_on_its_own_gpu(tmp_path):
    """On ranks with a GPU each, the flow's operators are assembled on the
    rank's GPU (PETSc's), not on CuPy's default device 0, and its steps
    touch no other rank's GPU (CuPy's warning where an array is elsewhere)."""
    import warnings

    import cupy
    import cupyx.scipy.sparse
    from petsc4py import PETSc

    from meshes import prism_layers_mesh, shared_file
    from petsc_ext.options import option_defaults
    from plugin.flow.boundary import Wall
    from plugin.flow.distribution import distribute
    from plugin.flow.solver import FlowSolver

    comm = PETSc.COMM_WORLD
    if comm.getSize() == 1 or comm.getSize() > cupy.cuda.runtime.getDeviceCount():
        pytest.skip("needs a GPU for each rank")
    path, _ = shared_file(tmp_path, lambda: prism_layers_mesh(n=8), "prisms.msh")
    g = distribute(path, comm.tompi4py(), "metis").geometry
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "The device where the array resides")  # CuPy's PerformanceWarning
        with option_defaults("", {"flow_max_steps": 3, "flow_dt": 0.01}):
            solver = FlowSolver(g, comm, "gpusell", 0.05, {name: Wall() for name in g.boundary_names})
        state = solver.run(solver.initial_state())
    device = PETSc.DeviceContext.getCurrent().getDevice().getDeviceId()
    arrays = [a.data if isinstance(a, cupyx.scipy.sparse.spmatrix) else a for a in vars(solver.operators).values()
              if isinstance(a, (cupy.ndarray, cupyx.scipy.sparse.spmatrix))] + [state.u]
    assert len(arrays) > 1 and {a.device.id for a in arrays} == {device}
    assert comm.tompi4py().allgather(device) == list(range(comm.getSize()))


@pytest.mark.mpi
def test_layerfft_spectra_by_nccl_between_gpus_are_those_by_mpi(tmp_path):
    """On ranks with a GPU each, the spectra's all-to-alls by NCCL give the
    solve of the all-to-alls through host memory (to rounding: the
    hierarchy's set-up sums in no fixed order)."""
    import cupy
    from petsc4py import PETSc

    from gpu_mats.extruded import ExtrudedSolver
    from meshes import prism_layers_mesh, shared_file
    from petsc_ext.device import use_petsc_device_and_stream
    from plugin.flow.distribution import distribute
    from plugin.flow.extrusion import layer_order
    from plugin.flow.operators import compact_laplacian

    comm = PETSc.COMM_WORLD.tompi4py()
    if comm.Get_size() == 1 or comm.Get_size() > cupy.cuda.runtime.getDeviceCount():
        pytest.skip("NCCL between ranks needs a GPU for each rank")
    use_petsc_device_and_stream()  # as a PETSc Mat of CUDA vectors would
    path, _ = shared_file(tmp_path, lambda: prism_layers_mesh(n=16), "prisms.msh")
    g = distribute(path, comm, "columns", (("zmin", "zmax"),)).geometry
    A = (-compact_laplacian(g)).tocsr()
    b = cupy.asarray(numpy.random.default_rng(comm.Get_rank()).standard_normal(g.num_cells))
    b -= comm.allreduce(float(b.sum())) / comm.allreduce(g.num_cells)
    solutions = {}
    for transport in ("nccl", "mpi"):
        solver = ExtrudedSolver(A, layer_order(g.centroids), "multigrid", cupy, 1e-11, comm=comm, transport=transport)
        assert (solver.spectrum.nccl is not None) == (transport == "nccl")
        x = cupy.full(g.num_cells, cupy.nan)
        solver.solve(b, x)
        solutions[transport] = x.get()
    numpy.testing.assert_allclose(solutions["nccl"], solutions["mpi"], rtol=0,
                                  atol=1e-12 * abs(solutions["mpi"]).max())


@pytest.mark.parametrize("shifted", [True, False], ids=["L + mu C", "L alone"])
def test_cuda_shifted_block_kernels_match_numpy(shifted):
    """The shifted family's block product, fused Chebyshev step and coarse
    solve against their NumPy twins, on a random pattern with empty rows."""
    import cupy
    import scipy.sparse

    from gpu_mats.kernels import family

    rng = numpy.random.default_rng(8)
    rows, columns, members, parts = 300, 260, 5, 2
    M = scipy.sparse.random(rows, columns, density=0.03, format="csr", random_state=3)
    M.sort_indices()
    arrays = [M.indptr.astype(numpy.int64), M.indices.astype(numpy.int32), rng.standard_normal(M.nnz),
              rng.standard_normal(M.nnz) if shifted else None]
    shifts = rng.uniform(0.0, 4.0, members)
    X = rng.standard_normal((columns, members, parts))
    Z = rng.standard_normal((rows, members, parts))
    results = []
    for xp in (numpy, cupy):
        kernels = family("shifted", xp)
        on = [None if a is None else xp.asarray(a) for a in arrays]
        Y = xp.full((rows, members, parts), xp.nan)
        kernels.block_product(*on, xp.asarray(shifts), parts, xp.asarray(X), Y, xp.asarray(Z), -0.5, 2.0)
        results.append(Y if xp is numpy else Y.get())
    numpy.testing.assert_allclose(results[1], results[0], rtol=1e-13, atol=1e-13)
    if not shifted:
        return
    S = scipy.sparse.random(rows, rows, density=0.03, format="csr", random_state=4)
    S.sort_indices()
    arrays = [S.indptr.astype(numpy.int64), S.indices.astype(numpy.int32), rng.standard_normal(S.nnz),
              rng.standard_normal(S.nnz)]
    D, R, X0 = (rng.standard_normal((rows, members, parts)) for _ in range(3))
    scaling = rng.uniform(0.5, 1.0, (rows, members, parts))
    inverse = rng.standard_normal((members, rows, rows))
    results = []
    for xp in (numpy, cupy):
        kernels = family("shifted", xp)
        on = [xp.asarray(a) for a in arrays]
        d_next, r, x, coarse = xp.empty(D.shape), xp.array(R), xp.array(X0), xp.empty(D.shape)  # copies: written
        kernels.chebyshev_step(*on, xp.asarray(shifts), parts, xp.asarray(D), d_next, r, r, xp.asarray(scaling), x,
                               0.7, 1.3)
        kernels.coarse_solve(xp.asarray(inverse), xp.asarray(R), coarse)
        results.append([a if xp is numpy else a.get() for a in (d_next, r, x, coarse)])
    for got, expected in zip(results[1], results[0]):
        numpy.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    rz, dq = rng.uniform(0.5, 2.0, members * parts), rng.uniform(-0.5, 2.0, members * parts)  # some dq <= 0
    rz[3] = 0.0
    results = []
    for xp in (numpy, cupy):
        kernels = family("shifted", xp)
        x, r, d = (xp.array(a) for a in (X0, R, D))  # copies: written
        dots = xp.full(members * parts, 0.25)  # added to
        kernels.column_dots(x, r, dots)
        kernels.cg_update(x, r, d, xp.asarray(scaling), xp.asarray(rz), xp.asarray(dq))
        kernels.cg_direction(d, r, xp.asarray(dq), xp.asarray(rz))
        results.append([a if xp is numpy else a.get() for a in (dots, x, r, d)])
    for got, expected in zip(results[1], results[0]):
        numpy.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape, periodic", [((7, 5, 4), (True, True, True)), ((7, 5, 4), (True, False, True)),
                                             ((6, 5, 3), (False, False, False)), ((5, 3, 37), (True, True, False)),
                                             ((7, 5, 1), (False, True, False)), ((6, 6, 1), (True, True, False))],
                         ids=["periodic", "walls along y", "walls", "walls along z, long columns", "2D walls along x",
                              "2D periodic"])
def test_cuda_box_stencils_match_numpy(shape, periodic, monkeypatch):
    """The box family's kernels against their NumPy twins on random vectors, with and without z; the CFL
    number's largest rate with each column of cells along z that the family compiles."""
    import cupy

    from gpu_mats.box_faces import BoxGrid
    from gpu_mats.kernels import family

    grid = BoxGrid(shape, periodic, 2 if shape[2] == 1 else 3)
    host, cuda = family("box", numpy), family("box", cupy)
    rng = numpy.random.default_rng(11)
    n, faces, dim = grid.cells, grid.faces, grid.dim
    cells, face_values, velocity = rng.standard_normal(n), rng.standard_normal(faces), rng.standard_normal((dim, n))
    constants = tuple(rng.uniform(0.5, 2.0, dim))
    calls = {  # name -> (arguments before the output, output shape, arguments after, z's shape)
        "interpolate": ((velocity,), (faces,), (), None),
        "face_gradient": ((cells,), (faces,), (constants,), (faces,)),
        "face_sum": ((face_values,), (n,), (constants,), (n,)),
        "cell_gradient": ((cells,), (dim, n), (constants,), None),
        "convection": ((face_values, velocity), (dim, n), (constants,), None),
        "diffusion": ((velocity,), (dim, n), (constants,), (dim, n)),
        "transport": ((face_values, velocity, velocity[::-1].copy()), (dim, n), (constants, constants[::-1]), None),
    }
    for name, (before, shape_out, after, z_shape) in calls.items():
        for z in [None] + ([rng.standard_normal(z_shape)] if z_shape else []):
            extra = {} if z is None else {"z": z}
            expected = numpy.full(shape_out, numpy.nan)
            getattr(host, name)(grid, *before, expected, *after, **extra)
            got = cupy.full(shape_out, cupy.nan)
            getattr(cuda, name)(grid, *(cupy.asarray(a) for a in before), got, *after,
                                **{k: cupy.asarray(v) for k, v in extra.items()})
            numpy.testing.assert_allclose(got.get(), expected, rtol=0, atol=1e-14 * abs(expected).max(),
                                          err_msg=f"{name}, z {z is not None}")
    expected, got = numpy.empty(n), cupy.empty(n)
    host.face_sum(grid, face_values, expected, constants, speeds=True)
    cuda.face_sum(grid, cupy.asarray(face_values), got, constants, speeds=True)
    numpy.testing.assert_allclose(got.get(), expected, rtol=0, atol=1e-14 * abs(expected).max())
    # each cell in turn the largest rate (its faces a thousand times the others), so that every cell's sum is
    # checked, at each place in a column
    ones, spiked = (1.0,) * dim, []
    for cell in range(n):
        touched = numpy.zeros(faces)
        host.interpolate(grid, numpy.eye(1, n, cell).repeat(dim, axis=0), touched)  # nonzero on the cell's faces
        spiked.append(numpy.where(touched != 0.0, 1000.0, 1.0) * abs(face_values))
    for planes in cuda.PLANES_CHOICES:
        monkeypatch.setattr(cuda, "PLANES", planes)
        for values in (face_values, numpy.where(numpy.arange(faces) == 3, numpy.nan, face_values)):  # a blow-up seen
            expected, got = numpy.empty(1), cupy.full(1, 5.0)
            host.largest_rate(grid, values, expected, constants)
            cuda.largest_rate(grid, cupy.asarray(values), got, constants)
            numpy.testing.assert_allclose(got.get(), expected, rtol=1e-14, equal_nan=True, err_msg=f"{planes} planes")
        for cell, values in enumerate(spiked):
            expected, got = numpy.empty(1), cupy.full(1, 5.0)
            host.largest_rate(grid, values, expected, ones)
            cuda.largest_rate(grid, cupy.asarray(values), got, ones)
            numpy.testing.assert_allclose(got.get(), expected, rtol=1e-14, err_msg=f"cell {cell}, {planes} planes")


@pytest.mark.parametrize("name", ["periodic 3D", "walls 3D", "walls 2D"])
def test_the_flow_with_box_stencils_on_the_gpu_is_the_flow_with_matrices(name):
    """The box's stencils in CUDA in the flow (its steps CUDA graphs) give the SELL matrices' fields."""
    from test_box_stencils import flows_agree

    flows_agree(name, {"gpu_backend": "cupy", "flow_max_steps": 8})
