"""What the host keeps of the steps launched in CUDA graphs: each step's
values read back in one copy, the launches it waits for, and the steps
launched and not taken yet."""

import itertools
from dataclasses import dataclass

import numpy

from gpu_mats.backend import address
from gpu_mats.kernels import family

from .state import FlowState


class StepReadback:
    """Device arrays (float64) that a step's CUDA graph gathers into pinned
    host memory at its end, by one kernel (the solves' records, the
    convective rate, the change from the last state, the watchers' values):
    the host waits for the device once a step and reads them all from
    there. With ``rows`` and a loop's status array ``at`` (the flow
    family's gather): each step of a loop the device runs gathers into row
    BASE + COUNT of its own (row(j))."""

    def __init__(self, xp, sources, rows=1, at=None):
        self.xp, self.sources, self._at = xp, sources, at
        self._where = {(address(a), a.shape): k for k, a in enumerate(sources)}
        self._by_id = {id(a): k for k, a in enumerate(sources)}  # the sources themselves, found without address()
        for a in sources:
            if a.dtype != numpy.float64 or not a.flags.c_contiguous:
                raise TypeError(f"a step's readback takes contiguous float64 arrays, not {a.dtype} of shape {a.shape}")
        self._kernels = family("flow", xp)
        self._plan = self._kernels.gather_plan(sources)
        sizes = [0, *itertools.accumulate(a.size for a in sources)]  # Python ints (CuPy's pinned arrays take no others)
        if xp is numpy:  # a copy, so that both backends read a step's values as they were
            self._gathered = numpy.empty((rows, sizes[-1]))
        else:
            import cupyx

            self._gathered = cupyx.empty_pinned((rows, sizes[-1]), numpy.float64)
            self._done = xp.cuda.Event(block=False, disable_timing=True)
        self._rows = [_Row(self, [row[a:b].reshape(s.shape) for a, b, s in zip(sizes[:-1], sizes[1:], sources)])
                      for row in self._gathered]
        self.host = self._rows[0].host

    def copy_of(self, array):
        """The host copy of one of the sources (the same memory: a view made again is found too)."""
        return self.host[self.index(array)]

    def index(self, array):
        """The place of ``array`` among the sources."""
        k = self._by_id.get(id(array))
        if k is None or self.sources[k] is not array:
            k = self._where[address(array), array.shape]
        return k

    def row(self, j):
        """Row j's host copies (copy_of and host as the readback's own): the step of a loop that wrote it."""
        return self._rows[j]

    def matches(self, sources):
        return len(sources) == len(self.sources) and all(address(a) == address(b) and a.shape == b.shape
                                                         for a, b in zip(sources, self.sources))

    def queue(self):
        self._kernels.gather(self._gathered, self._plan, self._at)

    def mark(self):
        """After the launch of a step that copies into this readback: what wait() waits for."""
        if self.xp is not numpy:
            self._done.record()

    def wait(self):
        """The copies of the step last marked done (the step with them), not the work queued after it."""
        if self.xp is not numpy:
            self._done.synchronize()


class _Row:
    """One row of a StepReadback: the host copies of one step's values."""

    __slots__ = ("readback", "host")

    def __init__(self, readback, host):
        self.readback, self.host = readback, host

    def copy_of(self, array):
        return self.host[self.readback.index(array)]


class Launch:
    """One launch of a step graph: the readback of its last step, which the
    host waits for once for all its steps; ``loop``: a loop of steps the
    device ends (whose buffers its later steps write again)."""

    __slots__ = ("readback", "waited", "loop")

    def __init__(self, readback, loop=False):
        self.readback, self.waited, self.loop = readback, False, loop


@dataclass(eq=False)
class Queued:
    """A step launched in a step graph and not taken yet: the state it starts
    from and its dt, the state it makes, the readback its values are copied
    into, the GraphPhases its replay recorded (None: not sampled), and its
    launch."""

    state: FlowState
    dt: float
    new: FlowState
    readback: StepReadback
    marks: object
    launch: Launch
    iterations: tuple = (0, 0)  # (momentum, pressure), once its launch is judged (FractionalStep._judge)
    failure: object = None  # and what failed, if anything
