"""The vector updates of the flow driver's fractional step (plugin.flow.integrator)."""


def explicit_update(out, u, s, r, w):
    """out = u + w (s - r) for (dim, n) blocks and one weight per column:
    u + dt Omega^-1 (source - rate); out may alias u."""
