"""The flow's face operators on a box of equal cells on one rank, applied
from the grid instead of read from matrices.

On such a box every operator of the fractional step that maps cells to
faces or faces to cells (Gamma, Ms, Gs, G, the CFL's flux rate, the
convective C(u_s) and the diffusive D) has one value per axis, so a
product needs only its vectors: the SELL copies read 12 bytes of index and
value per nonzero besides, and C's values are rewritten every step (E_C's
product, Oyarzún 2015 eq. 2.14), which the stencil does not need. The
kernels are the ``box`` family's (CUDA and NumPy twins); the sides that
are not periodic are walls that hold the velocity.
"""

from dataclasses import dataclass

import numpy

from .kernels import family


@dataclass(frozen=True)
class BoxGrid:
    """A box's cells (``shape`` (nx, ny, nz), nz 1 in 2D, numbered x fastest)
    and its faces: along each axis, each cell's face on its high side where
    it has one (``periodic`` axes wrap; the others lack it at their high
    end), axis after axis, in cell order."""

    shape: tuple
    periodic: tuple
    dim: int

    def extents(self, d):
        """(nx, ny, nz) of the low cells of the faces along d."""
        return tuple(n - (1 if axis == d and not self.periodic[d] else 0) for axis, n in enumerate(self.shape))

    @property
    def cells(self):
        return int(numpy.prod(self.shape))

    @property
    def offsets(self):
        """Where the faces along each axis start, and (last) their count; a 2D box's third axis has none."""
        counts = [int(numpy.prod(self.extents(d))) if d < self.dim else 0 for d in range(3)]
        return tuple(int(v) for v in numpy.concatenate(([0], numpy.cumsum(counts))))

    @property
    def faces(self):
        return self.offsets[3]


class BoxFaceOperators:
    """y = A x (+ z) of the flow's face operators on ``grid`` (BoxGrid) for
    cells of face areas ``areas`` and spacings ``spacings`` per axis and
    volume ``volume``, kinematic viscosity ``nu``, D scaled by
    ``diffusion_scale`` (1/2: its explicit half under Crank-Nicolson), on
    arrays of ``xp``: velocities flat or (dim, cells)."""

    def __init__(self, grid, areas, spacings, volume, nu, diffusion_scale, xp):
        self.grid, self.xp = grid, xp
        self._kernels = family("box", xp)
        areas, spacings = numpy.asarray(areas, dtype=float), numpy.asarray(spacings, dtype=float)
        self.areas, self.inverse_spacings = tuple(areas), tuple(1.0 / spacings)
        self.half_areas = tuple(areas / 2)
        self.gradient_scale = self.rate_scale = tuple(areas / (2 * volume))
        self.conductances = tuple(diffusion_scale * nu * areas / spacings)
        self._face_velocities = None

    def _vectors(self, x):
        return x.reshape(self.grid.dim, self.grid.cells)

    def gamma(self, u, w):
        """w = Gamma u."""
        self._kernels.interpolate(self.grid, self._vectors(u), w)

    def divergence(self, w, out, z=None):
        """out = Ms w (+ z)."""
        self._kernels.face_sum(self.grid, w, out, self.areas, z)

    def face_gradient(self, p, w, z=None):
        """w = Gs p (+ z)."""
        self._kernels.face_gradient(self.grid, p, w, self.inverse_spacings, z)

    def cell_gradient(self, p, out):
        """out = G p."""
        self._kernels.cell_gradient(self.grid, p, self._vectors(out), self.gradient_scale)

    def flux_rate(self, speeds, out):
        """out = the flux rate's product: over each cell's faces A_d / (2 Omega) |w_f|."""
        self._kernels.face_sum(self.grid, speeds, out, self.rate_scale, speeds=True)

    def largest_flux_rate(self, speeds, out):
        """out[0] = the largest over cells of flux_rate's product (NaN where any is), in one pass."""
        self._kernels.largest_rate(self.grid, speeds, out, self.rate_scale)

    def set_face_velocities(self, w):
        """The face velocities u_s that C(u_s) takes from now on (read by every product, not copied)."""
        self._face_velocities = w

    def convection(self, u, out):
        """out = C(u_s) u."""
        self._kernels.convection(self.grid, self._face_velocities, self._vectors(u), self._vectors(out),
                                 self.half_areas)

    def diffusion(self, u, out, z=None):
        """out = D u (+ z), D times diffusion_scale."""
        self._kernels.diffusion(self.grid, self._vectors(u), self._vectors(out), self.conductances,
                                None if z is None else self._vectors(z))

    def transport(self, u, v, out):
        """out = C(u_s) u + D v in one pass (D times diffusion_scale)."""
        self._kernels.transport(self.grid, self._face_velocities, self._vectors(u), self._vectors(v),
                                self._vectors(out), self.half_areas, self.conductances)
