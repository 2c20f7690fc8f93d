"""What a flow state exerts on a boundary group, and its pressure at points.

The force on a group is the momentum its faces take from the fluid in the
discrete momentum equations, face by face as the scheme computes it
(plugin.flow.operators): the Green-Gauss cell gradient G puts a wall face's
pressure at its cell's value, and the diffusion D has the wall flux
nu A_f (u_b - u_i) / delta_f. Summed over all cells, the interior fluxes
cancel (the scheme is conservative), so the momentum the fluid loses to the
group is

    F = sum over the group's faces of  rho (p_i n_f A_f + nu A_f (u_i - u_b) / delta_f)

with n_f the outward normal of the fluid (into the body). This is the
force consistent with the discrete balance, as the volume-integral form of
John ("Reference values for drag and lift of a two-dimensional time-dependent
flow around a cylinder", Int. J. Numer. Meth. Fluids 44, 2004) is for finite
elements; a stress integrated from reconstructed gradients is not. On a
no-slip wall nu du/dn is the whole viscous stress, n . (grad u + grad u^T)
being zero there for a divergence-free flow. With the diffusion's
non-orthogonal correction (-flow_nonorthogonal) the wall flux has its part
-nu A_f (n_f - r_f / delta_f) . grad u_i too (r_f from the centroid to the
face's); without the wall-normal flux (-flow_wall_normal_flux 0) the
two-point flux is the tangential velocity's alone, nu A_f (I - n_f n_f^T)
(u_i - u_b) / delta_f. The least-squares gradient (-flow_gradient least-squares) has no
face values: the wall's pressure is then the cell's carried to the face's
centroid along it, p_i + r_f . grad p_i, exact for a linear pressure where
p_i is first order.

Pressures at points: the cell whose centroid is nearest the point, its
pressure carried to the point along its Green-Gauss gradient (face values
the mean of the two cells', a wall's its cell's, an outflow's the given
pressure): second order on smooth meshes, where a cell value alone is first;
with the least-squares gradient (-flow_gradient least-squares) along that,
which is exact for a linear pressure on any cell.

Both are linear in the state (u, p and their cell gradients), so each is a
Functional: weights over those arrays summed by one kernel in the state's
memory, and one read back a call, where gathering the group's values and
reading each back cost a step of a host-bound run a fifth of its time.
"""

import numpy
from mpi4py import MPI

from gpu_mats.backend import to_host
from gpu_mats.kernels import family

from .boundary import Outflow, Wall


class ForceError(ValueError):
    """A group the forces cannot be taken on."""


class _Watched:
    """A Functional of each new state that a step's CUDA graph evaluates (FractionalStep.watch)."""

    def _values(self, state):
        """The rank's values on ``state``: the step's graph's copy, else evaluated now."""
        values = self.solver.stepper.watched(self.functional.out, state)
        if values is None:
            self._queue(state)
            values = self.functional.read()
        return values


def _summed(mpi, local):
    """The ranks' float64 arrays ``local`` summed, on every rank (a buffer reduction: no pickling, each step;
    on one rank none)."""
    if mpi.Get_size() == 1:
        return numpy.array(local, dtype=numpy.float64)
    total = numpy.empty_like(local, dtype=numpy.float64)
    mpi.Allreduce(numpy.ascontiguousarray(local, dtype=numpy.float64), total, op=MPI.SUM)
    return total


class GroupForce(_Watched):
    """``force(state)``: the force (dim,) of the flow on the boundary group
    ``name`` of ``solver``'s geometry, density ``rho``, summed over ranks."""

    def __init__(self, solver, name, rho=1.0):
        g = solver.geometry
        if name not in g.boundary_names:
            raise ForceError(f"no boundary group {name!r} to take forces on (groups: {', '.join(g.boundary_names)})")
        tag = g.boundary_names[name]
        condition = solver.boundary_conditions[tag]
        if not condition.holds_velocity:
            raise ForceError(f"forces are taken on walls: the group {name!r} is {condition.describe()}")
        faces = numpy.flatnonzero(g.boundary_tags == tag)
        self.solver, self.rho, self.nu = solver, rho, solver.operators.nu
        rows = g.boundary_cells[faces] - g.cell_start
        area, normal = g.boundary_areas[faces], g.boundary_normals[faces]
        self.conductance = area / g.boundary_distances[faces]
        self.centroids, self.condition = g.boundary_centroids[faces], condition
        self._steady_held = None
        reach = self.centroids - g.centroids[rows]
        ops = solver.operators
        self.extrapolated = ops.scheme.gradient == "least-squares"
        self.corrected = ops.diffusion_correction is not None
        tangential = not ops.scheme.wall_normal_flux and isinstance(condition, Wall)
        off_normal = normal - reach / g.boundary_distances[faces][:, None]  # n - r / delta
        n, dim, nu = g.num_cells, g.dim, self.nu
        terms = []  # per component d: (array, index, weight) of the rank's share of F_d
        for d in range(dim):
            pressure = rho * area * normal[:, d]
            parts = [(P, rows, pressure), (U, d * n + rows, rho * nu * self.conductance)]
            if tangential:  # u_b's normal part is zero on a wall: the held values' term needs none
                parts += [(U, e * n + rows, -rho * nu * self.conductance * normal[:, d] * normal[:, e])
                          for e in range(dim)]
            if self.extrapolated:
                parts += [(GRAD_P, e * n + rows, pressure * reach[:, e]) for e in range(dim)]
            if self.corrected:
                parts += [(GRAD_U, (d * dim + e) * n + rows, -rho * nu * area * off_normal[:, e]) for e in range(dim)]
            terms.append(parts)
        self.functional = Functional(solver.xp, terms)

        solver.stepper.watch(self._queue, self.functional.out)

    def _queue(self, state):
        """The functional's kernel on ``state``, not read (also inside a step's CUDA graph)."""
        stepper = self.solver.stepper
        grad_p = stepper.pressure_gradient(state.p) if self.extrapolated else None  # products: on every rank
        grad_u = stepper.velocity_gradients(state.u, state.t) if self.corrected else None
        self.functional.queue(state.u, state.p, grad_u, grad_p)

    def __call__(self, state):
        return _summed(self.solver.mpi, self._values(state) - self._held(state.t))

    def _held(self, t):
        """rho nu sum_f (A / delta)_f u_f of the held velocities at time t: once where they do not change in time."""
        if self._steady_held is not None:
            return self._steady_held
        held = self.rho * self.nu * (self.conductance @ self.condition.velocity_at(self.centroids, t))
        if getattr(self.condition, "steady", True):  # a wall's, or a steady inflow's
            self._steady_held = held
        return held


class PointPressure(_Watched):
    """``pressure(state)``: the pressure at each of ``points`` (k, dim) on every rank."""

    def __init__(self, solver, points):
        g, mpi = solver.geometry, solver.mpi
        self.solver, self.points = solver, numpy.asarray(points, dtype=float)
        stencils = []  # per point, on the rank owning its cell: (global cells, weights, constant); else None
        for point in self.points:
            distance = numpy.linalg.norm(g.centroids - point, axis=1) if g.num_cells else numpy.array([numpy.inf])
            nearest = int(numpy.argmin(distance))
            _, owner = mpi.allreduce((float(distance[nearest]), mpi.rank), op=MPI.MINLOC)
            stencils.append(self._stencil(nearest, point) if owner == mpi.rank else None)
        wanted = [cell for stencil in stencils if stencil is not None for cell in stencil[0].tolist()]
        self.cells = numpy.array(sorted(set().union(*mpi.allgather(wanted))), dtype=numpy.int64)
        # p(points) = weights @ p[cells] + constants, on every rank
        self.weights, self.constants = numpy.zeros((len(self.points), self.cells.size)), numpy.zeros(len(self.points))
        for k, stencil in enumerate(stencils):
            if stencil is not None:
                cells, weights, constant = stencil
                numpy.add.at(self.weights[k], numpy.searchsorted(self.cells, cells), weights)
                self.constants[k] = constant
        self.weights, self.constants = mpi.allreduce(self.weights, op=MPI.SUM), mpi.allreduce(self.constants)
        own = (self.cells >= g.cell_start) & (self.cells < g.cell_start + g.num_cells)
        self.own_positions = numpy.flatnonzero(own)
        self.least_squares = solver.operators.scheme.gradient == "least-squares"
        n, terms = g.num_cells, []  # per point, the rank's share of its pressure
        for k, stencil in enumerate(stencils):
            if not self.least_squares:  # weights @ p over the stencil's cells this rank owns
                terms.append([(P, self.cells[self.own_positions] - g.cell_start, self.weights[k, self.own_positions])])
            elif stencil is None:  # another rank's point
                terms.append([])
            else:  # on its owner: p_i + (x - x_i) . grad p_i
                row = numpy.array([int(stencil[0][0]) - g.cell_start])
                offset = self.points[k] - g.centroids[row[0]]
                terms.append([(P, row, numpy.ones(1))] + [(GRAD_P, e * n + row, offset[e:e + 1]) for e in range(g.dim)])
        self.functional = Functional(solver.xp, terms)
        solver.stepper.watch(self._queue, self.functional.out)

    def _queue(self, state):
        """The functional's kernel on ``state``, not read (also inside a step's CUDA graph)."""
        grad_p = self.solver.stepper.pressure_gradient(state.p) if self.least_squares else None  # on every rank
        self.functional.queue(None, state.p, None, grad_p)

    def _stencil(self, row, point):
        """(global cells, their weights, constant) with p(point) = weights . p[cells] + constant:
        p_i + grad p_i . (x - x_i), grad p_i = Omega_i^-1 sum_f p_f n_f A_f."""
        g, conditions = self.solver.geometry, self.solver.boundary_conditions
        cell = g.cell_start + row
        offset = (point - g.centroids[row]) / g.volumes[row]
        cells, weights, constant = [cell], [1.0], 0.0
        for side, sign in ((0, 1.0), (1, -1.0)):  # interior faces, normals out of the cell
            faces = numpy.flatnonzero(g.face_cells[:, side] == cell)
            for f in faces.tolist():
                w = 0.5 * g.face_areas[f] * sign * (g.face_normals[f] @ offset)
                cells += [cell, int(g.face_cells[f, 1 - side])]
                weights += [w, w]
        for b in numpy.flatnonzero(g.boundary_cells == cell).tolist():
            w = g.boundary_areas[b] * (g.boundary_normals[b] @ offset)
            condition = conditions[int(g.boundary_tags[b])]
            if isinstance(condition, Outflow):
                constant += w * condition.pressure
            else:
                cells.append(cell)
                weights.append(w)
        return numpy.array(cells, dtype=numpy.int64), numpy.array(weights), constant

    def __call__(self, state):
        return _summed(self.solver.mpi, self._values(state)) + (0.0 if self.least_squares else self.constants)


# The arrays a Functional reads: u and grad u raveled ((dim, n) and (dim * dim, n)), p, grad p ((dim, n)).
U, P, GRAD_U, GRAD_P = range(4)


class Functional:
    """Linear functionals of a state, ``terms[r]`` a list of (array, index,
    weight) triplets (arrays U, P, GRAD_U, GRAD_P) for row r, summed in one
    kernel in the state's memory (kernel family flow) and read back in one
    copy: a force or a probe every step costs one launch and one read."""

    def __init__(self, xp, terms):
        counts = [sum(len(index) for _, index, _ in row) for row in terms]
        flat = [part for row in terms for part in row]

        def joined(pieces, dtype):  # in the state's memory; no pieces: empty
            pieces = [numpy.asarray(piece, dtype=dtype) for piece in pieces]
            return xp.asarray(numpy.concatenate(pieces + [numpy.zeros(0, dtype)]))

        self.xp = xp
        self.starts = joined([[0], numpy.cumsum(counts)], numpy.int64)
        self.which = joined([numpy.full(len(index), array) for array, index, _ in flat], numpy.int32)
        self.index = joined([index for _, index, _ in flat], numpy.int64)
        self.weight = joined([weight for _, _, weight in flat], float)
        self.out = xp.zeros(len(terms))

    def queue(self, u, p, grad_u, grad_p):
        """The rows' values into ``out`` in the state's memory, not read, from
        arrays in the state's memory (None: not read)."""
        sources = [p if a is None else a.ravel() for a in (u, p, grad_u, grad_p)]
        family("flow", self.xp).functional(self.out, self.starts, self.which, self.index, self.weight, *sources)

    def read(self):
        """The values the last queue() left, on the host."""
        return to_host(self.xp, self.out).copy()
