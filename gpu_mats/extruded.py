"""The exact solve of a pressure Laplacian on a mesh extruded along a
periodic axis in equal layers (prisms or hexahedra in layers, the
spanwise-periodic cylinder's): with its rows ordered layer by layer, the
same cross-section in each, the operator is

    A = I (x) L + T (x) C,

L the cross-section's operator (each layer's own couplings and the
diagonal's share of them), C = diag(c) the couplings of each column to the
layers above and below, T the periodic second difference of the layers. A
real FFT along the layers diagonalizes T (eigenvalues 4 sin^2(pi k / n)),
which leaves one 2D system per wavenumber, L + mu_k C (the periodic
direction's solver of Borrell, Lehmkuhl, Trias and Oliva, J. Comput. Phys.
230, 2011; Oyarzún 2015, ch. 4). The 2D systems are solved for the
transform's real and imaginary parts, either each factorized once
(scipy's SuperLU, ``direct``: on the host), or all at once by CG
preconditioned by one aggregation hierarchy of the family (``multigrid``:
amg.shifted, NumPy or CuPy), to a relative residual ``rtol`` of the whole
3D right-hand side (Parseval). The wavenumber 0 system of a pure-Neumann
operator is singular (the constants): ``direct`` pins its solution at one
cell, CG takes its right-hand side's mean out; the solution is made of zero
mean.
"""

import numpy
import scipy.sparse
import scipy.sparse.linalg

from .amg.shifted import ShiftedAMG
from .kernels import family, graph_cache

TOLERANCE = 1e-10  # of the couplings' agreement between layers, relative to the largest
SECTIONS = ("direct", "multigrid")
RTOL, MAX_IT = 1e-10, 200  # the multigrid CG's relative residual and iterations


class ExtrusionError(ValueError):
    """A matrix that is not an extruded operator on the given layers, with the reason."""


class SectionConvergenceError(ArithmeticError):
    """The multigrid CG did not reach its tolerance on the 2D systems."""


class ExtrudedSolver:
    """x = A^+ b for ``A`` (scipy CSR, host) whose rows ``order[l, j]`` are
    column j's cell in layer l (``order`` (layers, columns), the layers along
    the periodic axis in turn): ``solve(b, x)`` on flat arrays in ``xp``'s
    memory; ``sections`` (SECTIONS) says how the 2D systems are solved."""

    def __init__(self, A, order, sections="direct", xp=numpy, rtol=RTOL, max_it=MAX_IT):
        if sections not in SECTIONS:
            raise ValueError(f"sections must be one of {SECTIONS}, not {sections!r}")
        if sections == "direct" and xp is not numpy:
            raise ValueError("direct 2D solves run on the host (SuperLU); on the GPU take multigrid")
        A = scipy.sparse.csr_matrix(A)
        order = numpy.asarray(order)
        layers, columns = order.shape
        if layers < 3:
            raise ExtrusionError(f"{layers} layers: a periodic axis needs at least 3")
        if A.shape[0] != layers * columns or numpy.unique(order).size != A.shape[0]:
            raise ExtrusionError(f"{layers} layers of {columns} cells are not the matrix's {A.shape[0]} rows")
        P = A[order.ravel()][:, order.ravel()].tocoo()  # rows and columns layer by layer
        c, cross_section = _split(P, layers, columns)
        self.layers, self.columns, self.sections, self.xp = layers, columns, sections, xp
        self.columns_first = xp.asarray(order.T)  # (columns, layers): the FFT runs along each column's cells
        L = (cross_section - scipy.sparse.diags(2.0 * c)).tocsr()
        mu = 4.0 * numpy.sin(numpy.pi * numpy.arange(layers // 2 + 1) / layers) ** 2
        scale = float(abs(A.data).max(initial=0.0)) or 1.0
        self.singular = float(abs(A.sum(axis=1)).max()) <= TOLERANCE * scale  # rows summing to 0: constants
        if sections == "direct":
            self.section_solver = DirectSections(L, c, mu, self.singular)
        else:
            self.section_solver = MultigridSections(L, c, mu, self.singular, layers, xp, rtol, max_it)

    def solve(self, b, x):
        """x = A^+ b (b, x flat arrays in ``xp``'s memory)."""
        xp = self.xp
        field = xp.fft.rfft(xp.asarray(b)[self.columns_first], axis=1)  # (columns, wavenumbers)
        field = self.section_solver.solve(field)
        solution = xp.fft.irfft(field, n=self.layers, axis=1)
        if self.singular:
            solution -= solution.mean()
        x[self.columns_first] = solution


class DirectSections:
    """The 2D systems L + mu_k C, C = diag(c), each factorized once by SuperLU (host)."""

    def __init__(self, L, c, mu, singular):
        self.factors = [self._factor(L + m * scipy.sparse.diags(c), k == 0 and singular) for k, m in enumerate(mu)]
        self.singular = singular

    @staticmethod
    def _factor(S, pinned):
        """SuperLU of S, its first row and column replaced by the identity's where ``pinned`` (S singular)."""
        S = S.tolil()
        if pinned:
            S[0, :] = 0.0
            S[:, 0] = 0.0
            S[0, 0] = 1.0
        return scipy.sparse.linalg.splu(S.tocsc())

    def solve(self, field):
        """Each column k of ``field`` (columns, wavenumbers; complex) solved by its system."""
        for k, factor in enumerate(self.factors):
            rhs = field[:, k]
            if k == 0 and self.singular:
                rhs = rhs.copy()
                rhs[0] = 0.0
            field[:, k] = factor.solve(rhs.real) + 1j * factor.solve(rhs.imag)
        return field

    def describe(self):
        return f"{len(self.factors)} wavenumbers, a direct solve each (SuperLU)"


class MultigridSections:
    """All 2D systems at once: CG on the block of their real and imaginary
    parts, preconditioned by the family's V-cycle (ShiftedAMG), each member
    with its own CG coefficients, stopped when the 3D residual (the block's,
    each wavenumber counted as often as the full spectrum holds it) is below
    ``rtol`` of the right-hand side's. An iteration launches the shifted
    and multigrid families' kernels only, on kept blocks: on the GPU it is
    replayed as one CUDA graph, the host reading the residual's column norms
    after each. ``iterations``: the last solve's."""

    def __init__(self, L, c, mu, singular, layers, xp, rtol, max_it):
        self.xp, self.rtol, self.max_it, self.singular = xp, rtol, max_it, singular
        self.multigrid = ShiftedAMG(L, c, mu, xp, parts=2)
        counts = numpy.full(mu.size, 2.0)  # wavenumbers 0 and layers / 2 stand once in the full spectrum
        counts[0] = 1.0
        if layers % 2 == 0:
            counts[-1] = 1.0
        self.counts = numpy.repeat(counts, 2)  # per column of a block
        self._kernels = family("shifted", xp)
        self.X, self.R, self.Z, self.D, self.Q = (xp.zeros((L.shape[0], mu.size, 2)) for _ in range(5))
        self.rz, self.rz_next, self.dq, self.rr = (xp.zeros(2 * mu.size) for _ in range(4))
        self.graphs = None if xp is numpy else graph_cache()
        self.iterations = 0

    def solve(self, field):
        """Each column k of ``field`` (columns, wavenumbers; complex) solved by its system."""
        xp, mg, kernels = self.xp, self.multigrid, self._kernels
        X, R, Z, D = self.X, self.R, self.Z, self.D
        R[...] = xp.ascontiguousarray(field).view(xp.float64).reshape(R.shape)
        if self.singular:  # the constants' system: its right-hand side made consistent
            R[:, 0, :] -= R[:, 0, :].mean(axis=0)
        X[...] = 0.0
        target = self.rtol**2 * self._weighted_norm(R)
        mg.apply(R, Z)
        D[...] = Z
        self.rz[...] = 0.0
        kernels.column_dots(R, Z, self.rz)
        for self.iterations in range(1, self.max_it + 1):
            if self.graphs is None:
                self._iterate()
            else:
                self.graphs.run("iteration", self._iterate)
            if self._weighted(self.rr) <= target:
                return X.view(xp.complex128).reshape(field.shape)
        raise SectionConvergenceError(f"the 2D systems' CG did not reach a relative residual of {self.rtol:g} in "
                                      f"{self.max_it} iterations")

    def _iterate(self):
        """One CG iteration of every column, kernels only on kept arrays; the new residual's column norms in
        ``rr``."""
        mg, kernels = self.multigrid, self._kernels
        X, R, Z, D, Q = self.X, self.R, self.Z, self.D, self.Q
        mg.product(D, Q)
        self.dq.fill(0.0)
        kernels.column_dots(D, Q, self.dq)
        kernels.cg_update(X, R, D, Q, self.rz, self.dq)
        self.rr.fill(0.0)
        kernels.column_dots(R, R, self.rr)
        mg.apply(R, Z)
        self.rz_next.fill(0.0)
        kernels.column_dots(R, Z, self.rz_next)
        kernels.cg_direction(D, Z, self.rz_next, self.rz)
        self.rz[...] = self.rz_next

    def _weighted_norm(self, U):
        """The squared 3D norm of a block of transforms (Parseval, up to the layer count)."""
        self.rr.fill(0.0)
        self._kernels.column_dots(U, U, self.rr)
        return self._weighted(self.rr)

    def _weighted(self, column_norms):
        """sum_j counts_j column_norms_j, read to the host."""
        return float(self.counts @ numpy.asarray(column_norms if self.xp is numpy else column_norms.get()))

    def describe(self):
        rows = ", ".join(str(n) for n, _ in self.multigrid.sizes())
        return (f"{self.multigrid.shifts.size} wavenumbers at once: CG to rtol {self.rtol:g} with one aggregation "
                f"hierarchy of the cross-section (rows {rows}), {self.iterations} iterations in the last solve")

def _split(P, layers, columns):
    """(c, B) of the operator P (COO, rows and columns layer by layer): c the
    couplings of each column to the next layer, B a layer's own block, both
    the same in every layer; an ExtrusionError saying which layer differs
    or why P is no extruded operator."""
    layer_of, column_of = numpy.divmod(P.row, columns)
    layer_to, column_to = numpy.divmod(P.col, columns)
    step = (layer_to - layer_of) % layers
    scale = float(abs(P.data).max(initial=0.0)) or 1.0
    across = ((step == 1) | (step == layers - 1)) & (column_of != column_to)
    if across.any():
        k = int(numpy.flatnonzero(across)[0])
        raise ExtrusionError(f"the cell of column {column_of[k]} in layer {layer_of[k]} is coupled to column "
                             f"{column_to[k]} of the next layer: not an extrusion")
    if ((step > 1) & (step < layers - 1)).any():
        raise ExtrusionError("cells are coupled to layers further than the next: not an extrusion")
    up, down = step == 1, step == layers - 1
    c = numpy.zeros((layers, columns))
    c[layer_of[up], column_of[up]] = -P.data[up]  # the coupling of layer l to l + 1, per column
    below = numpy.zeros((layers, columns))
    below[layer_to[down], column_of[down]] = -P.data[down]  # the same seen from layer l + 1
    if float(abs(c - below).max()) > TOLERANCE * scale:
        raise ExtrusionError("the couplings between layers are not symmetric")
    if (c[-1] == 0).all():
        raise ExtrusionError("no coupling between the last layer and the first: the axis is not periodic")
    spread = abs(c - c[0]).max(axis=1)
    if float(spread.max()) > TOLERANCE * scale:
        layer = int(numpy.argmax(spread))
        raise ExtrusionError(f"layer {layer}'s couplings to the next differ from layer 0's by up to "
                             f"{spread[layer]:.3g}: the layers are not equal (their spacing or their cells)")
    inside = step == 0
    blocks = [scipy.sparse.csr_matrix((P.data[inside & (layer_of == l)],
                                       (column_of[inside & (layer_of == l)], column_to[inside & (layer_of == l)])),
                                      shape=(columns, columns)) for l in range(layers)]
    for l, block in enumerate(blocks[1:], start=1):
        difference = abs(block - blocks[0]).max() if block.nnz or blocks[0].nnz else 0.0
        if difference > TOLERANCE * scale:
            raise ExtrusionError(f"layer {l}'s cross-section operator differs from layer 0's by up to "
                                 f"{difference:.3g}")
    return c[0], blocks[0]
