"""Timing a step by phases: PETSc log events for -log_view, CUDA events
around each phase of a launched step, and the device's own clock stamped
inside a step's CUDA graph, none of which makes the host wait for the
device."""

import collections
import contextlib
import time

import numpy
from petsc4py import PETSc

from gpu_mats.kernels import family


class PhaseTimer:
    """A PETSc log event per phase of a step (``-log_view``: the host's time
    in it), and the time of each phase summed over steps: on the GPU between
    two CUDA events around the phase's work, read once the device has passed
    them, so that timing a phase never makes the host wait for the device (a
    synchronize per phase would cost each step five waits, and a step
    launched ahead would wait for itself); on the host its wall time. Each
    phase's uses are counted in steps: a step graph replayed (Step) and one
    run eagerly or captured (Capture, a one-off of each new graph) apart. A
    replay repeats the same work but for its iterations, so CUDA events time
    one launch of a step in EVERY["Step"] (``timed`` counts the steps they
    held): the events' host calls are a good part of a replayed step's host
    time. A loop's launch (of steps counted once it is done) is timed every
    time: its events' cost is spread over its steps, and a run has few. A
    prime, so that the samples take the arrangements of the buffers in turn,
    and the steps of Fischer's basis between its restarts (every 16 or 8
    solves) alike."""

    PHASES = ("Explicit", "Momentum", "Pressure", "Correct", "CFL", "Step", "Capture")
    EVERY = {"Step": 7}  # on the GPU, one use timed in this many (the others: 1)

    def __init__(self, xp):
        self.xp = xp
        self._pending = {name: collections.deque() for name in self.PHASES}  # (start, end) CUDA events not read
        self._spare = []  # event pairs read, to record again
        self._phases = {name: _Phase(self, name, PETSc.Log.Event(f"Flow{name}"),
                                     1 if xp is numpy else self.EVERY.get(name, 1)) for name in self.PHASES}
        self.reset()

    def reset(self):
        self.seconds, self.uses = dict.fromkeys(self.PHASES, 0.0), dict.fromkeys(self.PHASES, 0)
        self.timed = dict.fromkeys(self.PHASES, 0)  # the uses whose time is in seconds (once read)
        # the phases inside replayed steps' graphs (GraphPhases), summed over the replays read, and their count
        self.graph_seconds, self.graph_timed = {}, 0
        self.waited, self.waits = 0.0, 0  # the host's seconds blocked on a step's graph, and how many steps
        self.first_runs = 0.0  # the host's seconds in steps' graphs run eagerly or captured (not replays)
        self.captures, self.capture_seconds = 0, 0.0  # of them the captures (and their first replays)
        for pending in self._pending.values():
            self._spare.extend(pending)
            pending.clear()

    def settle(self):
        """Add the phases whose events are recorded but not read yet (waiting for them)."""
        for name in self.PHASES:
            self._read(name, wait=True)

    def _read(self, name, wait=False):
        pending = self._pending[name]
        while pending and (wait or pending[0][1].done):
            start, end = pending.popleft()
            end.synchronize()
            self.seconds[name] += self.xp.cuda.get_elapsed_time(start, end) / 1e3
            self._spare.append((start, end))

    def __call__(self, name, steps=1):
        """The context of one use of phase ``name`` (one object a phase: phases
        do not nest in themselves) for ``steps`` steps (a graph of several:
        counted as that many uses, and where timed as that many timed; 0: a
        loop's, counted by add_steps once it is done, always timed)."""
        phase = self._phases[name]
        phase.steps = steps
        return phase

    def add_steps(self, name, steps):
        """Count ``steps`` more in the last use of phase ``name`` (a loop's,
        whose steps the device counts: known once it is done)."""
        self.uses[name] += steps
        if self._phases[name].timed_last:
            self.timed[name] += steps

    def add_graph(self, marks, steps=1):
        """Add the phases of one replay of a step's graph (its GraphPhases, the
        host past the replay): of ``steps`` steps where the GraphPhases sums a
        loop's."""
        for name, seconds in marks.elapsed().items():
            self.graph_seconds[name] = self.graph_seconds.get(name, 0.0) + seconds
        self.graph_timed += steps


class GraphPhases:
    """The phases inside a step's CUDA graph, each between two stamps of the
    device's clock that the graph writes itself (the flow family's stamp
    kernel, into pinned host memory), so that a replayed step's GPU time
    splits by phase with no launch or wait of its own: read once the host has
    waited for a replay, before that graph replays again. Kernels rather than
    event record nodes, each of which costs every launch of the graph more
    than a kernel node does (BENCHMARKS.md, "What a graph's launch costs").
    Made outside the capture (its memory), its stamps queued by the run that
    captures the graph. In a loop of steps (``summed``) each phase's end adds
    the time since its start (the flow family's lap), summed over every pass
    of the loop's body; clear() before each launch: the loop's marked steps
    together (a quarter of its steps), not one of them, which would be the
    same step of Fischer's restarts in each loop of a multiple of their
    period."""

    def __init__(self, xp, names, summed=False):
        import cupyx  # only where there is a GPU: the marked graphs are the GPU's

        kernels = family("flow", xp)
        self.clock = cupyx.zeros_pinned(2 * len(names), numpy.int64)
        self.stamp, self.lap, self.summed = kernels.stamp, kernels.lap, summed
        self.recorded = []  # the phases the last run stamped, in order
        self._phases = {name: _GraphPhase(self, name, 2 * k) for k, name in enumerate(names)}

    def __call__(self, name):
        return self._phases[name]

    def clear(self):
        """No time summed yet (before a loop's launch; the device is not running one that stamps here)."""
        self.clock[:] = 0

    def elapsed(self):
        """Seconds of each phase stamped, in its last run (the host past it): summed over a loop's passes."""
        clock = self.clock.tolist()
        return {phase.name: 1e-9 * (clock[phase.slot + 1] - (0 if self.summed else clock[phase.slot]))
                for phase in self.recorded}


class _GraphPhase:
    """One phase of a GraphPhases: the device's clock stamped around its work."""

    def __init__(self, marks, name, slot):
        self.marks, self.name, self.slot = marks, name, slot

    def __enter__(self):
        self.marks.stamp(self.marks.clock, self.slot)
        return self

    def __exit__(self, *exc):
        marks = self.marks
        if marks.summed:
            marks.lap(marks.clock, self.slot + 1, self.slot)
        else:
            marks.stamp(marks.clock, self.slot + 1)
        marks.recorded.append(self)


class _Phase:
    """One use of a phase at a time, timed where its count says (PhaseTimer);
    a class rather than a generator, which costs a replayed step more."""

    def __init__(self, timer, name, event, every):
        self.timer, self.name, self.event, self.every = timer, name, event, every
        self.steps, self._count = 1, 0  # the steps of the next use; the uses so far (one in ``every`` timed)
        self._marks = self._start = None
        self.timed_last = False  # whether the last use was timed

    def __enter__(self):
        timer, name = self.timer, self.name
        self.event.begin()
        timer.uses[name] += self.steps
        self._count += 1
        self.timed_last = timer.xp is numpy or self.steps == 0 or self._count % self.every == 0
        if timer.xp is numpy:
            self._start = time.perf_counter()
        elif self.timed_last:
            timer._read(name)
            self._marks = timer._spare.pop() if timer._spare else (timer.xp.cuda.Event(), timer.xp.cuda.Event())
            self._marks[0].record()
        return self

    def __exit__(self, *exc):
        timer, name = self.timer, self.name
        if self._start is not None:
            timer.seconds[name] += time.perf_counter() - self._start
            timer.timed[name] += self.steps
            self._start = None
        elif self._marks is not None:
            self._marks[1].record()
            timer._pending[name].append(self._marks)
            timer.timed[name] += self.steps
            self._marks = None
        self.event.end()


def untimed(name):
    """No timing: the phases of a step queued into a graph that is not marked."""
    return contextlib.nullcontext()
