"""How far an operator's products depart from linearity, and the s-step
block length that departure leaves.

An s-step method combines products (A S B in place of A (S B)), which only a
linear operator honours. A finite-difference Jacobian (-snes_mf) carries
about half the digits (sqrt(eps)), a Krylov preconditioner fewer. The
basis of a block loses independence geometrically with its length
(M. Hoemmen, "Communication-avoiding Krylov subspace methods", PhD thesis,
UC Berkeley, 2010, ch. 7), each vector spending about as many digits, so
the length a block can keep is proportional to the digits its products
carry beyond those the tolerance asks for. The length products exact to
rounding keep is cacg's default s. Such a block also
takes the monomial basis: the shifted ones (Newton, Chebyshev) lost CG's
convergence with a finite-difference Jacobian in blocks of a length where
the monomial basis kept it (tests/test_cacg_workflows.py).
"""

import math

import numpy
from petsc4py import PETSc

# Products consistent below this relative defect are linear to rounding: s is kept.
LINEAR_TO_ROUNDING = 1e-12
# The block length that products exact to rounding keep (cacg's default s).
EXACT_BLOCK = 8


def linearity_defect(A, pc):
    """||y(v + w) - y(v) - y(w)|| / (||y(v)|| + ||y(w)||) for y = A M^-1 and
    two random vectors: about the rounding unit for an assembled matrix and a
    fixed preconditioner, about sqrt(eps) for a finite-difference Jacobian."""
    v, y = A.createVecs()
    work = [v.duplicate() for _ in range(4)]
    w, z, yv, yw = work
    random = PETSc.Random().create(comm=v.getComm())
    try:
        random.setSeed(7)
        v.setRandom(random)
        w.setRandom(random)
        for vec, out in ((v, yv), (w, yw)):
            pc.apply(vec, z)
            A.mult(z, out)
        v.axpy(1.0, w)
        pc.apply(v, z)
        A.mult(z, y)
        y.axpy(-1.0, yv)
        y.axpy(-1.0, yw)
        scale = yv.norm() + yw.norm()
        return y.norm() / scale if scale > 0 else 0.0
    finally:
        random.destroy()
        for vec in (v, y, *work):
            vec.destroy()


def linear_to_rounding(defect):
    return not defect > LINEAR_TO_ROUNDING


def block_length(s, defect, rtol):
    """The block length of an s-step method whose products depart from
    linearity by ``defect``, solving to a relative tolerance ``rtol``: s
    where they are linear to rounding, else EXACT_BLOCK scaled by the digits
    the products carry beyond the tolerance's, against those of products
    exact to rounding (at least 1, at most s)."""
    if linear_to_rounding(defect):
        return s
    eps = numpy.finfo(float).eps
    rtol = min(max(rtol, 2 * eps), 0.5)
    spare = math.log(rtol / defect) / math.log(rtol / eps)
    return max(1, min(s, round(EXACT_BLOCK * spare)))
