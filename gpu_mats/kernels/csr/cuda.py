"""CSR products on the GPU, several threads of a warp per row (``csr.cu``):
no library call, so a CUDA graph can capture them."""

import functools
import pathlib

import cupy
import numpy

_TYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}  # values' and vectors'
BLOCK = 256
LANES = (4, 8, 16, 32)  # threads per row compiled


def lanes(rows, nnz):
    """Threads per row, from 4 to 32: the fewest that take at most 3 entries
    each, the fastest rule measured on restrictions of 16 to 230 entries a
    row (BENCHMARKS.md)."""
    mean = nnz / max(rows, 1)
    return next((count for count in LANES if 3 * count >= mean), LANES[-1])


@functools.cache
def _module(vector_type):
    """The kernels for one vector type, compiled on first use."""
    source = pathlib.Path(__file__).with_name("csr.cu").read_text()
    names = [f"{kernel}<{value},{vector_type},{count}>"
             for kernel in ("csr_spmv", "csr_chebyshev", "csr_chebyshev_first", "csr_restrict_residual",
                            "csr_residual_correction")
             for value in _TYPES.values() for count in LANES]
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=names)


def _launch(kernel, vectors, indptr, indices, data, rows, *args):
    """``kernel`` for ``data``'s values and vectors of the array ``vectors``' type."""
    if rows:
        count = lanes(rows, data.size)
        vector_type = _TYPES[vectors.dtype]
        function = _module(vector_type).get_function(f"{kernel}<{_TYPES[data.dtype]},{vector_type},{count}>")
        function((-(-rows * count // BLOCK),), (BLOCK,), (numpy.int64(rows), indptr, indices, data, *args))


def spmv(indptr, indices, data, x, y, z=None, alpha=1.0, beta=0.0):
    """y = alpha A x + beta z (csr.cu's csr_spmv)."""
    _launch("csr_spmv", x, indptr, indices, data, y.size, x, y, y if z is None else z, numpy.float64(alpha),
            numpy.float64(beta))


def chebyshev_step(indptr, indices, data, d, d_next, r, z, scaling, x, a, c):
    """r = z - A d; d_next = a d + c scaling r; x += d_next (csr.cu's csr_chebyshev)."""
    _launch("csr_chebyshev", d, indptr, indices, data, r.size, d, d_next, r, z, scaling, x, numpy.float64(a),
            numpy.float64(c))


def chebyshev_first(indptr, indices, data, b, scaling, d_next, r, x, c0, a, c):
    """The first two smoothing steps from x = 0 (csr.cu's csr_chebyshev_first)."""
    _launch("csr_chebyshev_first", b, indptr, indices, data, r.size, b, scaling, d_next, r, x, numpy.float64(c0),
            numpy.float64(a), numpy.float64(c))


def restrict_residual(indptr, indices, r_data, ra_data, b, y, bc):
    """bc = R b - R A y (csr.cu's csr_restrict_residual)."""
    _launch("csr_restrict_residual", b, indptr, indices, r_data, bc.size, ra_data, b, y, bc)


def residual_correction(indptr, indices, p_data, ap_data, a_indptr, a_indices, a_data, xc, b, y, x, r, d, scaling, c):
    """r = b - A y - A P xc; d = c scaling r; x = y + P xc + d (csr.cu's csr_residual_correction)."""
    _launch("csr_residual_correction", xc, indptr, indices, p_data, x.size, ap_data, a_indptr, a_indices, a_data, xc,
            b, y, x, r, d, scaling, numpy.float64(c))
