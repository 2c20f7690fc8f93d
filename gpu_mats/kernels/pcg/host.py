"""CG's vector and scalar steps on the host: NumPy twins of ``pcg.cu``."""

import numpy

from . import (AFTER_ITERATION, ALPHA, BETA, DIVERGENCE, FLAG, GO, INDEFINITE_OPERATOR, INDEFINITE_PRECONDITIONER,
               REFERENCE, RESUME, ROW, RZ, SLOTS, START, TARGET)


def partial_count(n):
    """One partial sum per dot product: NumPy's own dot."""
    return 1


def partial_dots(partials, x0, y0, x1=None, y1=None, x2=None, y2=None):
    partials[...] = 0.0
    for k, (x, y) in enumerate(((x0, y0), (x1, y1), (x2, y2))):
        if x is not None:
            partials[k, 0] = numpy.dot(x, y)


def sum_partials(sums, partials):
    sums[...] = partials.sum(axis=1)


def _summed(sums, partials, *pairs):
    """sums = the dot products of the pairs (x0, y0, x1, y1, ...), as a step's own launch takes them."""
    partial_dots(partials, *pairs)
    sum_partials(sums, partials)


def alpha_step(s, sums, dots=None):
    if dots is not None:
        _summed(sums, dots[0], *dots[2:])
    pap = sums[0]
    if s[RZ] == 0.0:
        s[ALPHA] = 0.0
    elif not pap > 0.0:
        s[ALPHA], s[FLAG] = 0.0, INDEFINITE_OPERATOR
    else:
        s[ALPHA] = s[RZ] / pap


def beta_step(s, sums, history, start, dots=None, test=None):
    if dots is not None:
        r, z = dots[2:]
        _summed(sums, dots[0], r, z, r, r, z, z)
    rz = sums[0]
    _next_row(s, history, sums, start)
    s[BETA] = 0.0 if start or s[RZ] == 0.0 else rz / s[RZ]
    s[RZ] = rz
    if not rz >= 0.0:
        s[FLAG] = INDEFINITE_PRECONDITIONER
    _test_after_iteration(s, history, test)


def record_step(s, sums, history, start, dots=None, test=None):
    if dots is not None:
        _summed(sums, dots[0], dots[2], dots[2])
    _next_row(s, history, (0.0, sums[0], 0.0), start)
    _test_after_iteration(s, history, test)


def _next_row(s, history, row, start):
    """history's next row (the first at the start) = ``row``."""
    s[ROW] = 0.0 if start else s[ROW] + 1.0
    history[int(s[ROW])] = row


def _test_after_iteration(s, history, test):
    """loop_test's AFTER_ITERATION where ``test`` (column, rtol, atol, dtol, limit, handle) is given."""
    if test is not None:
        column, rtol, atol, dtol, limit, handle = test
        loop_test(s, history, column, rtol, atol, dtol, limit, AFTER_ITERATION, handle)


def direction_step(s, sums, dots=None):
    if dots is not None:
        _summed(sums, dots[0], *dots[2:])
    rz = sums[0]
    s[BETA] = 0.0 if s[RZ] == 0.0 else rz / s[RZ]
    s[RZ] = rz
    if not rz >= 0.0:
        s[FLAG] = INDEFINITE_PRECONDITIONER


def update_iterate(s, x, r, p, w):
    x += s[ALPHA] * p
    r -= s[ALPHA] * w


def update_record_step(s, sums, history, x, r, p, w, partials, arrivals, test=None, rounded=None, z=None, az=None):
    if z is None:
        update_iterate(s, x, r, p, w)
    else:
        single_update(s, x, r, p, w, z, az)
    if rounded is not None:
        rounded[...] = r
    record_step(s, sums, history, False, (partials, arrivals, r), test)


def single_step(s, sums, dots=None):
    if dots is not None:
        r, z, az = dots[2:]
        _summed(sums, dots[0], r, z, az, z)
    rz, zaz = sums[0], sums[1]
    beta = 0.0 if s[RZ] == 0.0 else rz / s[RZ]
    pap = zaz if beta == 0.0 else zaz - beta * rz / s[ALPHA]
    s[RZ], s[BETA] = rz, beta
    if not rz >= 0.0:
        s[ALPHA], s[FLAG] = 0.0, INDEFINITE_PRECONDITIONER
    elif rz == 0.0:
        s[ALPHA] = 0.0
    elif not pap > 0.0:
        s[ALPHA], s[FLAG] = 0.0, INDEFINITE_OPERATOR
    else:
        s[ALPHA] = rz / pap


def single_update(s, x, r, p, w, z, az):
    update_direction(s, p, z)
    update_direction(s, w, az)
    update_iterate(s, x, r, p, w)


def update_direction(s, p, z):
    if s[BETA] == 0.0:
        p[...] = z
    else:
        p *= s[BETA]
        p += z


def remove_mean(v, sums, total=None):
    v -= sums[0] / (v.size if total is None else total)


def loop_test(s, history, column, rtol, atol, dtol, limit, mode, handle):
    if handle:
        raise ValueError("the host twin sets no CUDA graph conditional handle: pass 0")
    if mode == RESUME:
        s[GO] = 1.0 if s[FLAG] == 0.0 else 0.0
        return
    row = int(s[ROW])
    norm = numpy.sqrt(max(history[row, column], 0.0))
    if mode == START:
        reference = numpy.sqrt(s[REFERENCE]) if s[REFERENCE] > 0.0 else norm
        s[TARGET] = max(rtol * reference, atol)
        s[DIVERGENCE] = dtol * reference
    go = (s[FLAG] == 0.0 and numpy.isfinite(history[row]).all() and s[TARGET] < norm < s[DIVERGENCE]
          and row < limit)
    s[GO] = 1.0 if go else 0.0


def clear_unless_converged(flag, records, column):
    for store in records:
        s, row = store[:SLOTS], store[SLOTS + 3 * int(store[ROW]):][:3]
        if not (s[FLAG] == 0.0 and numpy.isfinite(row).all() and numpy.sqrt(max(row[column], 0.0)) <= s[TARGET]):
            flag[0] = 0.0
