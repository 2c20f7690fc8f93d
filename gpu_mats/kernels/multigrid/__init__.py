"""The vector kernels of the multigrid cycle (gpu_mats.amg): the fused steps
of Chebyshev-Jacobi smoothing, the dense coarsest solve and the K-cycle's
inner products and updates, the first three also on float32 vectors (a
float32 cycle)."""

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
