"""The flow driver's vector updates on the host: NumPy twins of ``flow.cu``."""

import math
import time

import numpy

from . import BASE, COUNT, FINE, GO, KEEP, LIMIT


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


def gather(out, plan, at=None):
    """Twin of flow.cu's gather."""
    out = out.reshape(-1)
    if at is not None and plan:
        out = out[int(at[BASE] + at[COUNT]) * plan[-1][2]:]
    for source, start, end in plan:
        out[start:end] = source.ravel()


def stamp(out, slot):
    """Twin of flow.cu's stamp: the host's monotonic clock in nanoseconds."""
    out[slot] = time.perf_counter_ns()


def lap(out, slot, since):
    """Twin of flow.cu's lap on the host's monotonic clock."""
    out[slot] += time.perf_counter_ns() - out[since]


def loop_start(status, limit, base):
    status[[BASE, COUNT, LIMIT, GO, KEEP, FINE]] = base, 0.0, limit, 1.0 if limit > 0 else 0.0, 1.0, 1.0


def loop_go(status, handle):
    if handle:
        raise ValueError("the host twin sets no CUDA graph conditional handle: pass 0")


def step_verdict(status, rate, change, dt, rule, handle):
    loop_go(status, handle)
    cfl, other_limit, band, cfl_max, steady_tol, fixed = rule
    r = float(rate[0])
    number = dt * r
    keeps_dt = r > 0.0 and (fixed or dt <= min(cfl / r, other_limit) < band * dt)
    unsteady = steady_tol == 0.0 or float(change[0]) / dt >= steady_tol
    keep = status[FINE] != 0.0 and math.isfinite(number) and number <= cfl_max and unsteady and keeps_dt
    status[COUNT] += 1.0
    status[KEEP] = 1.0 if keep else 0.0
    status[GO] = 1.0 if keep and status[COUNT] < status[LIMIT] else 0.0
    status[FINE] = 1.0
