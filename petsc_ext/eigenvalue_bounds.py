"""Bounds of the spectrum of M^-1 A for polynomial Krylov bases (cacg's
Newton and Chebyshev bases): a few plain CG iterations and their Ritz values
(PETSc's own KSPComputeEigenvalues), or a power method for the top alone,
widened by a safety factor. A singular operator with its null space attached
(a Neumann Laplacian) gives the bounds of its nonzero spectrum. A one-point
spectrum (the identity, a 1 x 1 system) gives [0, top], on which the bases
stay defined; an empty system [0, 1]."""

from petsc4py import PETSc


def eigenvalue_bounds(ksp, method, steps, safety):
    """(low, high) of M^-1 A for the operators and PC of ``ksp``; ``method``
    "cg" or "power" (low 0), ``steps`` iterations, widened by ``safety``."""
    A, P = ksp.getOperators()
    if A.getSize()[0] == 0:
        return 0.0, 1.0
    b, x = A.createVecs()
    try:
        b.setRandom()
        nullspace = A.getNullSpace()
        if nullspace:  # the random start loses its null-space part
            nullspace.remove(b)
        steps = min(steps, max(A.getSize()[0] - 1, 1))
        if method == "power":
            return 0.0, safety * _power_method(A, ksp.getPC(), b, x, steps)
        ritz = _ritz_values(ksp, A, P, b, x, steps)
        low, high = float(ritz.min()) / safety, float(ritz.max()) * safety
        return (low, high) if high > low * (1 + 1e-8) else (0.0, high)
    finally:
        b.destroy()
        x.destroy()


def _power_method(A, pc, b, w, steps):
    """The largest eigenvalue of M^-1 A from ``steps`` power iterations started at b."""
    z = b.duplicate()
    b.scale(1.0 / b.norm())
    high = 0.0
    for _ in range(steps):
        A.mult(b, w)
        pc.apply(w, z)
        high = z.norm()
        z.copy(b)
        b.scale(1.0 / high)
    z.destroy()
    return high


# CG stops once its residual falls this far: past it, with a (nearly) exact
# preconditioner, the Lanczos coefficients are rounding noise and so are
# the Ritz values.
EXHAUSTED = 1e-10


def _ritz_values(ksp, A, P, b, x, steps):
    """Ritz values of M^-1 A from at most ``steps`` CG iterations on A x = b
    (options prefix <ksp prefix>ksp_cacg_eig_)."""
    inner = PETSc.KSP().create(comm=ksp.getComm())
    try:
        inner.setOptionsPrefix((ksp.getOptionsPrefix() or "") + "ksp_cacg_eig_")
        inner.setType(PETSc.KSP.Type.CG)
        inner.setOperators(A, P)
        inner.setPC(ksp.getPC())
        inner.setComputeEigenvalues(True)
        inner.setNormType(PETSc.KSP.NormType.PRECONDITIONED)
        inner.setTolerances(rtol=EXHAUSTED, atol=0.0, max_it=steps)
        inner.solve(b, x)
        reason = inner.getConvergedReason()
        ritz = inner.computeEigenvalues().real
        failed = reason < 0 and reason != PETSc.KSP.ConvergedReason.DIVERGED_MAX_IT
        if failed or not ritz.size or not (ritz > 0).all():
            shown = f"{ritz.min():.3g} .. {ritz.max():.3g}" if ritz.size else "none"
            raise ValueError(f"cacg: the eigenvalue estimate of M^-1 A failed (CG {_reason_name(reason)}, Ritz values "
                             f"{shown}): the operator or the preconditioner is not symmetric positive definite; "
                             "-ksp_cacg_basis monomial needs no bounds")
        return ritz
    finally:
        inner.destroy()


def _reason_name(reason):
    return next((name for name, value in vars(PETSc.KSP.ConvergedReason).items() if value == reason), str(reason))
