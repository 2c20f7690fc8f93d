"""The vector updates of the flow driver's fractional step (plugin.flow.integrator)."""


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


def gather(out, plan):
    """out = the plan's sources raveled one after another. On the GPU out
    is pinned host memory, which the kernel writes through unified
    addressing: a step's few values reach the host by one kernel of its
    CUDA graph, where a copy a value cost the graph a memcpy node each."""


def stamp(out, slot):
    """out[slot] = the device's clock in nanoseconds (int64; out may be
    pinned host memory, written through unified addressing): two stamps
    time the work queued between them, inside a CUDA graph too, where an
    event record node costs the graph's launch several times a kernel's."""
