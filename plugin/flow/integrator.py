"""The fractional-step time step of seed 000 (Algorithm 1), explicit part on
host arrays for now; the pressure equation through a PETSc KSP (prefix
``pressure_``, any KSP/PC by options; default cacg + ainv).

One step from (u^n, u^{n-1}, u_s, dt_{n-1}):
  u*   = (1 + r/2) u^n - (r/2) u^{n-1},  r = dt_n / dt_{n-1} (one-leg extrapolation)
  u^p  = u^n + dt Omega^-1 R(u*),  R(u) = -C(u_s) u - D u + wall source
  -L p = -(1/dt) M u^p                     (singular: constant null space)
  u^{n+1} = u^p - dt G p
  u_s^{n+1} = Gamma u^{n+1} - dt (Gs p - Gamma G p)   (eq. 2.9: Ms u_s^{n+1} = 0 to solver tolerance)
"""

import numpy
from petsc4py import PETSc

from petsc_ext.matrices import aij_from_csr


class FractionalStep:
    """Time steps of one set of operators; the state is (u, u_old, u_s, p)."""

    def __init__(self, ops, comm=PETSc.COMM_SELF, mat_type="gpusell", prefix="pressure_"):
        self.ops = ops
        poisson = -ops.L
        self.A = aij_from_csr(poisson.indptr, poisson.indices, poisson.data, poisson.shape, comm=comm,
                              mat_type=mat_type, prefix=prefix)
        self.A.setNullSpace(PETSc.NullSpace().create(constant=True, comm=comm))
        self.ksp = PETSc.KSP().create(comm=comm)
        self.ksp.setOptionsPrefix(prefix)
        self.ksp.setOperators(self.A)
        self.ksp.setType("cacg")
        self.ksp.getPC().setType("ainv")
        self.ksp.setTolerances(rtol=1e-10)
        self.ksp.setInitialGuessNonzero(True)  # warm start from the last pressure
        self.ksp.setFromOptions()
        self._b, self._p = self.A.createVecs()

    def step(self, u, u_old, u_s, dt, dt_old):
        """(u^{n+1}, u_s^{n+1}, p^{n+1}); u and u_old are (dim, n) arrays."""
        ops = self.ops
        r = dt / dt_old
        u_star = (1 + r / 2) * u - (r / 2) * u_old
        C = ops.convection(u_s)
        u_p = numpy.empty_like(u)
        for d in range(ops.dim):
            rate = -(C @ u_star[d]) - ops.D @ u_star[d] + ops.wall_source[d]
            u_p[d] = u[d] + dt * rate / ops.volumes
        divergence = sum(ops.M[d] @ u_p[d] for d in range(ops.dim))
        p = self._solve_pressure(-divergence / dt)
        gradient = numpy.array([G @ p for G in ops.G])
        u_new = u_p - dt * gradient
        u_s_new = sum(ops.Gamma[d] @ (u_new[d] + dt * gradient[d]) for d in range(ops.dim)) - dt * (ops.Gs @ p)
        return u_new, u_s_new, p

    def _solve_pressure(self, rhs):
        """p with -L p = rhs (rhs sums to zero up to rounding: projected on the range first)."""
        lo, hi = self._b.getOwnershipRange()
        self._b.setArray(rhs[lo:hi] - rhs.mean())
        self.ksp.solve(self._b, self._p)
        reason = self.ksp.getConvergedReason()
        if reason < 0:
            raise RuntimeError(f"the pressure solve failed: KSPConvergedReason {reason}")
        return self._p.getArray(readonly=True).copy()
