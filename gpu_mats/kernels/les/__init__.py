"""Subgrid-scale eddy viscosities of large-eddy simulation, one value per
cell from the cell's velocity gradient (gpu_mats.subgrid chooses the model
and its constant)."""


def eddy_viscosity(model, gradient, width, constant, out):
    """out = nu_t of ``model`` ("smagorinsky", "wale" or "sigma") for each
    cell: ``gradient`` (dim * dim, n), row i * dim + j holding du_i/dx_j
    (2D gradients taken as 3D ones with no third component), ``width`` (n)
    the filter width, ``constant`` the model's constant. Computed in float64."""
