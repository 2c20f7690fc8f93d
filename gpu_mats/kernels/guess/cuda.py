"""Fischer's basis on the GPU (``guess.cu``)."""

import functools
import pathlib

import cupy
import numpy

BLOCK, SUM_BLOCK = 256, 1024  # as guess.cu (and pcg.cu, whose partial_count sizes the partials)
_NULL = numpy.uint64(0)


@functools.cache
def _module():
    return cupy.RawModule(code=pathlib.Path(__file__).with_name("guess.cu").read_text())


def _kernel(name):
    return _module().get_function(name)


def _grid(n):
    return (max(1, min(-(-n // BLOCK), 4096)),)


def basis_partials(partials, X, state, v):
    _kernel("basis_partials")((partials.shape[1],), (BLOCK,),
                              (numpy.int64(v.size), numpy.int32(X.shape[0]), X, state, v, partials))


def sum_rows(sums, partials):
    _kernel("sum_rows")((partials.shape[0],), (SUM_BLOCK,), (numpy.int32(partials.shape[1]), partials, sums))


def combine(out, X, coeffs, state, v, sign):
    _kernel("combine")(_grid(out.size), (BLOCK,), (numpy.int64(out.size), X, coeffs, state,
                                                   _NULL if v is None else v, numpy.float64(sign), out))


def begin_update(state, rows):
    _kernel("begin_update")((1,), (1,), (state, numpy.int32(rows)))


def new_direction(w, x, guess, state):
    _kernel("new_direction")(_grid(w.size), (BLOCK,), (numpy.int64(w.size), w, x, guess, state))


def append(X, w, norm_squared, state):
    _kernel("append")(_grid(w.size), (BLOCK,), (numpy.int64(w.size), X, w, norm_squared, state))


def count_up(state, norm_squared):
    _kernel("count_up")((1,), (1,), (state, norm_squared))


def keep(saved_row, saved_state, X, state):
    _kernel("keep")(_grid(saved_row.size), (BLOCK,), (numpy.int64(saved_row.size), numpy.int32(X.shape[0]), X, state,
                                                      saved_row, saved_state))
