"""The stencil family on the host: the NumPy twins of ``stencil.cu``, computing in float64 and storing in the
vectors' type, as the kernels do."""

import numpy

from .. import wide


def _product(S, x):
    """S x on the grid: the diagonal times x, less c_d times each neighbour along axis d."""
    grid = wide(x).reshape(S.shape[::-1])  # numbered x fastest: the last array axis is x
    out = S.diag.astype(numpy.float64).reshape(grid.shape) * grid
    for d, c in enumerate(S.couplings):
        axis = grid.ndim - 1 - d
        for shift in (1, -1):
            moved = numpy.roll(grid, shift, axis=axis)  # moved[i] = grid[i - shift]
            if not S.periodic[d]:  # no neighbour across a wall
                edge = [slice(None)] * grid.ndim
                edge[axis] = 0 if shift == 1 else -1
                moved[tuple(edge)] = 0.0
            out -= c * moved
    return out.ravel()


def spmv(S, x, y, z, alpha, beta):
    """Twin of stencil.cu's stencil_spmv."""
    product = alpha * _product(S, x)
    y[...] = product + beta * wide(z) if beta != 0.0 else product


def chebyshev_step(S, d, d_next, r, z, scaling, x, a, c):
    """Twin of stencil.cu's stencil_chebyshev."""
    residual = wide(z) - _product(S, d)
    step = a * wide(d) + c * wide(scaling) * residual
    r[...] = residual
    d_next[...] = step
    x[...] = wide(x) + step


def chebyshev_first(S, b, scaling, d_next, r, x, c0, a, c):
    """Twin of stencil.cu's stencil_chebyshev_first: d0 = c0 scaling b stored in x, then the step from it."""
    x[...] = c0 * wide(scaling) * wide(b)
    chebyshev_step(S, x.copy(), d_next, r, b, scaling, x, a, c)


def transfer(T, x, y, z, alpha, beta):
    """Twin of stencil.cu's tensor_transfer, one axis at a time (T_x, then
    T_y, then T_z: three gathers of ``width`` entries where the kernel sums
    width^3 products per cell; the same sum in another order)."""
    grid = wide(x).reshape(T.in_shape[::-1])
    for axis, (cols, weights) in enumerate(zip(T.cols, T.weights)):
        along = numpy.moveaxis(grid, grid.ndim - 1 - axis, -1)  # the array's last axis is x
        grid = numpy.moveaxis((along[..., cols] * weights).sum(axis=-1), -1, grid.ndim - 1 - axis)
    product = alpha * grid.ravel()
    y[...] = product + beta * wide(z) if beta != 0.0 else product
