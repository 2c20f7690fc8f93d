"""Krylov building blocks: the fused three-term vector update of the s-step
bases (with a Jacobi scaling in the same pass) and the tall-skinny block
products of cacg (gpu_mats.krylov), also the BLAS-1 update of the flow
driver's correction, and the fused step of Chebyshev-Jacobi smoothing, the
dense coarsest solve and the K-cycle's inner products and updates
(gpu_mats.amg), the last three also on float32 vectors (a float32 cycle)."""


def three_term(w, a, x, b, y, c, z, d=None, scaled=None):
    """w = a x + b y + c z (terms with a zero coefficient not read), and
    scaled = d w when d is given; w may alias y or z."""


def ts_gram(X, Y, chunk=1024):
    """X Y^T of tall-skinny blocks (rows of length n), summed over chunks of
    columns (Ali et al. 2019, section IV.C)."""


def gemm_accumulate(C, alpha, A, B):
    """C += alpha A B in place, for row-major blocks with contiguous rows."""


def chebyshev_start(x, d, r, inv_diag, b):
    """The first smoothing step from x = 0: d = b inv_diag r, then x = d (x not read: no zeroing pass)."""


def chebyshev_step(x, d, r, inv_diag, a, b):
    """d = a d + b inv_diag r (d not read when a is 0), then x += d, in one pass."""


def matvec(y, A, x):
    """y = A x for a dense row-major contiguous A (m, n), in place, no temporary
    (the coarsest level of gpu_mats.amg)."""


def dot_pairs(out, xs, ys):
    """out[k] = xs[k] . ys[k] for up to 3 pairs of vectors, into the array out
    (on the GPU it stays there: no copy to the host)."""


def kcycle_residual(rt, s, b, v1):
    """rt = b - (s[1] / s[0]) v1 (no step where s[0] <= 0): the K-cycle's residual after its first step."""


def kcycle_combine(x, s, c1, c2):
    """x = the K-cycle's correction from its directions c1, c2 and s = (rho1,
    alpha1, gamma, beta, alpha2) = (c1.A c1, c1.b, c2.A c1, c2.A c2, c2.rt)."""
