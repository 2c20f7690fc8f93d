"""3D Poisson equation -lap(u) = f on the unit cube with u = 0 on the boundary,
second-order finite differences on a DMDA, solved by a PETSc KSP.

An ordinary petsc4py program: ``import plugin`` registers the project's types,
and options choose them, e.g.

    python demos/poisson3d.py -n 64 -dm_mat_type gpusell -ksp_type cg -pc_type jacobi -log_view

The exact solution u = x(1-x) e^x y(1-y) z(1-z) checks the answer: the
maximum error must fall like h^2 (the e^x factor makes the finite differences
inexact, and u is no eigenvector, so the solver has real work to do).
"""

import sys

import petsc4py

petsc4py.init(sys.argv)

import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import plugin  # noqa: E402,F401  (registers gpusell)


def assemble(da, n):
    """The 7-point Laplacian scaled by h^2: 6 on the diagonal, -1 to each interior neighbour."""
    A = da.createMat()
    row, col = PETSc.Mat.Stencil(), PETSc.Mat.Stencil()
    (xs, xe), (ys, ye), (zs, ze) = da.getRanges()
    neighbours = [(-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1)]
    for k in range(zs, ze):
        for j in range(ys, ye):
            for i in range(xs, xe):
                row.index = (i, j, k)
                A.setValueStencil(row, row, 6.0)
                for di, dj, dk in neighbours:
                    if 0 <= i + di < n and 0 <= j + dj < n and 0 <= k + dk < n:
                        col.index = (i + di, j + dj, k + dk)
                        A.setValueStencil(row, col, -1.0)
    A.assemble()
    return A


def main():
    opts = PETSc.Options()
    n = opts.getInt("n", 32)
    da = PETSc.DMDA().create([n, n, n], stencil_width=1, stencil_type=PETSc.DMDA.StencilType.STAR, setup=False)
    da.setFromOptions()
    da.setUp()
    h = 1.0 / (n + 1)

    A = assemble(da, n)
    b, u = A.createVecs()
    exact = u.duplicate()
    (xs, xe), (ys, ye), (zs, ze) = da.getRanges()
    z, y, x = numpy.meshgrid(*(h * numpy.arange(s + 1, e + 1) for s, e in ((zs, ze), (ys, ye), (xs, xe))),
                             indexing="ij")
    px, qy, qz = x * (1 - x) * numpy.exp(x), y * (1 - y), z * (1 - z)
    exact.setArray((px * qy * qz).ravel())
    # -lap(u): (x(1-x)e^x)'' = -x(x+3)e^x and (y(1-y))'' = -2
    source = x * (x + 3) * numpy.exp(x) * qy * qz + 2 * px * (qy + qz)
    b.setArray(h**2 * source.ravel())

    ksp = PETSc.KSP().create()
    ksp.setOperators(A)
    ksp.setType("cg")
    ksp.setTolerances(rtol=1e-8)
    ksp.setFromOptions()
    start = PETSc.Log.getTime()
    ksp.solve(b, u)
    seconds = PETSc.Log.getTime() - start
    error = u.copy()
    error.axpy(-1.0, exact)
    PETSc.Sys.Print(f"3D Poisson on {n}^3 = {n**3} unknowns, matrix {A.getType()}, vectors {u.getType()}")
    PETSc.Sys.Print(f"KSP {ksp.getType()} + PC {ksp.getPC().getType()}: converged reason {ksp.getConvergedReason()}, "
                    f"{ksp.getIterationNumber()} iterations, {seconds:.3f} s")
    PETSc.Sys.Print(f"max error against the exact solution: {error.norm(PETSc.NormType.INFINITY):.3e} (h^2 = {h * h:.3e})")
    return error.norm(PETSc.NormType.INFINITY), h


if __name__ == "__main__":
    main()
