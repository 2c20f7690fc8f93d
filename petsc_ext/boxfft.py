"""``-pc_type boxfft``: the exact solve of a box's pressure Laplacian by
cosine and Fourier transforms (gpu_mats.spectral), on the GPU with cuFFT for
CUDA vectors, with scipy.fft for host ones. For the constant-coefficient
7-point operator of a uniform box whose sides are walls or periodic (the
flow driver's pressure on a DMDA box without an outflow), or one graded
along a walled axis (tridiagonal solves along it: gpu_mats.spectral's
GradedBoxSolver, the turbulent channel's): under cg it converges in one
iteration, the limit multigrid approaches (BENCHMARKS.md).

The box is the application's (``set_box``, as the flow driver gives it), or
the preconditioning matrix's: its DMDA (one unknown per cell, one rank), or
the grid a gpusell matrix was given (``set_grid``).
Anything else, or a matrix that is not such an operator on its box, is a
PETSc error with the reason. Where no walled axis is transformed (a periodic
box; a graded box periodic along its other axes) a solve allocates nothing,
so that graphcg and the flow's step replay it in their CUDA graphs.
"""

import numpy
from petsc4py import PETSc

from gpu_mats.spectral import GradedBoxSolver, SpectralBoxSolver, SpectralError
from gpu_mats.stencil import StencilMatrix

from . import gpusell
from .python_type import ExactSolvePC

AXES = "xyz"


def matrix_box(P):
    """(shape, periodic) of the box whose cells are P's rows, numbered x
    fastest on one rank: a gpusell matrix's grid, or P's DMDA; None."""
    if P.getType() in (gpusell.SEQ_TYPE, gpusell.MPI_TYPE) and gpusell.context(P).grid is not None:
        return gpusell.context(P).grid
    dm = P.getDM()
    if not dm or dm.getType() != PETSc.DM.Type.DA or dm.getDof() != 1:  # no DM: a NULL handle
        return None
    periodic = tuple(kind == PETSc.DM.BoundaryType.PERIODIC for kind in dm.getBoundaryType())
    return tuple(dm.getSizes()), periodic


class BoxTransformPC(ExactSolvePC):
    """The context of a PC of type boxfft (petsc4py's Python PC protocol)."""

    TYPE, TITLE = "boxfft", "Box Poisson solve by fast transforms (boxfft)"
    SUMMARY = "exact inverse of a box's 7-point Laplacian (cosine transforms along walled axes, Fourier along " \
              "periodic ones)"

    def __init__(self):
        super().__init__()
        self.box = None

    def set_box(self, shape, periodic):
        """The box the rows are cells of: ``shape`` cells, numbered x first, ``periodic`` per axis."""
        self.box = (tuple(int(n) for n in shape), tuple(bool(p) for p in periodic))
        self.release()

    def build(self, pc):
        P = self.operator(pc)
        if P.getComm().getSize() > 1:
            raise ValueError("boxfft solves a box held on one rank; on several ranks use -pc_type gpuamg")
        box = self.box or matrix_box(P)
        if box is None:
            raise ValueError("boxfft needs the box the rows are cells of: given to the PC (set_box), a matrix of a "
                             "DMDA with one unknown per cell, or a gpusell matrix given its grid (set_grid)")
        shape, periodic = box
        indptr, indices, data = gpusell.local_block(P, self.xp).to_csr()
        S = StencilMatrix.from_csr(indptr, indices, data, shape, periodic)
        if S is not None:
            self.solver = SpectralBoxSolver(S)
            return
        try:
            self.solver = GradedBoxSolver.from_csr(indptr, indices, data, shape, periodic)
        except SpectralError as exc:
            raise ValueError(f"boxfft needs a 7-point operator on the {' x '.join(map(str, shape))} box, its "
                             f"couplings constant, or varying along one walled axis only (a graded box); this "
                             f"matrix: {exc}") from exc

    def graph_key(self):
        """What a CUDA graph of apply_arrays reads (None: not capturable: on
        the host, or where cosine transforms along walled axes make their
        arrays)."""
        if self.xp is numpy or self.solver is None or not self.solver.capturable:
            return None
        return (self.solver,)

    def describe(self, pc):
        if self.solver is None:
            return []
        s = self.solver
        if isinstance(s, GradedBoxSolver):
            axes = "; ".join(f"{axis}: {n} cells, " + ("graded: tridiagonal solves" if d == s.graded else
                                                       "Fourier (periodic)" if wraps else "cosine (walls)")
                             for d, (axis, n, wraps) in enumerate(zip(AXES, s.shape, s.periodic)))
            return [f"  {axes}", self.setup_line(pc)]
        transforms = "; ".join(f"{axis}: {n} cells, {'Fourier (periodic)' if wraps else 'cosine (walls)'}, "
                               f"coupling {c:.6g}" for axis, n, wraps, c in zip(AXES, s.shape, s.periodic,
                                                                              s.couplings))
        return [f"  {transforms}", self.setup_line(pc)]
