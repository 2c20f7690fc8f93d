"""The operators of the collocated, symmetry-preserving finite-volume scheme
(Oyarzún 2015, sections 1.1 and 1.2; docs/references.md), as the rows one rank owns of sparse
matrices with global column numbers, built from a geometry and a boundary
condition per boundary group (plugin.flow.boundary).

Unknowns: cell velocities u_c (one vector per component, stacked component by
component on each rank: [u_x, u_y, u_z] of the rank's cells) and pressures,
and the normal velocities u_s of the flux faces: the interior faces (positive
from face_cells[:, 0] to face_cells[:, 1]) and the outflow faces (positive
out of the domain), numbered by FluxFaces. Walls and slip faces carry no
normal velocity; inflow faces carry a given one, a source.

  Ms      faces -> cells     [Ms u_s]_i = sum of A_f u_s,f out of cell i
  Gamma   cells^d -> faces   n_f . (w u_i + (1 - w) u_j) on interior faces, n_f . u_i
                             on outflow faces: the velocity projected on the face,
                             w = n_f . (x_f - x_i) / delta_f the distance of cell
                             i's centroid to the face over delta_f (1/2 on a box).
                             The projection's cell correction u -= Omega^-1 M^T A^-1 M u
                             then scales a mode by 1 - lambda, lambda at most the
                             largest eigenvalue of sum_f A_f delta_if n n^T / Omega_i
                             (delta_if = w delta_f), whose trace is d for every cell
                             (the divergence theorem for x - x_i; 1 in each direction
                             on a box). With 1/2 a small cell among larger ones had
                             lambda = 2.196 on gmsh's tetrahedra of the 3D cylinder
                             and every flow there blew up in ~60 steps; with w the
                             spectral radius of that correction is 1.000 there
  Gs      cells -> faces     (p_j - p_i) / delta_f; on outflow faces (p_b - p_i) / delta_f
                             with the given p_b (its part a source, outflow_pressure)
  G       cells -> cells^d   -Omega^-1 M^T with M = Ms Gamma (the divergence of
                             collocated velocities): the cell gradient, in which a
                             wall's pressure is its cell's and an outflow's p_b
                             (the source outflow_pressure["gradient"])
  L       Ms Gs, the compact pressure Laplacian: symmetric, negative
          semidefinite, with the constant null space only where no outflow
          holds the pressure (Oyarzún 2015, eq. 1.7)
  D       -nu (L_interior - Dirichlet faces): diffusion, symmetric positive
          definite where walls or inflows hold the velocity; Neumann at outflow
          and slip faces. Their velocities enter boundary_values.
  normal_term  (dim n) x (dim n), nu A_f / delta_f n n^T on each slip face's cell: the
          normal velocity held at zero there, the tangential free (no shear);
          minus the same on each wall face's cell without its normal flux
          (scheme.wall_normal_flux False: D's wall flux then the tangential
          velocity's alone); symmetric, applied explicitly
  E_C     faces -> values of C(u_s) in the CSR order of L's pattern (eq. 2.10):
          [C u]_i = sum_f F_f (u_i + u_j) / 2 over interior faces, F_f = A_f u_s,f
          out of i, plus F_b u_i over outflow faces. So C + C^T = diag(Ms u_s) +
          diag(outflow fluxes): where Ms u_s + inflow fluxes = 0 that is the
          diagonal of |F| through inflow and outflow faces, skew-symmetric
          (C + C^T = 0) without them (the flow's kinetic energy leaves through
          open boundaries, never enters)
  flux_rate  faces -> cells  sum_f A_f |u_s,f| / (2 Omega_i) for |u_s|: the
          convective CFL number per unit time step
  G, with -flow_scheme consistent (scheme.gradient "least-squares"): the
          least-squares gradient (plugin.flow.least_squares), a wall's normal
          pressure gradient zero, an outflow's p_b given (_outflow_gradient its part)
  velocity_gradient  cells -> cells^d  the gradient of one velocity component
          for the corrections: least squares with the velocity held on walls and
          inflows (velocity_gradient_source: the part of those values), zero
          normal gradient across outflows and slip faces; or G with a velocity's
          boundary values (0 on walls at rest, the cell's elsewhere)
  held_difference  cells^d -> cells^d  velocity_gradient less the least-squares gradient with every
          boundary face free (zero normal gradient), on the rows of boundary cells: applied to G q*, it
          gives u^p's interpolation the held velocities of u^p + G q* (about u^{n+1}), not of u^p, which
          differs from them at walls by G q (plugin.flow.integrator); with the skewness correction
          and -flow_wall_pressure_gradient interior
  diffusion_correction, pressure_correction, skewness_correction, convection_correction  the corrections
          of the consistent scheme's parts (plugin.flow.corrections); None where off
  face_pairs  cells -> faces  x_i + x_j of each flux face's cells i and j (2 x_i on an outflow
          face), for the face memory's damping rates (plugin.flow.integrator); None without them

Every matrix is assembled from the rank's half-faces (a face seen from one of
its cells that the rank owns), so no rank needs another's geometry. The
assembly runs on the arrays of ``xp``: NumPy and scipy.sparse on the host,
or CuPy and cupyx.scipy.sparse on the GPU (the same calls); the matrices
come out in that module. The few boundary faces stay on the host.
"""

from dataclasses import dataclass

import numpy
import scipy.sparse

from gpu_mats.backend import array_module, sparse_module, to_host
from gpu_mats.sell import entry_rows

from .boundary import Inflow, Outflow, Slip, Wall
from . import corrections
from .faces import BoundaryFaces, CellPattern, HalfFaces, csr, own_faces, stacked_index
from .least_squares import least_squares_gradient
from .scheme import Scheme


def host_matrix(matrix):
    """A scipy CSR matrix of ``matrix`` (scipy or cupyx)."""
    return matrix if isinstance(matrix, scipy.sparse.spmatrix) else matrix.get()


@dataclass(eq=False)
class FluxFaces:
    """The faces with a normal velocity unknown: interior faces and outflow
    faces, numbered rank by rank (a rank's interior faces in the geometry's
    numbering, then its outflow faces in the geometry's boundary order).

    ranges (ranks + 1,); ids (F,): the number of each of the geometry's
    faces; open (K,): which of the rank's boundary faces are outflow faces,
    open_ids (K,) their numbers."""

    ranges: numpy.ndarray
    rank: int
    ids: numpy.ndarray
    open: numpy.ndarray
    open_ids: numpy.ndarray

    @classmethod
    def of(cls, g, open_tags):
        tags = list(open_tags)
        per_rank = g.boundary_counts[:, tags].sum(axis=1) if tags else numpy.zeros(g.num_ranks, dtype=numpy.int64)
        before = numpy.concatenate(([0], numpy.cumsum(per_rank)))  # outflow faces of the lower ranks
        owner = numpy.searchsorted(g.face_ranges, g.face_ids, side="right") - 1
        ranges = g.face_ranges + before
        open_faces = numpy.flatnonzero(numpy.isin(g.boundary_tags, tags))
        open_ids = ranges[g.rank] + g.num_faces + numpy.arange(len(open_faces))
        return cls(ranges, g.rank, g.face_ids + before[owner], open_faces, open_ids)

    @property
    def start(self):
        return int(self.ranges[self.rank])

    @property
    def count(self):
        """Faces this rank owns."""
        return int(self.ranges[self.rank + 1] - self.ranges[self.rank])

    @property
    def total(self):
        return int(self.ranges[-1])


class FlowOperators:
    """The rank's rows of the operators of one geometry, viscosity and set of boundary conditions."""

    def __init__(self, geometry, nu, boundary_conditions, xp=numpy, scheme=Scheme()):
        """``boundary_conditions``: {tag: condition} for every boundary tag
        (plugin.flow.boundary); ``xp``: where to assemble (numpy or cupy);
        ``scheme``: the discretisation's parts (plugin.flow.scheme)."""
        g = geometry
        n, dim = g.num_cells, g.dim
        self.geometry, self.nu, self.dim, self.volumes, self.xp = g, nu, dim, g.volumes, xp
        self._volumes = xp.asarray(g.volumes)
        self.conditions, self.scheme = boundary_conditions, scheme

        def tags_of(*kinds):
            return [tag for tag, condition in boundary_conditions.items() if isinstance(condition, kinds)]

        def faces_of(tags):
            return BoundaryFaces.of(g, numpy.flatnonzero(numpy.isin(g.boundary_tags, tags)))

        self.open_tags = tags_of(Outflow)  # the groups where an outflow holds the pressure
        self.faces = f = FluxFaces.of(g, self.open_tags)
        self.has_outflow = bool(f.ranges[-1] > g.num_global_faces)
        h = HalfFaces.of(g, f.ids, xp)
        out_host = faces_of(self.open_tags)
        out, open_ids = out_host.on(xp), xp.asarray(f.open_ids)
        self.open_faces = f.open_ids - f.start  # the outflow faces among the rank's faces
        both = xp.concatenate
        self.Ms = csr(both((h.sign * h.area, out.area)), both((h.row, out.row)), both((h.face, open_ids)),
                       (n, f.total))
        pattern = CellPattern(g, h)
        conductance = h.area / h.distance
        exchange = -xp.bincount(h.row, conductance, n)  # the diagonal of the interior faces' L
        self.L = pattern.matrix(conductance, exchange - xp.bincount(out.row, out.area / out.distance, n))
        self.Gamma, self.Gs, self.face_diffusion = self._face_operators(g, f, out)
        self.held = held = faces_of(tags_of(Wall, Inflow))  # the faces that hold the velocity
        if scheme.gradient == "least-squares":
            self.G, self._outflow_gradient = least_squares_gradient(
                g, h, pattern, out, faces_of(tags_of(Wall, Inflow, Slip)).on(xp),
                free_where_needed=scheme.wall_pressure_gradient == "interior")
        else:
            self.G, self._outflow_gradient = self._gradient(pattern, h, out), None
        self.velocity_gradient, self.velocity_gradient_source, self.held_difference = None, None, None
        if scheme.velocity_gradients and scheme.gradient == "least-squares":
            # held on walls and inflows, zero normal gradient across outflows and slip faces
            self.velocity_gradient, self.velocity_gradient_source = least_squares_gradient(
                g, h, pattern, held.on(xp), faces_of(tags_of(Outflow, Slip)).on(xp))
            if scheme.skewness_correction and scheme.wall_pressure_gradient == "interior":
                # every boundary face free: the gradient of G q*, which holds no boundary value
                free, _ = least_squares_gradient(g, h, pattern, faces_of([]).on(xp),
                                                 faces_of(list(boundary_conditions)).on(xp))
                self.held_difference = _difference(self.velocity_gradient, free)
        elif scheme.velocity_gradients:
            # no slip on walls at rest, none across outflows; the cell's value on inflow, moving-wall and
            # slip faces (their given velocities would be sources)
            at_rest = [tag for tag, c in boundary_conditions.items() if isinstance(c, Wall) and c.velocity is None]
            self.velocity_gradient = self._gradient(pattern, h, out, faces_of(at_rest).on(xp))
        walls = xp.asarray(numpy.bincount(held.row, held.area / held.distance, n))
        self.D = pattern.matrix(-nu * conductance, nu * (walls - exchange))
        # nu A / delta n n^T: added on slip faces; taken back on walls without their normal flux (scheme.py)
        normal_terms = [(tags_of(Slip), 1.0), ([] if scheme.wall_normal_flux else tags_of(Wall), -1.0)]
        normal_terms = [(faces_of(tags).on(xp), sign) for tags, sign in normal_terms if tags]
        self.normal_term = self._normal_term(g, normal_terms) if normal_terms else None  # the same on every rank
        self.E_C = self._convection_map(pattern, h, out, f.total)
        self.eddy_diffusion = self.eddy_rate = None
        if scheme.les != "none":
            self.eddy_diffusion = self._eddy_diffusion_map(pattern, h, conductance)
            # each cell's D_ii / Omega_i from the eddy viscosities: the explicit limit they set
            half = conductance / 2 / self._volumes[h.row]
            self.eddy_rate = csr(xp.concatenate((half, half)), xp.concatenate((h.row, h.row)),
                                 xp.concatenate((h.cell, h.other)), (n, g.num_global_cells))
        self.flux_rate = csr(both((h.area, out.area)) / (2 * self._volumes[both((h.row, out.row))]),
                              both((h.row, out.row)), both((h.face, open_ids)), (n, f.total))
        self._inflow = numpy.isin(g.boundary_tags[held.index], tags_of(Inflow))
        self.boundary_steady = all(getattr(c, "steady", True) for c in boundary_conditions.values())
        self.boundary_to_cells = csr(numpy.ones(len(held.row)), held.row, numpy.arange(len(held.row)),
                                      (n, len(held.row)))
        self.outflow_pressure = self._outflow_pressure(g, f, out_host)
        self.diffusion_correction = (corrections.diffusion_correction(g, h, held.on(xp), xp)
                                     if scheme.diffusion_correction else None)
        self.pressure_correction = (corrections.pressure_face_correction(g, f, out, xp)
                                    if scheme.pressure_correction else None)
        self.skewness_correction = (corrections.skewness_correction(g, f, out, xp)
                                    if scheme.skewness_correction else None)
        self.convection_correction = (corrections.convection_correction(g, f, xp)
                                      if scheme.convection_correction else None)
        self.convection_cap = corrections.convection_cap(g, f, nu, xp) if scheme.convection_correction else None
        self.face_pairs = (self._face_pairs(g, f, out) if scheme.face_memory and scheme.memory_beta == "damping"
                           else None)

    @property
    def num_faces(self):
        """Flux faces this rank owns (the length of its part of u_s)."""
        return self.faces.count

    def _gradient(self, pattern, h, out, zero=None):
        """G = -Omega^-1 M^T, row (d, i) from the half-faces of cell i:
        [G_d p]_i = sum_f w_f A_f n_f,d (p_j - p_i) / Omega_i - sum_b A_b n_b,d p_i / Omega_i,
        n out of i, w_f cell i's weight in Gamma, f over interior faces, b over
        outflow faces: Green-Gauss with the face values p_i + w_f (p_j - p_i)
        (linear along the line of the centroids), 0 at outflows (p_b is a
        source) and p_i at other boundary faces. With ``zero`` (boundary faces)
        instead a velocity's: u_i at outflows and 0 on those faces (walls at rest).
        Each block G_d is on L's pattern, its zeros (a box's faces along other axes) dropped."""
        n, xp = self.geometry.num_cells, self.xp
        blocks = []
        for d in range(self.dim):
            weight = h.weight * h.area * h.outward[:, d] / self._volumes[h.row]
            held = out if zero is None else zero
            diagonal = (-xp.bincount(h.row, weight, n)
                        - xp.bincount(held.row, held.area * held.normal[:, d], n) / self._volumes)
            blocks.append(pattern.values(weight, diagonal))
        return pattern.stacked(blocks)

    def _face_operators(self, g, f, out):
        """Gamma and Gs on the flux faces this rank owns, Gamma's column (d, cell) in the stacked numbering;
        and nu / delta^2 on those faces (dt times it is a face's diffusion number, the face memory's)."""
        xp = self.xp
        rows, first, second, own = own_faces(g, f, xp)
        normals, weight = xp.asarray(g.face_normals), xp.asarray(g.face_weights)[own]
        out_rows = xp.asarray(f.open_ids) - f.start
        gamma_rows, gamma_cols, gamma_values = [], [], []
        for d in range(self.dim):
            for r, c, v in ((rows, first, normals[own, d] * weight), (rows, second, normals[own, d] * (1 - weight)),
                            (out_rows, out.cell, out.normal[:, d])):
                on = v != 0
                gamma_rows.append(r[on])
                gamma_cols.append(stacked_index(g.cell_ranges, d, self.dim, c[on]))
                gamma_values.append(v[on])
        Gamma = csr(xp.concatenate(gamma_values), xp.concatenate(gamma_rows), xp.concatenate(gamma_cols),
                     (f.count, self.dim * g.num_global_cells))
        inverse = 1.0 / xp.asarray(g.face_distances)[own]
        Gs = csr(xp.concatenate((inverse, -inverse, -1.0 / out.distance)), xp.concatenate((rows, rows, out_rows)),
                  xp.concatenate((second, first, out.cell)), (f.count, g.num_global_cells))
        diffusion = xp.zeros(f.count)
        diffusion[rows] = self.nu * inverse**2
        diffusion[out_rows] = self.nu / out.distance**2
        return Gamma, Gs, diffusion

    def _face_pairs(self, g, f, out):
        """faces <- cells: x_i + x_j on each interior flux face of cells i and j,
        2 x_i on an outflow face of cell i (the face memory's diffusion rate of
        the mode its two cells make, from each cell's D_ii / Omega_i)."""
        xp = self.xp
        rows, first, second, _ = own_faces(g, f, xp)
        out_rows = xp.asarray(f.open_ids) - f.start
        return csr(xp.concatenate((xp.ones(2 * len(rows)), xp.full(len(out_rows), 2.0))),
                   xp.concatenate((rows, rows, out_rows)), xp.concatenate((first, second, out.cell)),
                   (f.count, g.num_global_cells))

    def _normal_term(self, g, faces):
        """sign nu A / delta n n^T on each face's cell, stacked numbering, for each (BoundaryFaces, sign) of
        ``faces``."""
        rows, cols, values = [], [], []
        for held, sign in faces:
            for d in range(self.dim):
                for e in range(self.dim):
                    rows.append(stacked_index(g.cell_ranges, d, self.dim, held.cell) - self.dim * g.cell_start)
                    cols.append(stacked_index(g.cell_ranges, e, self.dim, held.cell))
                    values.append(sign * self.nu * held.area / held.distance * held.normal[:, d] * held.normal[:, e])
        xp = self.xp
        return csr(xp.concatenate(values), xp.concatenate(rows), xp.concatenate(cols),
                    (self.dim * g.num_cells, self.dim * g.num_global_cells))

    def _convection_map(self, pattern, h, out, faces):
        """E_C: face velocities -> values of C in the CSR order of L's pattern (eq. 2.13:
        each half-face puts A_f / 2 on the entries (i, j) and (i, i) of its cell's row,
        an outflow face A_f on (i, i))."""
        xp = self.xp
        half = h.sign * h.area / 2
        entries = xp.concatenate((pattern.off, pattern.diagonal[h.row], pattern.diagonal[out.row]))
        return csr(xp.concatenate((half, half, out.area)), entries,
                    xp.concatenate((h.face, h.face, xp.asarray(self.faces.open_ids))), (pattern.nnz, faces))

    def _eddy_diffusion_map(self, pattern, h, conductance):
        """E_D: the cells' eddy viscosities -> what they add to D's values, in
        the CSR order of L's pattern (Oyarzún 2015, eq. 2.11): an interior face
        f between cells i and j takes nu_t,f = (nu_t,i + nu_t,j) / 2, which
        puts -A_f / delta_f nu_t,f on (i, j) and A_f / delta_f nu_t,f on (i, i).
        Walls keep nu alone (the eddy viscosity vanishes there); outflows have
        no diffusion term."""
        xp = self.xp
        half = conductance / 2
        entries = xp.concatenate((pattern.off, pattern.off, pattern.diagonal[h.row], pattern.diagonal[h.row]))
        return csr(xp.concatenate((-half, -half, half, half)), entries, xp.concatenate((h.cell, h.other) * 2),
                   (pattern.nnz, self.geometry.num_global_cells))

    def _outflow_pressure(self, g, f, out):
        """The parts of Gs and G that the outflow pressures p_b give, for p_b = 1 x the
        group's value: {"faces": p_b / delta_b on the rank's flux faces, "gradient": (dim, n)
        A_b n_b p_b / Omega_i}; None where every outflow pressure is 0 (on every rank alike)."""
        if not any(isinstance(c, Outflow) and c.pressure for c in self.conditions.values()):
            return None
        pressure = numpy.array([self.conditions[tag].pressure for tag in g.boundary_tags[out.index].tolist()])
        faces = numpy.zeros(f.count)
        faces[self.open_faces] = pressure / out.distance
        if self._outflow_gradient is not None:  # least squares: the gradient's part of the given values
            gradient = to_host(self.xp, self._outflow_gradient @ self.xp.asarray(pressure)).reshape(self.dim, -1)
        else:
            gradient = numpy.array([numpy.bincount(out.row, out.area * out.normal[:, d] * pressure, g.num_cells)
                                    for d in range(self.dim)]) / g.volumes
        return {"faces": faces, "gradient": gradient}

    def boundary_values(self, t, velocity=None):
        """At time t, for each face that holds the velocity (walls, inflows; the
        columns of boundary_to_cells): (dim + 1, K), rows 0..dim-1 what it adds to
        its cell's momentum source, nu A / delta u_b - F u_b with F = A u_b . n
        the flux out of the cell (0 on walls), and row dim that flux;
        ``velocity``: boundary_velocity(t) where the caller has it."""
        held = self.held
        velocity = self.boundary_velocity(t) if velocity is None else velocity
        flux = numpy.where(self._inflow, held.area * numpy.einsum("ij,ij->i", velocity, held.normal), 0.0)
        source = (self.nu * held.area / held.distance - flux)[:, None] * velocity
        return numpy.vstack((source.T, flux))

    def boundary_velocity(self, t):
        """(K, dim): the velocity at time t of each face that holds it (the columns of boundary_to_cells)."""
        held, g = self.held, self.geometry
        velocity = numpy.empty((len(held.row), self.dim))
        tags = g.boundary_tags[held.index]
        for tag in numpy.unique(tags).tolist():
            at = tags == tag
            velocity[at] = self.conditions[tag].velocity_at(g.boundary_centroids[held.index[at]], t)
        return velocity

    def momentum_source(self, t):
        """(dim, n): the boundary's momentum source at time t, per cell."""
        return (self.boundary_to_cells @ self.boundary_values(t)[:self.dim].T).T

    def inflow_flux(self, t):
        """(n,): the given flux out of each cell through inflow faces at time t (negative where it flows in)."""
        return self.boundary_to_cells @ self.boundary_values(t)[self.dim]

    def convection(self, u_s):
        """C(u_s) on L's pattern (CSR of the rank's rows, in the assembly's module), from
        the face velocities this rank's rows need, indexed by global face number
        (serial: all of them)."""
        return sparse_module(self.xp).csr_matrix((self.E_C @ u_s, self.L.indices, self.L.indptr), shape=self.L.shape)

    def cell_diffusion_rates(self):
        """D_ii / Omega_i of the rank's cells (nu's; walls and inflows included), in the operators' module."""
        return self.D.diagonal(self.geometry.cell_start) / self._volumes

    def diffusion_rate(self):
        """max_i (D_ii + N_ii) / Omega_i over the rank's cells (N the normal term): the explicit diffusion
        step limit is about 1 / this."""
        g, xp = self.geometry, self.xp
        rates = to_host(xp, self.cell_diffusion_rates())
        if self.normal_term is not None:
            normal = to_host(xp, self.normal_term.diagonal(self.dim * g.cell_start))
            rates = rates + normal.reshape(self.dim, -1).max(axis=0) / self.volumes
        return float(rates.max(initial=0.0))


def _difference(a, b):
    """a - b of two CSR matrices, from their triplets, its zeros dropped
    (cupyx's own subtraction lost entries of these matrices)."""
    xp = array_module(a.data)
    left, right = a.tocoo(), b.tocoo()
    summed = csr(xp.concatenate((left.data, -right.data)), xp.concatenate((left.row, right.row)),
                 xp.concatenate((left.col, right.col)), a.shape)
    rows = entry_rows(xp, summed.indptr)
    keep = summed.data != 0
    return csr(summed.data[keep], rows[keep], summed.indices[keep], a.shape)


def compact_laplacian(geometry, open_tags=()):
    """L = Ms Gs, the rank's rows: [L p]_i = sum_f (A_f / delta_f) (p_j - p_i)
    (Oyarzún 2015, eq. 1.7), with global column numbers; the boundary faces
    of ``open_tags`` (outflows) hold p = 0: -A_b / delta_b on the diagonal."""
    g = geometry
    h = HalfFaces.of(g)
    out = BoundaryFaces.of(g, numpy.flatnonzero(numpy.isin(g.boundary_tags, list(open_tags))))
    conductance = h.area / h.distance
    diagonal = -numpy.bincount(h.row, conductance, g.num_cells) - numpy.bincount(out.row, out.area / out.distance,
                                                                                 g.num_cells)
    return CellPattern(g, h).matrix(conductance, diagonal)
