"""Products of a sparse matrix with a block of vectors, (n, m) row-major,
column j of which belongs to member j // parts of a family L + mu_k C
(gpu_mats.amg.shifted: the 2D systems of an extruded Poisson problem, one
per wavenumber, their real and imaginary parts side by side): L's and C's
values on one CSR pattern, each entry's a_ik = l_ik + mu_k c_ik. A thread
per entry of the block, the threads of a row reading its entries once for
all columns. c_data None: the plain product (restriction, prolongation)."""


def block_product(indptr, indices, l_data, c_data, shifts, parts, X, Y, Z=None, alpha=1.0, beta=0.0):
    """Y = alpha (L + mu C) X + beta Z for blocks X (columns, m), Y and Z (rows, m), m = len(shifts) * parts,
    column j shifted by shifts[j // parts]; c_data None: Y = alpha L X + beta Z; beta = 0 never reads Z;
    Z defaults to Y."""


def chebyshev_step(indptr, indices, l_data, c_data, shifts, parts, D, D_next, R, Z, scaling, X, a, c):
    """One Chebyshev-Jacobi step fused into the product, on blocks: R = Z - (L + mu C) D;
    D_next = a D + c scaling R; X += D_next (D_next is not D; Z may be R)."""


def coarse_solve(inverse, B, X):
    """X[i, k, p] = sum_j inverse[k, i, j] B[j, k, p]: each member's dense (pseudo-)inverse (K, n, n) applied
    to its columns of the block B (n, K, parts), into X (X is not B)."""


def column_dots(U, V, out):
    """out[j] += sum_i U[i, j] V[i, j] for blocks U, V (n, m) (out zeroed by the caller: on the GPU the sums
    are added by atomics, their order not fixed)."""


def cg_update(X, R, D, Q, rz, dq):
    """The CG step of every column at once: alpha_j = rz_j / dq_j (0 where dq_j <= 0); X += alpha D;
    R -= alpha Q (blocks (n, m), rz and dq (m,))."""


def cg_direction(D, Z, rz_next, rz):
    """The next direction of every column: beta_j = rz_next_j / rz_j (0 where rz_j <= 0); D = Z + beta D."""
