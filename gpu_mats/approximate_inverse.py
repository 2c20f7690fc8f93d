"""Sparse approximate inverses, set up and applied where the matrix lives.

* ``FactoredInverse`` (FSAI; Chow & Saad 1997; Oyarzún 2015, section 1.6): A^-1 ~ G^T G
  with G lower triangular on the lower pattern of A^k (A with small entries
  dropped first). Row i of G solves A[P_i, P_i] g = e_i on its pattern P_i and
  is scaled by 1/sqrt(g_ii), so that diag(G A G^T) = 1. For SPD matrices.
* ``SparseApproximateInverse`` (SPAI): M minimising ||I - A M||_F column by
  column on the pattern of A^k. Column j solves the least-squares problem
  min ||e_j - A[:, J] m|| through its normal equations (A^T A)[J, J] m = A[j, J]^T,
  which are small SPD systems like FSAI's. For nonsymmetric matrices.
* ``ChebyshevPolynomial``: z = p(D^-1 A) D^-1 r, the Chebyshev polynomial of
  degree d for the Jacobi-scaled operator on [lambda_min, lambda_max]; the
  interval comes from a few Lanczos steps, which give both ends of the
  spectrum from the same SpMVs (a power method gives only the top).

Patterns are worked out with scipy.sparse or cupyx.scipy.sparse (one API), the
small dense solves by ``solve_local_systems``, the products by SELL SpMVs.
Errors name rows by their index plus ``row_offset`` (the rank's first row).
"""

import math

import numpy

from .backend import array_module, hashed_bits, sparse_module
from .local_solves import LocalSystemError, solve_local_systems
from .ops import diagonal, spmv
from .sell import SellMatrix, entry_rows


def _csr_matrix(A):
    """A SellMatrix as a scipy/cupyx CSR matrix (float64, sorted columns)."""
    indptr, indices, data = A.to_csr()
    matrix = sparse_module(A.xp).csr_matrix((data.astype(numpy.float64), indices, indptr), shape=A.shape)
    matrix.sort_indices()
    return matrix


def _pattern(matrix, levels, drop):
    """Pattern (values 1) of A~^levels, A~ = A without entries below drop * sqrt(|a_ii a_jj|)."""
    xp = array_module(matrix.data)
    if drop > 0:
        coo = matrix.tocoo()
        diag = abs(matrix.diagonal())
        keep = (coo.row == coo.col) | (abs(coo.data) >= drop * (diag[coo.row] * diag[coo.col]) ** 0.5)
        base = sparse_module(xp).csr_matrix((xp.ones(int(keep.sum())), (coo.row[keep], coo.col[keep])),
                                            shape=matrix.shape)
    else:
        base = sparse_module(xp).csr_matrix((xp.ones(matrix.nnz), matrix.indices, matrix.indptr), shape=matrix.shape)
    power = base
    for _ in range(levels - 1):
        power = power @ base
    power.data[:] = 1.0
    power.sort_indices()
    return power


class FactoredInverse:
    """FSAI: z = G^T (G r), G and G^T stored in SELL."""

    def __init__(self, A: SellMatrix, levels=1, drop=0.0, value_dtype=numpy.float64, row_offset=0):
        xp = A.xp
        matrix = _csr_matrix(A)
        _check_positive_diagonal(matrix.diagonal(), "fsai", row_offset)
        _check_symmetric(matrix, row_offset)
        pattern = sparse_module(xp).tril(_pattern(matrix, levels, drop)).tocsr()
        pattern.sort_indices()
        rhs = xp.zeros(pattern.nnz)
        rhs[pattern.indptr[1:] - 1] = 1.0  # the diagonal is last in each lower-triangular row
        g = _local_solves(matrix, pattern, rhs, lambda task, pivot: (
            f"fsai: the local system of row {task + row_offset} is not positive definite (pivot {pivot}); "
            f"is the matrix SPD?"))
        scale = 1.0 / xp.sqrt(g[pattern.indptr[1:] - 1])
        g *= scale[entry_rows(xp, pattern.indptr)]
        self.G = SellMatrix.from_csr(pattern.indptr, pattern.indices, g, A.shape, slice_height=A.slice_height,
                                     value_dtype=value_dtype, xp=xp)
        self.GT = self.G.transpose()
        self._work = xp.empty(A.shape[0])

    @property
    def nnz(self):
        return self.G.nnz

    def apply(self, r, z):
        spmv(self.G, r, self._work)
        spmv(self.GT, self._work, z)

    apply_transpose = apply  # G^T G is symmetric


class SparseApproximateInverse:
    """SPAI: z = M r, M stored in SELL."""

    def __init__(self, A: SellMatrix, levels=1, drop=0.0, value_dtype=numpy.float64, row_offset=0):
        xp = A.xp
        matrix = _csr_matrix(A)
        columns = _pattern(matrix, levels, drop).T.tocsr()  # row j: the pattern J of column j of M
        columns.sort_indices()
        normal = (matrix.T @ matrix).tocsr()
        normal.sort_indices()
        # rhs of column j at q: A[j, J_q], looked up by (row, column) keys in A
        width = A.shape[1]
        a_keys = entry_rows(xp, matrix.indptr) * width + matrix.indices
        keys = entry_rows(xp, columns.indptr) * width + columns.indices
        at = xp.minimum(xp.searchsorted(a_keys, keys), a_keys.size - 1)
        rhs = xp.where(a_keys[at] == keys, matrix.data[at], 0.0)
        m = _local_solves(normal, columns, rhs, lambda task, pivot: (
            f"spai: column {task + row_offset} of A has linearly dependent columns around it "
            f"(pivot {pivot} of its least-squares problem)"))
        M_t = sparse_module(xp).csr_matrix((m, columns.indices, columns.indptr), shape=A.shape)
        M = M_t.T.tocsr()
        M.sort_indices()
        self.M = SellMatrix.from_csr(M.indptr, M.indices, M.data, A.shape, slice_height=A.slice_height,
                                     value_dtype=value_dtype, xp=xp)
        self._MT = None

    @property
    def nnz(self):
        return self.M.nnz

    def apply(self, r, z):
        spmv(self.M, r, z)

    def apply_transpose(self, r, z):
        if self._MT is None:
            self._MT = self.M.transpose()
        spmv(self._MT, r, z)


class ChebyshevPolynomial:
    """z = p(D^-1 A) D^-1 r by ``degree`` steps of the Chebyshev iteration from z = 0."""

    def __init__(self, A: SellMatrix, degree=4, lanczos_steps=20, safety=1.05, row_offset=0, seed=0):
        xp = A.xp
        d = diagonal(A)
        _check_positive_diagonal(d, "chebyshev", row_offset)
        self.degree = degree
        self.inv_diag = 1.0 / d
        indptr, indices, data = A.to_csr()
        scaled = data.astype(numpy.float64) * self.inv_diag[entry_rows(xp, indptr)]
        self.A = SellMatrix.from_csr(indptr, indices, scaled, A.shape, slice_height=A.slice_height,
                                     value_dtype=A.value_dtype, xp=xp)  # D^-1 A
        low, high = lanczos_extremes(A, self.inv_diag, lanczos_steps, seed)
        self.interval = (low, safety * high)
        self._r, self._d = xp.empty(A.shape[0]), xp.empty(A.shape[0])

    def apply(self, b, z):
        if z.size == 0:
            return
        low, high = self.interval
        theta, delta = (high + low) / 2, (high - low) / 2
        sigma = theta / delta
        rho = 1.0 / sigma
        r, d = self._r, self._d
        r[...] = b * self.inv_diag
        d[...] = r / theta
        z[...] = d
        for _ in range(self.degree):
            spmv(self.A, d, r, alpha=-1.0, beta=1.0)  # r -= D^-1 A d
            rho_next = 1.0 / (2.0 * sigma - rho)
            d *= rho_next * rho
            d += (2.0 * rho_next / delta) * r
            z += d
            rho = rho_next

    def apply_transpose(self, b, z):
        raise NotImplementedError("the transpose of ainv chebyshev is not available (its polynomial is in D^-1 A)")


def lanczos_extremes(A: SellMatrix, inv_diag, steps, seed=0, *, product=None, comm=None):
    """Extreme Ritz values of D^-1 A after ``steps`` Lanczos steps on D^-1/2 A D^-1/2.

    The SpMVs and vector updates run where A lives; only the small tridiagonal
    matrix is solved on the host. ``product(x, y)``, y = A x, replaces the
    SpMV with A where a rank's rows reach other ranks' columns; ``comm``
    (mpi4py) sums the inner products over the ranks the vectors are split over.
    """
    xp = A.xp
    n = A.shape[0]
    if n == 0 and comm is None:  # no spectrum: neutral in a min / max over ranks
        return float("inf"), float("-inf")
    product = product or (lambda x, y: spmv(A, x, y))

    def dot(a, b):
        local = float(a @ b) if n else 0.0
        return comm.allreduce(local) if comm is not None else local

    scale = xp.sqrt(inv_diag)
    v = (hashed_bits(xp, n, seed) >> xp.uint64(11)).astype(xp.float64) / 2.0**53 - 0.5  # uniform in [-0.5, 0.5)
    v /= math.sqrt(dot(v, v))
    v_prev, w = xp.zeros(n), xp.empty(n)
    alphas, betas, beta = [], [], 0.0
    for _ in range(min(steps, n if comm is None else steps)):
        product(v * scale, w)
        w *= scale
        w -= beta * v_prev
        alpha = dot(w, v)
        w -= alpha * v
        beta = math.sqrt(dot(w, w))
        alphas.append(alpha)
        if beta <= 1e-12 * abs(alpha):
            break
        betas.append(beta)
        v_prev, v = v, w / beta
    k = len(alphas)
    T = numpy.diag(alphas) + numpy.diag(betas[: k - 1], 1) + numpy.diag(betas[: k - 1], -1)
    ritz = numpy.linalg.eigvalsh(T)
    return float(ritz[0]), float(ritz[-1])


def _local_solves(B, pattern, rhs, describe):
    """solve_local_systems on scipy/cupyx matrices; a failure is a ValueError worded by describe(task, pivot)."""
    try:
        return solve_local_systems((B.indptr, B.indices, B.data), (pattern.indptr, pattern.indices), rhs, array_module(B.data))
    except LocalSystemError as exc:
        raise ValueError(describe(exc.task, exc.pivot)) from None


def _check_positive_diagonal(diag, name, row_offset):
    bad = (~(diag > 0)).nonzero()[0]
    if bad.size:
        row = int(bad[0])
        raise ValueError(f"{name} needs a positive diagonal: row {row + row_offset} has "
                         f"A[{row + row_offset}, {row + row_offset}] = {float(diag[row]):g}")


def _check_symmetric(matrix, row_offset, rtol=1e-12):
    xp = array_module(matrix.data)
    difference = (matrix - matrix.T).tocoo()
    if difference.nnz == 0:
        return
    worst = int(xp.argmax(abs(difference.data)))
    if abs(float(difference.data[worst])) <= rtol * float(abs(matrix.data).max()):
        return
    i, j = int(difference.row[worst]), int(difference.col[worst])
    raise ValueError(f"fsai needs a symmetric matrix: A[{i + row_offset}, {j + row_offset}] = {_entry(matrix, i, j):g} "
                     f"but A[{j + row_offset}, {i + row_offset}] = {_entry(matrix, j, i):g}; use -pc_ainv_type spai")


def _entry(matrix, i, j):
    start, end = int(matrix.indptr[i]), int(matrix.indptr[i + 1])
    hits = (matrix.indices[start:end] == j).nonzero()[0]
    return float(matrix.data[start + int(hits[0])]) if hits.size else 0.0
