"""Preconditioned conjugate gradients (Hestenes and Stiefel, "Methods of
conjugate gradients for solving linear systems", J. Res. NBS 49, 1952) with
its scalars in device memory: the dot products end in a small array that
the next kernels read, so that a block of iterations is queued without a
host round trip and a CUDA graph can replay it (gpu_mats.device_cg).

The scalar array ``s`` holds rz (r . z of the current residual), alpha,
beta, a flag, the row of ``history`` the last residual went to, and what
the device-side convergence test of a loop keeps (slots below); each dot
product is summed in two fixed passes (per block of the grid, then over the
blocks), so that a replay gives the same bits as the first run. The
single_ steps are Chronopoulos and Gear's iteration, whose two dot products
are taken in one sum.
"""

RZ, ALPHA, BETA, FLAG, ROW, GO, TARGET, DIVERGENCE, REFERENCE = range(9)  # slots of the scalar array
SLOTS = 9
INDEFINITE_OPERATOR, INDEFINITE_PRECONDITIONER = 1.0, 2.0  # FLAG values; 0 while CG can go on
START, AFTER_ITERATION, RESUME = range(3)  # loop_test's modes


def partial_count(n):
    """The partial sums ``partial_dots`` leaves per dot product for vectors of length n."""


def partial_dots(partials, x0, y0, x1=None, y1=None, x2=None, y2=None):
    """partials (3, partial_count(n)): row k the partial sums of x_k . y_k
    (pairs left None give zeros), in a fixed order."""


def sum_partials(sums, partials):
    """sums (3,) = each row of partials summed, in a fixed order."""


def alpha_step(s, sums, dots=None):
    """alpha = rz / (p . A p), p . A p in sums[0]; alpha = 0 where rz is 0
    (converged), and 0 with FLAG INDEFINITE_OPERATOR where p . A p is not
    positive. ``dots``, (partials, arrivals, p, w) with w = A p: sums[0] =
    p . w first (partial_dots, sum_partials: the same bits), in the same
    launch (one rank, where no reduction comes between; ``arrivals``, one
    uint32 at 0, counts the blocks done and is left at 0)."""


def beta_step(s, sums, history, start, dots=None, test=None):
    """From sums = (r . z, r . r, z . z) of the new residual: ROW = 0 at the
    start, else ROW + 1, and history[ROW] = sums; beta = (r . z) / rz (0 at
    the start, or where rz is 0) and rz = r . z; FLAG
    INDEFINITE_PRECONDITIONER where r . z is negative or not a number.
    ``dots``, (partials, arrivals, r, z): sums = (r . z, r . r, z . z)
    first, as alpha_step's. ``test``, (column, rtol, atol, dtol, limit,
    handle): then loop_test's AFTER_ITERATION (not with ``start``), with
    ``dots`` in the same launch."""


def record_step(s, sums, history, start, dots=None, test=None):
    """The residual's record where the unpreconditioned norm is tested before
    the preconditioner is applied (DeviceCG's ``unpreconditioned`` solves):
    from sums[0] = r . r: ROW = 0 at the start, else ROW + 1, and
    history[ROW] = (0, r . r, 0). ``dots``, (partials, arrivals, r): sums[0]
    = r . r first, as alpha_step's. ``test``, (column, rtol, atol, dtol,
    limit, handle): then loop_test's AFTER_ITERATION (not with ``start``),
    with ``dots`` in the same launch."""


def direction_step(s, sums, dots=None):
    """The beta step of those solves, after the preconditioner: from sums[0]
    = r . z, beta = (r . z) / rz (0 where rz is 0: a solve's first
    direction) and rz = r . z; FLAG INDEFINITE_PRECONDITIONER where r . z is
    negative or not a number. ``dots``, (partials, arrivals, r, z): sums[0]
    = r . z first, as alpha_step's; z float64 or float32."""


def remove_mean(v, sums, total=None):
    """v -= sums[0] / total (default len(v)): with sums[0] the sum of v, the
    projection of v onto the vectors of zero mean (the range of a Laplacian
    whose null space is the constants); on several ranks sums[0] and
    ``total`` are the sum and length over all of them."""


def loop_test(s, history, column, rtol, atol, dtol, limit, mode, handle):
    """Whether a loop of iterations goes on, into GO (1 or 0) and, where
    ``handle`` is not 0 (a CUDA graph's conditional handle; the host twin
    takes 0 only), into the handle. Mode START: TARGET = max(rtol ref,
    atol) and DIVERGENCE = dtol ref first, ref the square root of REFERENCE
    where it is positive (the right-hand side's norm, which PETSc's test
    takes for a nonzero guess), else history[0]'s norm (a norm the square
    root of its ``column``); START and AFTER_ITERATION: go
    on while FLAG is 0, history[ROW] is finite, its norm is above TARGET and
    below DIVERGENCE, and ROW is below ``limit``; RESUME (a loop after one
    that stopped at its limit): go on while FLAG is 0. PETSc's default test
    (KSPConvergedDefault) in device memory: the host still judges each
    norm the loop leaves."""


def update_iterate(s, x, r, p, w):
    """x += alpha p and r -= alpha w (w = A p), in one pass."""


def update_record_step(s, sums, history, x, r, p, w, partials, arrivals, test=None, rounded=None, z=None, az=None):
    """update_iterate (single_update where ``z`` and ``az`` are given), then
    record_step of the new r with its dot product (``partials``,
    ``arrivals`` as alpha_step's) and ``test``, in one launch that reads r
    once: the end of an iteration on the unpreconditioned norm, on one rank.
    The same bits as the two. ``rounded``, a float32 array: r also stored
    there (the right-hand side of a preconditioner that works in float32:
    DeviceCG's hand-off)."""


def single_step(s, sums, dots=None):
    """Chronopoulos and Gear's scalar step (D'Azevedo, Eijkhout and Romine,
    "Conjugate gradient algorithms with reduced synchronization overhead on
    distributed memory multiprocessors", 1993, method 1), its one sum of
    sums = (r . z, z . A z) after z = M^-1 r and A z: beta = (r . z) / rz
    (0 where rz is 0: a solve's first direction), rz = r . z, alpha = rz /
    (z . A z - beta rz / alpha), the last alpha's p . A p recurrence; alpha
    = 0 where rz is 0, or negative or not a number (FLAG
    INDEFINITE_PRECONDITIONER), or where p . A p is not positive (FLAG
    INDEFINITE_OPERATOR). ``dots``, (partials, arrivals, r, z, az): sums =
    (r . z, az . z) first, as alpha_step's."""


def single_update(s, x, r, p, w, z, az):
    """The iteration's vectors after single_step, in one pass: p = z + beta
    p, w = az + beta w (w = A p by the recurrence; neither read where beta
    is 0), x += alpha p, r -= alpha w."""


def update_direction(s, p, z):
    """p = z + beta p (p = z where beta is 0: p is not read); z float64 or float32."""


def clear_unless_converged(flag, records, column):
    """flag[0] = 0 unless every store in ``records`` (count, store length:
    DeviceCG.store of solves that ended in a loop, one a row) converged by
    that loop's own test in norm ``column``: FLAG 0, its last row finite and
    that row's norm at most TARGET (the verdict the host's judge would give
    CONVERGED_*). Left as it is otherwise, so that several calls clear one
    flag: a loop of time steps that goes on only while each step's solves
    converged."""
