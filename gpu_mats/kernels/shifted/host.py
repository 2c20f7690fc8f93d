"""Block products of the shifted family on the host: the NumPy twins of
``shifted.cu`` (scipy's CSR products, in float64)."""

import numpy
import scipy.sparse


def _product(indptr, indices, l_data, c_data, shifts, parts, X, rows):
    """(L + mu C) X as a (rows, m) array."""
    flat = X.reshape(X.shape[0], -1)
    shape = (rows, flat.shape[0])
    out = scipy.sparse.csr_matrix((l_data, indices, indptr), shape=shape) @ flat
    if c_data is not None:
        out += numpy.repeat(shifts, parts)[None, :] * (scipy.sparse.csr_matrix((c_data, indices, indptr),
                                                                              shape=shape) @ flat)
    return out


def block_product(indptr, indices, l_data, c_data, shifts, parts, X, Y, Z=None, alpha=1.0, beta=0.0):
    """Twin of shifted.cu's block_product."""
    Z = Y if Z is None else Z
    out = alpha * _product(indptr, indices, l_data, c_data, shifts, parts, X, Y.shape[0])
    if beta != 0.0:
        out += beta * Z.reshape(out.shape)
    Y.reshape(out.shape)[...] = out


def chebyshev_step(indptr, indices, l_data, c_data, shifts, parts, D, D_next, R, Z, scaling, X, a, c):
    """Twin of shifted.cu's block_chebyshev."""
    residual = Z - _product(indptr, indices, l_data, c_data, shifts, parts, D, R.shape[0]).reshape(R.shape)
    step = a * D + c * scaling * residual
    R[...] = residual
    D_next[...] = step
    X += step


def coarse_solve(inverse, B, X):
    """Twin of shifted.cu's coarse_solve."""
    X[...] = numpy.einsum("kij,jkp->ikp", inverse, B)


def _flat(U):
    return U.reshape(U.shape[0], -1)


def column_dots(U, V, out):
    """Twin of shifted.cu's column_dots."""
    out += numpy.einsum("ij,ij->j", _flat(U), _flat(V))


def _ratio(top, bottom):
    """top / bottom per column, 0 where bottom <= 0."""
    return numpy.where(bottom > 0, top / numpy.where(bottom > 0, bottom, 1.0), 0.0)


def cg_update(X, R, D, Q, rz, dq):
    """Twin of shifted.cu's cg_update."""
    alpha = _ratio(rz, dq)
    _flat(X)[...] += alpha * _flat(D)
    _flat(R)[...] -= alpha * _flat(Q)


def cg_direction(D, Z, rz_next, rz):
    """Twin of shifted.cu's cg_direction."""
    _flat(D)[...] = _flat(Z) + _ratio(rz_next, rz) * _flat(D)
