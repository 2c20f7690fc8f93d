"""Cell gradients exact for linear fields on any cell: weighted least
squares over a cell's face neighbours and boundary faces (Syrakos, Varchola,
Thomas, Theodoropoulos, "A critical analysis of some popular methods for the
discretisation of the gradient operator in finite volume methods", Physics
of Fluids 29, 2017). The Green-Gauss gradient of the symmetry-preserving
scheme, -Omega^-1 M^T, is not: on tetrahedra it is off by tens of per cent.

Each neighbour j of cell i gives an equation d . g_i = phi_j - phi_i
(d from centroid to centroid), each boundary face whose value is given
(a Dirichlet face) r . g_i = phi_b - phi_i (r from the centroid to the
face's), each face where the normal gradient is zero (delta n) . g_i = 0;
every equation weighted by 1 / |d|^2, so that only directions count. On a
uniform box this is the central difference, and Green-Gauss's to rounding.

A pressure's normal gradient at a wall is not zero (it balances the
viscous and body forces there), and an equation that says so makes the
wall cells' gradients, and with them the pressure, first order (Beltrami
on tetrahedra: the wall layer's error converging at about 1). So with
``free_where_needed`` a cell takes its zero-normal-gradient equations only
where its other equations leave some direction ill-determined (a cell in
a corner: the smallest eigenvalue of its normal matrix without them below
NEEDED of its largest), or where every face of it is orthogonal (n along
d, and along r at its boundary faces: a box's cell, where with them least
squares is the Green-Gauss gradient of the symmetric scheme, which boxes
keep).
"""

import numpy

from gpu_mats.backend import array_module, to_host

from .faces import csr
from .mesh import MeshError

# The smallest eigenvalue of a cell's normal matrix over its largest below
# this: its neighbours do not span every direction (all on a line or a plane).
SINGULAR = 1e-8
# Cells whose normal matrices go to the batched eigensolver at once: cuSOLVER
# refuses a batch of a few million (its workspace's size overflows).
BATCH = 1 << 18
# A cell's zero-normal-gradient equations are kept (free_where_needed) where
# without them its normal matrix's smallest eigenvalue is below this much of
# its largest.
NEEDED = 0.1
# A face is orthogonal where n differs from d / (n . d) by less than this.
ORTHOGONAL = 1e-9


class GradientError(MeshError):
    """A cell whose neighbours leave its least-squares gradient undetermined."""


def least_squares_gradient(g, h, pattern, fixed, free, free_where_needed=False):
    """(G, S): the gradient g = G phi + S phi_b of the rank's cells, G stacked
    (dim blocks of rows, one per direction) on ``pattern``'s sparsity with
    global columns, S (dim n, len(fixed)) the part of the values phi_b of the
    boundary faces ``fixed`` (faces.BoundaryFaces, in ``pattern``'s array
    module); ``free`` holds the boundary faces of zero normal gradient, whose
    equations, with ``free_where_needed``, only the cells that need them take
    (the module's docstring)."""
    xp = pattern.xp
    n, dim = g.num_cells, g.dim
    rows, equations = xp.concatenate((h.row, fixed.row)), xp.concatenate((h.across, fixed.reach))
    free_rows, free_equations = free.row, free.distance[:, None] * free.normal
    weights, free_weights = (1.0 / (e * e).sum(axis=1) for e in (equations, free_equations))
    normal = _normal_matrices(rows, equations, weights, n, dim, xp)
    if free_where_needed:
        needed = _free_needed(normal, h, free, xp)
        free_rows, free_equations, free_weights = free_rows[needed], free_equations[needed], free_weights[needed]
    normal += _normal_matrices(free_rows, free_equations, free_weights, n, dim, xp)
    rows, equations = xp.concatenate((rows, free_rows)), xp.concatenate((equations, free_equations))
    weights = xp.concatenate((weights, free_weights))
    _check(g, normal)
    coefficients = xp.einsum("kab,kb->ka", xp.linalg.inv(normal)[rows], weights[:, None] * equations)
    interior, given = coefficients[:len(h.row)], coefficients[len(h.row):len(h.row) + len(fixed.row)]
    blocks = [pattern.values(interior[:, d], -xp.bincount(h.row, interior[:, d], n)
                             - xp.bincount(fixed.row, given[:, d], n)) for d in range(dim)]
    columns = xp.arange(len(fixed.row))
    source = csr(given.T.ravel(), xp.concatenate([d * n + fixed.row for d in range(dim)]), xp.tile(columns, dim),
                 (dim * n, len(fixed.row)))
    return pattern.stacked(blocks), source


def _normal_matrices(rows, equations, weights, n, dim, xp):
    """(n, dim, dim): each cell's sum of w e e^T over its equations e."""
    return xp.stack([xp.stack([xp.bincount(rows, weights * equations[:, a] * equations[:, b], n)
                               for b in range(dim)], axis=-1) for a in range(dim)], axis=-2)


def _free_needed(normal, h, free, xp):
    """Which of the ``free`` faces' equations their cells need: where the
    cell's other equations (their normal matrices ``normal``) leave a
    direction ill-determined, or where every face of the cell is orthogonal."""
    n = len(normal)
    cells = xp.unique(free.row)
    eigenvalues = _eigenvalues(normal[cells])
    ill = xp.zeros(n, dtype=bool)
    ill[cells] = ~(eigenvalues[:, 0] > NEEDED * eigenvalues[:, -1])
    skew = h.outward - h.across / h.distance[:, None]
    skew_b = free.normal - free.reach / free.distance[:, None]
    oblique = xp.bincount(h.row, ((skew * skew).sum(axis=1) > ORTHOGONAL**2).astype(float), n)
    oblique += xp.bincount(free.row, ((skew_b * skew_b).sum(axis=1) > ORTHOGONAL**2).astype(float), n)
    return (ill | (oblique == 0))[free.row]


def _eigenvalues(normal):
    """Each normal matrix's eigenvalues, ascending, in BATCH cells at a time (in normal's array module)."""
    xp = array_module(normal)
    if not len(normal):
        return xp.zeros(normal.shape[:2])
    return xp.concatenate([xp.linalg.eigvalsh(normal[start:start + BATCH]) for start in range(0, len(normal), BATCH)])


def _check(g, normal):
    """A clear error naming the first cell whose normal matrix is singular."""
    if not len(normal):
        return
    eigenvalues = to_host(array_module(normal), _eigenvalues(normal))
    ratio = eigenvalues[:, 0] / numpy.maximum(eigenvalues[:, -1], numpy.finfo(float).tiny)
    bad = numpy.flatnonzero(~(ratio > SINGULAR))
    if len(bad):
        cell = int(bad[0])
        raise GradientError(
            f"cell {int(g.cell_numbers[cell])} (centroid {numpy.array2string(g.centroids[cell], precision=6)}) and "
            f"{len(bad) - 1} more: the least-squares gradient is undetermined, its neighbours and boundary faces "
            "span no full set of directions (all on a line or a plane); -flow_gradient green-gauss takes such cells")
