"""The flow driver's vector updates on the host: NumPy twins of ``flow.cu``."""

import time

import numpy


def explicit_update(out, u, s, r, w):
    """Twin of flow.cu: out = u + w (s - r), w one weight per column of the (dim, n) blocks."""
    numpy.add(u, w * (s - r), out=out)


def upwind_outflow(out, u_s, faces):
    """Twin of flow.cu's upwind_outflow."""
    if out is not u_s:
        out[...] = u_s
    out[faces] = numpy.maximum(u_s[faces], 0.0)


def functional(out, starts, which, index, weight, s0, s1, s2, s3):
    """Twin of flow.cu's functional."""
    terms = numpy.zeros(weight.size)
    for k, source in enumerate((s0, s1, s2, s3)):
        taken = which == k
        terms[taken] = weight[taken] * source[index[taken]]
    out[...] = [terms[a:b].sum() for a, b in zip(starts[:-1], starts[1:])]


def gather_plan(sources):
    """Twin of the CUDA plan: the sources and their offsets in out."""
    offsets = numpy.concatenate([[0], numpy.cumsum([a.size for a in sources])]).astype(numpy.int64)
    return tuple(zip(sources, offsets[:-1].tolist(), offsets[1:].tolist()))


def gather(out, plan):
    """Twin of flow.cu's gather."""
    for source, start, end in plan:
        out[start:end] = source.ravel()


def stamp(out, slot):
    """Twin of flow.cu's stamp: the host's monotonic clock in nanoseconds."""
    out[slot] = time.perf_counter_ns()
