"""Block products of the shifted family on the GPU (``shifted.cu``)."""

import functools
import pathlib

import cupy
import numpy

BLOCK = 256


@functools.cache
def _module():
    source = pathlib.Path(__file__).with_name("shifted.cu").read_text()
    names = ["block_product<true>", "block_product<false>", "block_chebyshev", "coarse_solve", "column_dots",
             "cg_update", "cg_direction"]
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=names)


def _launch(name, entries, *args):
    if entries:
        _module().get_function(name)((-(-entries // BLOCK),), (BLOCK,), args)


def _sizes(Y, parts):
    rows, m = Y.shape[0], Y.size // max(Y.shape[0], 1)
    return numpy.int64(rows), numpy.int32(m), numpy.int32(parts)


def block_product(indptr, indices, l_data, c_data, shifts, parts, X, Y, Z=None, alpha=1.0, beta=0.0):
    """Y = alpha (L + mu C) X + beta Z (shifted.cu's block_product)."""
    shifted = c_data is not None
    _launch(f"block_product<{'true' if shifted else 'false'}>", Y.size, *_sizes(Y, parts), indptr, indices, l_data,
            c_data if shifted else l_data, shifts, X, Y, Y if Z is None else Z, numpy.float64(alpha),
            numpy.float64(beta))


def chebyshev_step(indptr, indices, l_data, c_data, shifts, parts, D, D_next, R, Z, scaling, X, a, c):
    """R = Z - (L + mu C) D; D_next = a D + c scaling R; X += D_next (shifted.cu's block_chebyshev)."""
    _launch("block_chebyshev", R.size, *_sizes(R, parts), indptr, indices, l_data, c_data, shifts, D, D_next, R, Z,
            scaling, X, numpy.float64(a), numpy.float64(c))


def coarse_solve(inverse, B, X):
    """X[i, k, p] = sum_j inverse[k, i, j] B[j, k, p] (shifted.cu's coarse_solve)."""
    n, members, parts = B.shape
    _launch("coarse_solve", X.size, numpy.int64(n), numpy.int32(members), numpy.int32(parts), inverse, B, X)


def _columns(U):
    return U.size // max(U.shape[0], 1)


def column_dots(U, V, out):
    """out[j] += sum_i U[i, j] V[i, j] (shifted.cu's column_dots: atomics)."""
    rows, m = U.shape[0], _columns(U)
    if U.size:
        threads = min(rows, 2048) * m
        _module().get_function("column_dots")((-(-threads // BLOCK),), (BLOCK,), (numpy.int64(rows), numpy.int32(m),
                                                                                 U, V, out))


def cg_update(X, R, D, Q, rz, dq):
    """X += alpha D; R -= alpha Q, alpha = rz / dq per column (shifted.cu's cg_update)."""
    _launch("cg_update", X.size, numpy.int64(X.size), numpy.int32(_columns(X)), X, R, D, Q, rz, dq)


def cg_direction(D, Z, rz_next, rz):
    """D = Z + (rz_next / rz) D per column (shifted.cu's cg_direction)."""
    _launch("cg_direction", D.size, numpy.int64(D.size), numpy.int32(_columns(D)), D, Z, rz_next, rz)
