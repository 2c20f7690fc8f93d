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
