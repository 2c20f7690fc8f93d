"""The mean flow's forcing along x (-flow_forcing), as a periodic channel
or pipe needs it: a constant mean pressure gradient, which is a body force
-dP/dx per unit mass in every cell; or a constant flow rate, the bulk
velocity U_b = sum_i Omega_i u_i / V held after each step by adding to
every cell the same velocity along x (and to the faces its normal part, so
that the face velocities stay divergence-free), whose change over dt is
the mean pressure gradient that held it."""

import numpy

from gpu_mats.backend import to_host

from .forces import U, Functional

KINDS = ("none", "pressure_gradient", "flow_rate")


class Forcing:
    """-flow_forcing ``kind`` ("pressure_gradient" or "flow_rate") with
    ``value`` (-dP/dx per unit mass, or U_b) on the cells of ``matrices``
    (FlowMatrices), on ``comm`` (mpi4py). ``implied``: the mean pressure
    gradient -dP/dx the last step took (the constant one, or what held the
    flow rate), on the host."""

    def __init__(self, kind, value, matrices, comm):
        ops, xp = matrices.ops, matrices.xp
        dim, n = ops.dim, ops.geometry.num_cells
        self.kind, self.value, self.xp, self.comm = kind, float(value), xp, comm
        volumes = numpy.asarray(ops.volumes, dtype=float)
        if kind == "pressure_gradient":
            force = numpy.zeros((dim, n))
            force[0] = self.value * volumes  # the explicit update's sources are integrated over the cell
            self.force, self.forced = xp.asarray(force), xp.empty((dim, n))
            return
        self.volume = comm.allreduce(float(volumes.sum()))
        self.bulk = Functional(xp, [[(U, numpy.arange(n), volumes / self.volume)]])
        self.delta = xp.zeros(1)
        along = xp.zeros((dim, n))
        along[0] = 1.0
        self.along, self.face_step = xp.empty(ops.num_faces), xp.empty(ops.num_faces)
        matrices.Gamma(along.ravel(), self.along)  # n_x on every face: a uniform field's normal velocity
        self._dt = None

    def source(self, source):
        """The explicit update's sources with the constant pressure gradient's (the boundary's ``source`` else)."""
        if self.kind != "pressure_gradient":
            return source
        return self.xp.add(source, self.force, out=self.forced)

    def hold(self, u, u_s, dt):
        """With a constant flow rate: u and u_s moved along x so that U_b is the value held (kernels only on
        one rank; in parallel one reduction through the host)."""
        if self.kind != "flow_rate":
            return
        xp = self.xp
        self.bulk.queue(u, u.ravel(), None, None)  # (the pressure slot unread: any array)
        if self.comm.Get_size() == 1:
            xp.subtract(self.value, self.bulk.out, out=self.delta)
        else:
            self.delta[...] = self.value - self.comm.allreduce(float(to_host(xp, self.bulk.out)[0]))
        u[0] += self.delta
        xp.multiply(self.along, self.delta, out=self.face_step)
        u_s += self.face_step
        self._dt = dt

    def implied(self, delta=None):
        """-dP/dx of the last step: the constant's, or the flow rate's added velocity over dt (``delta``: its
        host copy where a step's graph read it back)."""
        if self.kind == "pressure_gradient":
            return self.value
        if self._dt is None:
            return 0.0
        delta = to_host(self.xp, self.delta)[0] if delta is None else delta[0]
        return float(delta) / self._dt
