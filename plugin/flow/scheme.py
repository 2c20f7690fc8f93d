"""Which discretisation the flow runs: the symmetry-preserving scheme, or the
consistent one for non-orthogonal and skewed cells, and its parts.

symmetric: the collocated symmetry-preserving scheme of Trias et al. (JCP
258, 2014) and Oyarzún (2015): two-point face gradients and the cell
gradient -Omega^-1 M^T (Green-Gauss), the transpose of the divergence, so
that the projection conserves kinetic energy. Both are exact only where the
line between two cell centroids is along the face normal (Perot, JCP 159,
2000): first order, or worse, on the tetrahedra gmsh makes.

consistent: least-squares cell gradients, exact for linear fields on any
cell (plugin.flow.least_squares), for the pressure's correction of the cell
velocities and in every correction; the pressure's face gradient corrected
for non-orthogonality, deferred to the right-hand side so that L stays the
symmetric two-point Laplacian and the face velocities stay divergence-free
to the solver's tolerance; the diffusion's face gradients corrected the same
way; the face interpolation of the velocity corrected for skewness
(plugin.flow.corrections). Omega G = -M^T no longer holds: the projection
no longer conserves kinetic energy exactly, and no longer is one: repeated,
it amplifies some velocities on tetrahedra (with the skewness correction),
and what it takes from a flow a step does not shrink with dt, so that a
time unit of more steps takes more (BENCHMARKS.md: 2D-2's lift amplitude
fell as dt shrank). The consistent scheme therefore
gives the face velocities a memory (-flow_face_memory,
plugin.flow.integrator): each step's projection then corrects what that
step changed and only a fraction, about nu dt / delta^2, of what the
earlier ones left, so what it does in a time unit no longer grows as dt
shrinks, and flows on tetrahedra settle (where that fraction is large,
at low Reynolds numbers on fine tetrahedra, it lets modes of a few small
cells grow: with Crank-Nicolson dt is held below that,
-flow_memory_fourier; -flow_face_memory_beta damping holds them at any dt,
but not convective flows). On a box every correction is zero
and least squares is Green-Gauss: both schemes are the same operators.

The convection still carries the velocity at the midpoint of the two
centroids, (u_i + u_j) / 2, which keeps C skew-symmetric. On tetrahedra
that is an O(h) error in every face's momentum flux, and the pressure,
which takes up the flux error's gradient part, is first order for it.
-flow_convection_skewness moves the convected velocity to the face's
centroid by an explicit correction, off by default in both schemes: C
plus it is no longer skew-symmetric, and its symmetric part is an
anti-diffusion of about |u_s| |s| on each face, which made the coarsest
DFG tetrahedra blow up until the face velocity it takes was capped at
nu / |s| (BENCHMARKS.md).

At a no-slip wall continuity makes the normal velocity's normal gradient
zero (its tangential derivatives vanish along the wall), so the viscous
flux of the wall-normal component through the wall is zero. The two-point
wall flux nu A (u_i - u_b) / delta gives it nu A (n . u_i) / delta instead,
u_i's normal part being O(delta^2): an error of the wall cells' normal
momentum that the pressure takes up at the walls, largest at a stagnation
point (Ferziger and Peric, "Computational Methods for Fluid Dynamics",
2002, take the wall's normal viscous stress as zero for this reason).
-flow_wall_normal_flux 0 drops that part, nu A / delta n n^T (u_i - u_b)
taken back explicitly on every wall face, in the forces too. Neither
scheme drops it by default: with the consistent scheme's walls'
zero-normal-gradient pressure equations the DFG cylinders' delta_p moves
from below the reference to above it, and on their finest meshes further
from it (BENCHMARKS.md).

With Crank-Nicolson diffusion the symmetric scheme's face velocities take
the pressure guess through the face gradient on each face's implicit share
(-flow_implicit_rhie_chow, plugin.flow.integrator): without it steps far
past the explicit limit blow up on tetrahedra. The consistent scheme leaves
it off: its corrections blow up at such steps either way, and with it its
lift on the DFG cylinder came out further off (BENCHMARKS.md).
"""

from dataclasses import dataclass


SCHEMES = ("symmetric", "consistent")
GRADIENTS = ("green-gauss", "least-squares")
WALL_PRESSURE_GRADIENTS = ("zero", "interior")  # a least-squares pressure gradient's walls (least_squares.py)
MEMORY_BETAS = ("fourier", "damping")  # the face memory's share (plugin.flow.integrator)


@dataclass(frozen=True)
class Scheme:
    """The parts of a discretisation, each an option of its own (-flow_gradient,
    -flow_wall_pressure_gradient, -flow_nonorthogonal, -flow_pressure_nonorthogonal, -flow_skewness,
    -flow_convection_skewness, -flow_face_memory, -flow_face_memory_beta, -flow_implicit_rhie_chow,
    -flow_wall_normal_flux) so
    that what each buys can
    be measured."""

    gradient: str = "green-gauss"
    wall_pressure_gradient: str = "zero"
    diffusion_correction: bool = False
    pressure_correction: bool = False
    skewness_correction: bool = False
    convection_correction: bool = False
    pressure_correctors: int = 0
    face_memory: bool = False
    memory_beta: str = "fourier"
    implicit_rhie_chow: bool = True
    wall_normal_flux: bool = True  # the two-point viscous flux of the wall-normal velocity through no-slip walls
    les: str = "none"  # the subgrid model (plugin.flow.les), whose eddy viscosity adds to D's

    @property
    def velocity_gradients(self):
        """Whether a step needs cell gradients of the velocity."""
        return (self.diffusion_correction or self.skewness_correction or self.convection_correction
                or self.les != "none")


PARTS = {
    "symmetric": Scheme(),
    "consistent": Scheme("least-squares", diffusion_correction=True, pressure_correction=True,
                         skewness_correction=True, face_memory=True, implicit_rhie_chow=False),
}
# The scheme part each option sets: option attribute -> Scheme field.
OPTION_PARTS = {"gradient": "gradient", "wall_pressure_gradient": "wall_pressure_gradient",
                "nonorthogonal": "diffusion_correction",
                "pressure_nonorthogonal": "pressure_correction", "skewness": "skewness_correction",
                "convection_skewness": "convection_correction",
                "pressure_correctors": "pressure_correctors", "face_memory": "face_memory",
                "face_memory_beta": "memory_beta",
                "implicit_rhie_chow": "implicit_rhie_chow", "wall_normal_flux": "wall_normal_flux", "les": "les"}


def part_default(attr, scheme_name):
    """The default of the option ``attr`` (of OPTION_PARTS) under scheme ``scheme_name``."""
    return getattr(PARTS[scheme_name], OPTION_PARTS[attr])
