"""Krylov building blocks: the fused three-term vector update of the s-step
bases (with a Jacobi scaling in the same pass) and the tall-skinny block
products of cacg (gpu_mats.krylov), also the BLAS-1 update of the flow
driver's correction, and the fused step of Chebyshev-Jacobi smoothing
(gpu_mats.amg)."""


def three_term(w, a, x, b, y, c, z, d=None, scaled=None):
    """w = a x + b y + c z (terms with a zero coefficient not read), and
    scaled = d w when d is given; w may alias y or z."""


def ts_gram(X, Y, chunk=1024):
    """X Y^T of tall-skinny blocks (rows of length n), summed over chunks of
    columns (Ali et al. 2019, section IV.C)."""


def gemm_accumulate(C, alpha, A, B):
    """C += alpha A B in place, for row-major blocks with contiguous rows."""


def chebyshev_step(x, d, r, inv_diag, a, b):
    """d = a d + b inv_diag r (d not read when a is 0), then x += d, in one pass."""


def matvec(y, A, x):
    """y = A x for a dense row-major contiguous A (m, n), in place, no temporary
    (the coarsest level of gpu_mats.amg)."""
