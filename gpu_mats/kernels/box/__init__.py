"""The flow's face operators on a box of equal cells on one rank, applied
from the grid instead of read from matrices (gpu_mats.box_faces holds the
grid, ``BoxGrid``, and the operators' constants). Faces are numbered axis
by axis, each cell's face on its high side along the axis where it has one,
in cell order (x fastest); vectors of every component are (dim, cells)."""


def interpolate(grid, u, w):
    """w = Gamma u: each face's (u_d of its two cells) / 2, d its axis."""


def face_gradient(grid, p, w, inverse, z=None):
    """w = Gs p (+ z): (p of a face's high cell - p of its low cell) inverse[d]."""


def face_sum(grid, w, out, scale, z=None, speeds=False):
    """out = Ms w (+ z): over each cell's faces scale[d] (w_high - w_low);
    with ``speeds``, scale[d] (|w_high| + |w_low|) (the convective rate)."""


def largest_rate(grid, w, out, scale):
    """out[0] = the largest over cells of face_sum's speeds (NaN where any is): the CFL number's rate."""


def cell_gradient(grid, p, out, scale):
    """out (dim, cells) = G p: scale[d] (p_up - p) - scale[d] (p_down - p), each term where the cell has that
    face."""


def convection(grid, w, u, out, half):
    """out (dim, cells) = C(w) u: over each cell's faces s half[d] w_f (u of the other cell + u), s = +1 on
    its high face, -1 on its low one."""


def diffusion(grid, u, out, conductance, z=None):
    """out (dim, cells) = D u (+ z): over each cell's faces along d conductance[d] (u - u of the other cell),
    2 conductance[d] u where a wall holds the face."""


def transport(grid, w, u, v, out, half, conductance):
    """out (dim, cells) = C(w) u + D v: the explicit rate's convection and diffusion in one pass."""
