"""The vector updates of the flow driver's fractional step (plugin.flow.integrator)."""


def explicit_update(out, u, s, r, w):
    """out = u + w (s - r) for (dim, n) blocks and one weight per column:
    u + dt Omega^-1 (source - rate); out may alias u."""


def upwind_outflow(out, u_s, faces):
    """out = u_s with max(u_s, 0) on ``faces`` (the outflow faces: backflow
    brings no momentum in), without temporaries (it runs inside captured
    steps); out may alias u_s."""
