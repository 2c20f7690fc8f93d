"""Fischer's basis on the host: NumPy twins of ``guess.cu``."""

import numpy

from . import COUNT, RESTART


def basis_partials(partials, X, state, v):
    count = int(state[COUNT])
    partials[...] = 0.0
    partials[:count, 0] = X[:count] @ v


def sum_rows(sums, partials):
    sums[...] = partials.sum(axis=1)


def combine(out, X, coeffs, state, v, sign):
    count = int(state[COUNT])
    total = coeffs[:count] @ X[:count] if count else numpy.zeros(out.shape)
    if v is None:
        numpy.multiply(total, sign, out=out)
    else:
        numpy.add(v, sign * total, out=out)


def begin_update(state, rows):
    restart = state[COUNT] >= rows
    state[RESTART] = 1.0 if restart else 0.0
    if restart:
        state[COUNT] = 0.0


def new_direction(w, x, guess, state):
    if state[RESTART]:
        numpy.copyto(w, x)
    else:
        numpy.subtract(x, guess, out=w)


def append(X, w, norm_squared, state):
    if norm_squared[0] > 0.0:
        numpy.divide(w, numpy.sqrt(norm_squared[0]), out=X[int(state[COUNT])])


def count_up(state, norm_squared):
    if norm_squared[0] > 0.0:
        state[COUNT] += 1.0


def keep(saved_row, saved_state, X, state):
    numpy.copyto(saved_state, state)
    count = int(state[COUNT])
    numpy.copyto(saved_row, X[count if count < X.shape[0] else 0])
