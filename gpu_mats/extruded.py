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
230, 2011; Oyarzún 2015, ch. 4). Here each is factorized once (scipy's
SuperLU) and solved for the transform's real and imaginary parts: on the
host. The wavenumber 0 system of a pure-Neumann operator is singular (the
constants): its solution is pinned at one cell and made of zero mean.
"""

import numpy
import scipy.sparse
import scipy.sparse.linalg

TOLERANCE = 1e-10  # of the couplings' agreement between layers, relative to the largest


class ExtrusionError(ValueError):
    """A matrix that is not an extruded operator on the given layers, with the reason."""


class ExtrudedSolver:
    """x = A^+ b for ``A`` (scipy CSR, host) whose rows ``order[l, j]`` are
    column j's cell in layer l (``order`` (layers, columns), the layers along
    the periodic axis in turn): ``solve(b, x)`` on flat host arrays."""

    def __init__(self, A, order):
        A = scipy.sparse.csr_matrix(A)
        self.order = numpy.asarray(order)
        layers, columns = self.order.shape
        if layers < 3:
            raise ExtrusionError(f"{layers} layers: a periodic axis needs at least 3")
        if A.shape[0] != layers * columns or numpy.unique(self.order).size != A.shape[0]:
            raise ExtrusionError(f"{layers} layers of {columns} cells are not the matrix's {A.shape[0]} rows")
        P = A[self.order.ravel()][:, self.order.ravel()].tocoo()  # rows and columns layer by layer
        self.c, cross_section = _split(P, layers, columns)
        self.layers, self.columns = layers, columns
        self.L = (cross_section - scipy.sparse.diags(2.0 * self.c)).tocsc()
        mu = 4.0 * numpy.sin(numpy.pi * numpy.arange(layers // 2 + 1) / layers) ** 2
        scale = float(abs(A.data).max(initial=0.0)) or 1.0
        self.singular = float(abs(A.sum(axis=1)).max()) <= TOLERANCE * scale  # rows summing to 0: constants
        self.factors = [self._factor(self.L + m * scipy.sparse.diags(self.c), k == 0 and self.singular)
                        for k, m in enumerate(mu)]

    @staticmethod
    def _factor(S, pinned):
        """SuperLU of S, its first row and column replaced by the identity's where ``pinned`` (S singular)."""
        S = S.tolil()
        if pinned:
            S[0, :] = 0.0
            S[:, 0] = 0.0
            S[0, 0] = 1.0
        return scipy.sparse.linalg.splu(S.tocsc())

    def solve(self, b, x):
        """x = A^+ b (b, x flat host arrays)."""
        field = numpy.fft.rfft(numpy.asarray(b)[self.order], axis=0)
        for k, factor in enumerate(self.factors):
            rhs = field[k]
            if k == 0 and self.singular:
                rhs = rhs.copy()
                rhs[0] = 0.0
            field[k] = factor.solve(rhs.real) + 1j * factor.solve(rhs.imag)
        solution = numpy.fft.irfft(field, n=self.layers, axis=0)
        if self.singular:
            solution -= solution.mean()
        x[self.order.ravel()] = solution.ravel()


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
