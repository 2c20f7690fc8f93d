"""The flow driver's vector updates on the host: NumPy twins of ``flow.cu``."""

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
