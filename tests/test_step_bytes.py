"""benchmarks/step_bytes.py's count: the distinct arrays of a kernel call, once a call."""

import os
import sys

import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

from step_bytes import Traffic, array_bytes  # noqa: E402

from gpu_mats.kernels import family  # noqa: E402


def test_views_of_one_memory_count_once():
    a, b = numpy.zeros(100), numpy.zeros(7, dtype=numpy.float32)
    assert array_bytes((a, a[:50], a.reshape(10, 10), b, 3.0, None)) == 800 + 28
    assert array_bytes((a[50:], (a[:50], [b]))) == 800 + 28  # two halves of one array: its span; in a tuple too


def test_a_call_counts_its_arrays_and_not_the_twins_it_calls():
    traffic = Traffic()
    traffic.wrap("pcg")
    try:
        k = family("pcg", numpy)
        p, w = numpy.ones(1000), numpy.full(1000, 2.0)
        s, sums = numpy.array([2.0] + [0.0] * 8), numpy.zeros(3)
        partials, arrivals = numpy.zeros((3, k.partial_count(1000))), numpy.zeros(1, dtype=numpy.uint32)
        k.alpha_step(s, sums, (partials, arrivals, p, w))  # not counted: counting is off
        traffic.counting = True
        k.alpha_step(s, sums, (partials, arrivals, p, w))  # its dots: partial_dots and sum_partials inside
        assert traffic.calls == {"pcg": 1}
        first = s.nbytes + sums.nbytes + partials.nbytes + arrivals.nbytes + p.nbytes + w.nbytes
        assert traffic.bytes["pcg"] == first
        k.update_iterate(s, numpy.zeros(1000), numpy.zeros(1000), p, w)
        assert traffic.calls["pcg"] == 2 and traffic.bytes["pcg"] == first + s.nbytes + 4 * 8000
        assert s[1] == 2.0 / 2000.0  # the wrapped step still steps
    finally:
        traffic.unwrap()
    assert not hasattr(family("pcg", numpy).alpha_step, "__wrapped__")
