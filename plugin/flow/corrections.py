"""The consistent scheme's corrections of the two-point face terms, each a
sparse matrix applied to cell gradients (plugin.flow.least_squares), rows of
the rank's own cells or flux faces, global stacked columns.

On a face whose normal n is not along the line d between its cells'
centroids, (phi_1 - phi_0) / delta (delta = n . d) is the normal gradient
only up to (n - d / delta) . grad phi, and Gamma's interpolation gives the
velocity at a point of that line, x_0 + (1 - w) d (its weights, w on cell 0,
keep the symmetric scheme's projection stable; the face cuts the line at
x_0 + w d), off the face's centroid by s; both corrections make the face
terms exact for linear fields (Jasak, PhD thesis, Imperial College 1996; the
pressure's as OpenFOAM's corrected snGrad, deferred). Gradients are
interpolated to the face linearly: 1 - w on cell 0, w on cell 1. A box has n
along d, w = 1/2 and s = 0: every correction is zero.

Gradients are stacked per rank as (component, direction, cell): the
pressure's dim blocks, a velocity's dim * dim (faces.stacked_index).
"""

from .faces import csr, own_faces, stacked_index


def _columns(g, index, components, cells):
    return stacked_index(g.cell_ranges, index, components, cells)


def pressure_face_correction(g, f, out, xp):
    """(faces, dim n) T: (n - d / delta) . ((1 - w) grad_0 + w grad_1) on the
    interior faces, (n - r / delta) . grad_i on the outflow faces ``out``
    (r from the centroid to the face's): what Gs misses of n . grad p."""
    dim = g.dim
    rows, first, second, own = own_faces(g, f, xp)
    normals, offsets = xp.asarray(g.face_normals)[own], xp.asarray(g.face_offsets)[own]
    distances, weights = xp.asarray(g.face_distances)[own], xp.asarray(g.face_weights)[own]
    t = normals - offsets / distances[:, None]
    t_out = out.normal - out.reach / out.distance[:, None]
    out_rows = xp.asarray(f.open_ids) - f.start
    parts = []
    for d in range(dim):
        parts += [(rows, _columns(g, d, dim, first), t[:, d] * (1 - weights)),
                  (rows, _columns(g, d, dim, second), t[:, d] * weights),
                  (out_rows, _columns(g, d, dim, out.cell), t_out[:, d])]
    return _assembled(parts, (f.count, dim * g.num_global_cells), xp)


def skewness_correction(g, f, out, xp):
    """(faces, dim^2 n) K: n . (s . grad u) with s = x_f - (x_0 + (1 - w) d) the
    face centroid's offset from where Gamma takes the velocity; on outflow
    faces s = r, the cell's gradient: Gamma + K is the normal velocity at the
    face centroid, exact for linear velocities."""
    dim = g.dim
    rows, first, second, own = own_faces(g, f, xp)
    normals, weights = xp.asarray(g.face_normals)[own], xp.asarray(g.face_weights)[own]
    skew = xp.asarray(g.face_centre_offsets)[own] - (1 - weights[:, None]) * xp.asarray(g.face_offsets)[own]
    out_rows = xp.asarray(f.open_ids) - f.start
    parts = []
    for e in range(dim):
        for d in range(dim):
            k = e * dim + d
            along = normals[:, e] * skew[:, d]
            parts += [(rows, _columns(g, k, dim * dim, first), along * (1 - weights)),
                      (rows, _columns(g, k, dim * dim, second), along * weights),
                      (out_rows, _columns(g, k, dim * dim, out.cell), out.normal[:, e] * out.reach[:, d])]
    return _assembled(parts, (f.count, dim * dim * g.num_global_cells), xp)


def _off_midpoint(g, own, xp):
    """s = x_f - (x_0 + d / 2) of the faces ``own``: each centroid's offset from the midpoint of its cells'."""
    return xp.asarray(g.face_centre_offsets)[own] - 0.5 * xp.asarray(g.face_offsets)[own]


def convection_correction(g, f, xp):
    """(dim faces, dim^2 n) Kc: row (e, face) s . ((1 - w) grad u_e,0 + w
    grad u_e,1) with s = x_f - (x_0 + d / 2), the face centroid's offset from
    the midpoint of the centroids where C(u_s) takes the convected velocity
    (u_0 + u_1) / 2: C u + Ms (u_s Kc grad u) is the flux of the velocity at
    the face centroids, exact for linear velocities (the flow caps u_s in
    it: convection_cap). The outflow faces keep their cell's velocity
    (upwind), as C does."""
    dim = g.dim
    rows, first, second, own = own_faces(g, f, xp)
    weights, skew = xp.asarray(g.face_weights)[own], _off_midpoint(g, own, xp)
    parts = []
    for e in range(dim):
        for d in range(dim):
            k = e * dim + d
            parts += [(e * f.count + rows, _columns(g, k, dim * dim, first), skew[:, d] * (1 - weights)),
                      (e * f.count + rows, _columns(g, k, dim * dim, second), skew[:, d] * weights)]
    return _assembled(parts, (dim * f.count, dim * dim * g.num_global_cells), xp)


def convection_cap(g, f, nu, xp):
    """nu / |s| on the rank's flux faces (inf where s = 0, outflow faces
    too): the largest face velocity the convection correction takes. Its
    symmetric part is an anti-diffusion of about |u_s| |s| across each face;
    capped so, it stays below the face's own diffusion nu, and the cap lifts
    as the mesh is refined (|s| is O(h)): a cell-Peclet limiter, as
    OpenFOAM's limited corrections bound theirs by the orthogonal part."""
    rows, _, _, own = own_faces(g, f, xp)
    skew = _off_midpoint(g, own, xp)
    offset = xp.zeros(f.count)
    offset[rows] = xp.sqrt((skew * skew).sum(axis=1))
    cap = xp.full(f.count, xp.inf)
    skewed = offset > 0
    cap[skewed] = nu / offset[skewed]
    return cap


def diffusion_correction(g, h, held, xp):
    """(dim n, dim^2 n) T: for each velocity component, the flux
    sum_f A_f (n - d / delta) . ((1 - w) grad_i + w grad_j) out of cell i over
    its interior faces, and A_b (n - r / delta_b) . grad_i over the faces
    ``held`` (walls, inflows): what the two-point diffusion misses of
    sum A n . grad u (times -nu, the deferred correction)."""
    dim, n = g.dim, g.num_cells
    t = h.outward - h.across / h.distance[:, None]
    t_held = held.normal - held.reach / held.distance[:, None]
    parts = []
    for e in range(dim):
        for d in range(dim):
            k = e * dim + d
            parts += [(e * n + h.row, _columns(g, k, dim * dim, h.cell), h.area * t[:, d] * (1 - h.weight)),
                      (e * n + h.row, _columns(g, k, dim * dim, h.other), h.area * t[:, d] * h.weight),
                      (e * n + held.row, _columns(g, k, dim * dim, held.cell), held.area * t_held[:, d])]
    return _assembled(parts, (dim * n, dim * dim * g.num_global_cells), xp)


def _assembled(parts, shape, xp):
    rows, columns, values = zip(*parts, strict=True)
    return csr(xp.concatenate(values), xp.concatenate(rows), xp.concatenate(columns), shape)
