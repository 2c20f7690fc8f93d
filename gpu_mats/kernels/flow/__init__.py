"""The vector updates of the flow driver's fractional step (plugin.flow.integrator)."""

BASE, COUNT, LIMIT, GO, KEEP, FINE = range(6)  # slots of a loop of steps' status array (float64)
LOOP_SLOTS = 6


def explicit_update(out, u, s, r, w):
    """out = u + w (s - r) for (dim, n) blocks and one weight per column:
    u + dt Omega^-1 (source - rate); out may alias u."""


def upwind_outflow(out, u_s, faces):
    """out = u_s with max(u_s, 0) on ``faces`` (the outflow faces: backflow
    brings no momentum in), without temporaries (it runs inside captured
    steps); out may alias u_s."""


def functional(out, starts, which, index, weight, s0, s1, s2, s3):
    """out[r] = sum over k in starts[r] .. starts[r+1] of weight[k] *
    s_which[k][index[k]]: linear functionals (forces, probe pressures) of up
    to four arrays in one pass, summed in a fixed order."""


def gather_plan(sources):
    """What gather() needs to read ``sources`` (contiguous float64 arrays of
    the family's backend) one after another, made once, outside any capture."""


def gather(out, plan, at=None):
    """out = the plan's sources raveled one after another. On the GPU out
    is pinned host memory, which the kernel writes through unified
    addressing: a step's few values reach the host by one kernel of its
    CUDA graph, where a copy a value cost the graph a memcpy node each.
    ``at``: a loop's status array, whose BASE + COUNT, read by the kernel,
    is the row of ``out`` (rows of the sources' total length) written: each
    step of a loop the device runs into a row of its own."""


def stamp(out, slot):
    """out[slot] = the device's clock in nanoseconds (int64; out may be
    pinned host memory, written through unified addressing): two stamps
    time the work queued between them, inside a CUDA graph too, where an
    event record node costs the graph's launch several times a kernel's."""


def lap(out, slot, since):
    """out[slot] += the device's clock - out[since] (nanoseconds, int64, as
    stamp's): the time since a stamp, summed over the runs of a loop's body."""


def loop_start(status, limit, base):
    """status = BASE ``base``, COUNT 0, LIMIT ``limit``, GO 1 (0 where limit
    is 0), KEEP and FINE 1: before a loop of at most ``limit`` time steps,
    launched by the host ahead of the loop's CUDA graph, which then holds
    no value that changes from one launch to the next."""


def loop_go(status, handle):
    """A CUDA graph's conditional ``handle`` (the host twin takes 0 only) = GO."""


def step_verdict(status, rate, change, dt, rule, handle):
    """After a step of ``dt`` in a loop: KEEP = 1 where the step's solves
    converged (FINE, which pcg's clear_unless_converged clears) and the
    step is one the host takes with the others and follows with another of
    dt, else 0; COUNT + 1; GO = KEEP while COUNT < LIMIT; FINE = 1 again;
    the conditional ``handle`` (of the node that runs the next step; 0:
    none) = GO. ``rule``, (cfl, other_limit, band, cfl_max, steady_tol,
    fixed): the step's CFL number dt rate[0] finite and at most cfl_max,
    change[0] / dt (max |u^{n+1} - u^n| / dt) at least steady_tol (0: not
    tested), and rate[0] > 0 with, unless ``fixed``, the next limit
    min(cfl / rate[0], other_limit) within [dt, band dt): the flow solver's
    held dt (FlowSolver._keeps_dt), in the same arithmetic, so that the
    device stops where the host would."""
