"""Subgrid-scale models of large-eddy simulation: the eddy viscosity nu_t =
(C width)^2 D(grad u) of each cell (the les kernel family), with the
filter width from the cell's volume. Step 5 of the fractional step of
Oyarzún, "Parallel linear algebra for CFD on hybrid architectures" (thesis,
2015), Algorithm 1, refreshes the diffusion operator from it."""

from .kernels import family

# The models' constants: Smagorinsky's as Deardorff ("A numerical study of
# three-dimensional turbulent channel flow at large Reynolds numbers", 1970)
# took it for the channel; WALE's as the thesis's runs (Nicoud and Ducros,
# 1999, propose 0.5 to 0.6 from decaying isotropic turbulence); Sigma's from
# Nicoud, Baya Toda, Cabrit, Bose and Lee (2011).
CONSTANTS = {"smagorinsky": 0.1, "wale": 0.325, "sigma": 1.35}
MODELS = tuple(CONSTANTS)


def filter_width(volumes, dim):
    """The cube (square) root of each cell's volume (area)."""
    return volumes ** (1.0 / dim)


def eddy_viscosity(xp, model, gradient, width, out, constant=None):
    """out = nu_t of ``model`` for each cell, from ``gradient`` (dim * dim, n;
    row i * dim + j holds du_i/dx_j) and ``width`` (n), in ``xp``'s memory;
    ``constant`` defaults to CONSTANTS[model]."""
    if model not in CONSTANTS:
        raise ValueError(f"subgrid model must be one of {MODELS}, not {model!r}")
    if gradient.ndim != 2 or gradient.shape[0] not in (4, 9) or gradient.shape[1] != out.size or width.size != out.size:
        raise ValueError(f"a gradient of shape (4 or 9, {out.size}) and {out.size} widths are needed, got "
                         f"{gradient.shape} and {width.size}")
    family("les", xp).eddy_viscosity(model, gradient, width, CONSTANTS[model] if constant is None else constant, out)
    return out
