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
mean. On several ranks each holds whole columns (a partition of the
cross-section): its transforms are its own, and it solves its share of the
wavenumbers on the whole cross-section (gpu_mats.wavenumbers).
"""

import numpy
import scipy.sparse
import scipy.sparse.linalg
from mpi4py import MPI

from .amg.shifted import ShiftedAMG
from .exchange import MpiTransport, halo_plan
from .kernels import family, graph_cache
from .wavenumbers import LocalSpectrum, SpectrumTranspose

TOLERANCE = 1e-10  # of the couplings' agreement between layers, relative to the largest
SECTIONS = ("direct", "multigrid")
RTOL, MAX_IT = 1e-10, 200  # the multigrid CG's relative residual and iterations


class ExtrusionError(ValueError):
    """A matrix that is not an extruded operator on the given layers, with the reason."""


class SectionConvergenceError(ArithmeticError):
    """The multigrid CG did not reach its tolerance on the 2D systems."""


class ExtrudedSolver:
    """x = A^+ b for the rows ``A`` (scipy CSR) of a rank's cells and their
    couplings (columns: global numbers, a rank's own rows following those
    of lower ranks), the rows ``order[l, j]`` being its column j's cell in
    layer l (``order`` (layers, columns), the layers along the periodic axis
    in turn): ``solve(b, x)`` on the rank's flat arrays in ``xp``'s memory;
    ``sections`` (SECTIONS) says how the 2D systems are solved. On several
    ranks (``comm``, mpi4py; collective) each holds whole columns, and
    solves the 2D systems of its share of the wavenumbers on the whole
    cross-section (gpu_mats.wavenumbers, whose ``transport`` the spectra
    take, with a ``notify``-ed notice where it falls back)."""

    def __init__(self, A, order, sections="direct", xp=numpy, rtol=RTOL, max_it=MAX_IT, comm=None, transport="auto",
                 notify=print):
        if sections not in SECTIONS:
            raise ValueError(f"sections must be one of {SECTIONS}, not {sections!r}")
        if sections == "direct" and xp is not numpy:
            raise ValueError("direct 2D solves run on the host (SuperLU); on the GPU take multigrid")
        comm = comm if comm is not None and comm.Get_size() > 1 else None
        A, order = scipy.sparse.csr_matrix(A), numpy.asarray(order)
        layers, columns = order.shape
        cross_section, c, columns_of = _cross_section(A, order, comm)
        self.layers, self.columns, self.sections, self.xp = layers, columns, sections, xp
        self.cross_section, self.ranks = cross_section.shape[0], 1 if comm is None else comm.Get_size()
        self.columns_first = xp.asarray(order.T)  # (columns, layers): the FFT runs along each column's cells
        wavenumbers = layers // 2 + 1
        self.spectrum = LocalSpectrum(wavenumbers) if comm is None else SpectrumTranspose(
            comm, columns_of, wavenumbers, xp, transport, notify)
        first, stop = self.spectrum.mine
        L = (cross_section - scipy.sparse.diags(2.0 * c)).tocsr()
        k = numpy.arange(first, stop)
        mu = 4.0 * numpy.sin(numpy.pi * k / layers) ** 2
        scale = _maximum(comm, float(abs(A.data).max(initial=0.0))) or 1.0
        # rows summing to 0: the constants are the null space
        self.singular = _maximum(comm, float(abs(numpy.asarray(A.sum(axis=1))).max(initial=0.0))) <= TOLERANCE * scale
        self.cells = self.spectrum.total(float(order.size))
        pinned = self.singular and first == 0  # this rank solves the constants' system
        if sections == "direct":
            self.section_solver = DirectSections(L, c, mu, pinned)
        else:
            counts = numpy.where((k == 0) | (2 * k == layers), 1.0, 2.0)  # how often the full spectrum holds k
            self.section_solver = MultigridSections(L, c, mu, pinned, counts, xp, rtol, max_it, self.spectrum.total)

    def solve(self, b, x):
        """x = A^+ b (b, x the rank's flat arrays in ``xp``'s memory)."""
        xp = self.xp
        field = xp.fft.rfft(xp.asarray(b)[self.columns_first], axis=1)  # (columns, wavenumbers)
        block = self.section_solver.solve(self.spectrum.to_wavenumbers(field))
        solution = xp.fft.irfft(self.spectrum.to_columns(block), n=self.layers, axis=1)
        if self.singular:
            solution -= self.spectrum.total(float(solution.sum())) / self.cells
        x[self.columns_first] = solution


def _maximum(comm, value):
    return value if comm is None else comm.allreduce(value, op=MPI.MAX)


def _gathered(comm, value, problem):
    """Every rank's ``value`` (a list), once every rank has said whether it found a problem (a str, "" for
    none): the first rank's problem is an ExtrusionError on every rank."""
    every = [(value, problem)] if comm is None else comm.allgather((value, problem))
    for rank, (_, problem) in enumerate(every):
        if problem:
            raise ExtrusionError(problem if comm is None else f"rank {rank}: {problem}")
    return [v for v, _ in every]


def _checked(make):
    """(make(), "") or (None, the ExtrusionError's words)."""
    try:
        return make(), ""
    except ExtrusionError as exc:
        return None, str(exc)


def _cross_section(A, order, comm):
    """(B, c, columns of each rank) of a rank's rows ``A`` on its layers
    ``order``: B the cross-section's operator (every column, numbered rank
    after rank), c each column's coupling to the next layer, both gathered
    from every rank; an ExtrusionError on every rank where A is no extruded
    operator (collective)."""
    layers, columns = order.shape
    rows = A.shape[0]
    problem = ""
    if layers < 3:
        problem = f"{layers} layers: a periodic axis needs at least 3"
    elif rows != layers * columns or numpy.unique(order).size != rows:
        problem = f"{layers} layers of {columns} cells are not the rank's {rows} rows"
    counts = numpy.array(_gathered(comm, rows, problem))
    columns_of = counts // layers
    rank = 0 if comm is None else comm.Get_rank()
    row_start, column_start = int(counts[:rank].sum()), int(columns_of[:rank].sum())
    total = int(columns_of.sum())
    number = numpy.empty(rows, dtype=numpy.int64)  # a row's (layer, global column) as layer * total + column
    number[order] = numpy.arange(layers)[:, None] * total + column_start + numpy.arange(columns)[None, :]
    P = A.tocoo()
    owned = (P.col >= row_start) & (P.col < row_start + rows)
    col = numpy.empty(P.col.size, dtype=numpy.int64)
    col[owned] = number[P.col[owned] - row_start]
    if comm is not None:
        col[~owned] = _numbers_of_others(P.col[~owned], number, numpy.concatenate(([0], numpy.cumsum(counts))),
                                         comm)
    layer_of, column_of = numpy.divmod(number[P.row], total)
    layer_to, column_to = numpy.divmod(col, total)
    split, problem = _checked(lambda: _split(layer_of, column_of, layer_to, column_to, P.data,
                                             (layers, columns, column_start, total)))
    mine = None  # this rank's part of B (COO) and its c, where it found no problem
    if split is not None:
        c, block = split
        block = block.tocoo()
        mine = (block.row + column_start, block.col, block.data, c)
    gathered = _gathered(comm, mine, problem)
    B = scipy.sparse.csr_matrix((numpy.concatenate([g[2] for g in gathered]),
                                 (numpy.concatenate([g[0] for g in gathered]),
                                  numpy.concatenate([g[1] for g in gathered]))), shape=(total, total))
    return B, numpy.concatenate([g[3] for g in gathered]), columns_of


def _numbers_of_others(cols, number, row_starts, comm):
    """``number`` of the rows ``cols`` (global) that other ranks own, asked of their owners."""
    wanted = numpy.unique(cols)
    plan = halo_plan(wanted, row_starts, comm)
    found = numpy.empty(wanted.size)
    exchange = MpiTransport(plan, comm, numpy)
    exchange.forward_begin(number.astype(numpy.float64), found)  # exact: numbers below 2^53
    exchange.forward_end()
    return found.astype(numpy.int64)[numpy.searchsorted(wanted, cols)]


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
    each wavenumber counted ``counts`` times, as often as the full spectrum
    holds it; ``total`` sums that over the ranks that share the spectrum) is
    below ``rtol`` of the right-hand side's. An iteration launches the shifted
    and multigrid families' kernels only, on kept blocks: on the GPU it is
    replayed as one CUDA graph, the host reading the residual's column norms
    after each. ``iterations``: the last solve's."""

    def __init__(self, L, c, mu, singular, counts, xp, rtol, max_it, total):
        self.xp, self.rtol, self.max_it, self.singular, self.total = xp, rtol, max_it, singular, total
        # a rank without wavenumbers (more ranks than they) only joins the others' sums
        self.multigrid = ShiftedAMG(L, c, mu, xp, parts=2) if mu.size else None
        self.counts = numpy.repeat(counts, 2)  # per column of a block
        self._kernels = family("shifted", xp)
        self.X, self.R, self.Z, self.D, self.Q = (xp.zeros((L.shape[0], mu.size, 2)) for _ in range(5))
        self.rz, self.rz_next, self.dq, self.rr = (xp.zeros(2 * mu.size) for _ in range(4))
        self.graphs = None if xp is numpy else graph_cache()
        self.iterations = 0

    def solve(self, field):
        """Each column k of ``field`` (columns, wavenumbers; complex) solved by its system."""
        target = self.rtol**2 * self._start(field)
        for self.iterations in range(1, self.max_it + 1):
            if self._step() <= target:
                return self.X.view(self.xp.complex128).reshape(field.shape)
        raise SectionConvergenceError(f"the 2D systems' CG did not reach a relative residual of {self.rtol:g} in "
                                      f"{self.max_it} iterations")

    def _start(self, field):
        """CG's start from x = 0 on ``field``; the squared 3D norm of the right-hand side (over the ranks)."""
        if self.multigrid is None:
            return self.total(0.0)
        xp, kernels = self.xp, self._kernels
        X, R, Z, D = self.X, self.R, self.Z, self.D
        R[...] = xp.ascontiguousarray(field).view(xp.float64).reshape(R.shape)
        if self.singular:  # the constants' system: its right-hand side made consistent
            R[:, 0, :] -= R[:, 0, :].mean(axis=0)
        X[...] = 0.0
        norm = self._weighted_norm(R)
        self.multigrid.apply(R, Z)
        D[...] = Z
        self.rz[...] = 0.0
        kernels.column_dots(R, Z, self.rz)
        return norm

    def _step(self):
        """One CG iteration; the squared 3D norm of the new residual (over the ranks)."""
        if self.multigrid is None:
            return self.total(0.0)
        if self.graphs is None:
            self._iterate()
        else:
            self.graphs.run("iteration", self._iterate)
        return self._weighted(self.rr)

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
        """sum_j counts_j column_norms_j, read to the host (and summed over the ranks)."""
        return self.total(float(self.counts @ numpy.asarray(column_norms if self.xp is numpy else
                                                            column_norms.get())))

    def describe(self):
        if self.multigrid is None:
            return "no wavenumbers of its own"
        rows = ", ".join(str(n) for n, _ in self.multigrid.sizes())
        return (f"{self.multigrid.shifts.size} wavenumbers at once: CG to rtol {self.rtol:g} with one aggregation "
                f"hierarchy of the cross-section (rows {rows}), {self.iterations} iterations in the last solve")


def _split(layer_of, column_of, layer_to, column_to, data, shape):
    """(c, B) of an operator's entries ``data`` from (layer_of, column_of)
    to (layer_to, column_to), the columns global, the rows' those of one
    rank (``shape``: layers, its columns, its first column, every rank's
    columns): c the couplings of each of its columns to the next layer, B
    a layer's own block (its columns x every column), both the same in
    every layer; an ExtrusionError saying which layer differs or why the
    entries are no extruded operator."""
    layers, columns, start, total = shape
    step = (layer_to - layer_of) % layers
    scale = float(abs(data).max(initial=0.0)) or 1.0
    across = ((step == 1) | (step == layers - 1)) & (column_of != column_to)
    if across.any():
        k = int(numpy.flatnonzero(across)[0])
        raise ExtrusionError(f"the cell of column {column_of[k]} in layer {layer_of[k]} is coupled to column "
                             f"{column_to[k]} of the next layer: not an extrusion")
    if ((step > 1) & (step < layers - 1)).any():
        raise ExtrusionError("cells are coupled to layers further than the next: not an extrusion")
    up, down = step == 1, step == layers - 1
    own = column_of - start
    c = numpy.zeros((layers, columns))
    c[layer_of[up], own[up]] = -data[up]  # the coupling of layer l to l + 1, per column
    below = numpy.zeros((layers, columns))
    below[layer_to[down], own[down]] = -data[down]  # the same seen from layer l + 1
    if float(abs(c - below).max(initial=0.0)) > TOLERANCE * scale:
        raise ExtrusionError("the couplings between layers are not symmetric")
    if (c[-1] == 0).all():
        raise ExtrusionError("no coupling between the last layer and the first: the axis is not periodic")
    spread = abs(c - c[0]).max(axis=1, initial=0.0)
    if float(spread.max()) > TOLERANCE * scale:
        layer = int(numpy.argmax(spread))
        raise ExtrusionError(f"layer {layer}'s couplings to the next differ from layer 0's by up to "
                             f"{spread[layer]:.3g}: the layers are not equal (their spacing or their cells)")
    inside = step == 0
    blocks = [scipy.sparse.csr_matrix((data[inside & (layer_of == l)],
                                       (own[inside & (layer_of == l)], column_to[inside & (layer_of == l)])),
                                      shape=(columns, total)) for l in range(layers)]
    for l, block in enumerate(blocks[1:], start=1):
        difference = abs(block - blocks[0]).max() if block.nnz or blocks[0].nnz else 0.0
        if difference > TOLERANCE * scale:
            raise ExtrusionError(f"layer {l}'s cross-section operator differs from layer 0's by up to "
                                 f"{difference:.3g}")
    return c[0], blocks[0]
