"""Large-eddy simulation in the fractional step: the subgrid model's eddy
viscosity nu_t of each cell from the cell velocity gradients, the filter
width the cube (square) root of the cell's volume, and the diffusion's
values refreshed from nu + nu_t on the faces before each step's explicit
part (Oyarzún 2015, Algorithm 1, step 5; eq. 2.11). The models and their
constants are gpu_mats.subgrid's."""

from gpu_mats.kernels import family
from gpu_mats.subgrid import CONSTANTS, MODELS, eddy_viscosity, filter_width

__all__ = ["MODELS", "EddyViscosity"]


class EddyViscosity:
    """One run's subgrid model ``model`` (constant ``constant``, 0: the
    model's own) on the cells of ``ops`` (FlowOperators), in ``xp``'s memory:
    ``nu_t`` of the last step, and ``largest``, the largest over the rank's
    cells of what it adds to D_ii / Omega_i (the eddy diffusion's explicit
    time step limit is about 1 / that)."""

    def __init__(self, model, constant, ops, xp):
        if model not in MODELS:
            raise ValueError(f"subgrid model must be one of {MODELS}, not {model!r}")
        self.model, self.constant = model, constant or CONSTANTS[model]
        n = ops.geometry.num_cells
        self.xp, self.updates = xp, family("blas", xp)
        self.width = xp.asarray(filter_width(ops.volumes, ops.dim))
        self.nu_t, self.rate, self.largest = xp.zeros(n), xp.zeros(n), xp.zeros(1)
        self._scratch = xp.zeros(self.updates.reduction_slots(n))

    def refresh(self, gradients, matrices):
        """nu_t from the cell velocity gradients (dim * dim, n) and D's values from it; the largest rate it
        adds queued into ``largest`` (not read)."""
        eddy_viscosity(self.xp, self.model, gradients, self.width, self.nu_t, self.constant)
        matrices.refresh_diffusion(self.nu_t)
        matrices.eddy_rate(self.nu_t, self.rate)
        self.updates.max_abs(self.largest, self.rate, None, self._scratch)
