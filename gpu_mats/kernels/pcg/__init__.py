"""Preconditioned conjugate gradients (Hestenes and Stiefel, "Methods of
conjugate gradients for solving linear systems", J. Res. NBS 49, 1952) with
its scalars in device memory: the dot products end in a small array that
the next kernels read, so that a block of iterations is queued without a
host round trip and a CUDA graph can replay it (gpu_mats.device_cg).

The scalar array ``s`` holds rz (r . z of the current residual), alpha,
beta and a flag (slots below); each dot product is summed in two fixed
passes (per block of the grid, then over the blocks), so that a replay
gives the same bits as the first run.
"""

RZ, ALPHA, BETA, FLAG = range(4)  # slots of the scalar array
SLOTS = 4
INDEFINITE_OPERATOR, INDEFINITE_PRECONDITIONER = 1.0, 2.0  # FLAG values; 0 while CG can go on


def partial_count(n):
    """The partial sums ``partial_dots`` leaves per dot product for vectors of length n."""


def partial_dots(partials, x0, y0, x1=None, y1=None, x2=None, y2=None):
    """partials (3, partial_count(n)): row k the partial sums of x_k . y_k
    (pairs left None give zeros), in a fixed order."""


def sum_partials(sums, partials):
    """sums (3,) = each row of partials summed, in a fixed order."""


def alpha_step(s, sums):
    """alpha = rz / (p . A p), p . A p in sums[0]; alpha = 0 where rz is 0
    (converged), and 0 with FLAG INDEFINITE_OPERATOR where p . A p is not
    positive."""


def beta_step(s, sums, history, row, start):
    """From sums = (r . z, r . r, z . z) of the new residual: history[row] =
    sums; beta = (r . z) / rz (0 at the start, or where rz is 0) and rz = r . z;
    FLAG INDEFINITE_PRECONDITIONER where r . z is negative or not a number."""


def update_iterate(s, x, r, p, w):
    """x += alpha p and r -= alpha w (w = A p), in one pass."""


def update_direction(s, p, z):
    """p = z + beta p (p = z where beta is 0: p is not read)."""
