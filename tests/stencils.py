"""Stencil matrices on structured 3D grids as CSR arrays, rows in the natural
(x fastest, as DMDA) order: the test and benchmark matrices of the project."""

import itertools

import numpy


def stencil_csr(n, offsets, weights):
    """CSR of the stencil ``sum_k weights[k] * u[i + offsets[k]]`` on an n[0] x n[1] x n[2] grid.

    Neighbours outside the grid are dropped (homogeneous Dirichlet).
    Columns come out ascending when offsets are sorted by (dz, dy, dx).
    """
    nx, ny, nz = n
    order = sorted(range(len(offsets)), key=lambda k: offsets[k][::-1])
    offsets = numpy.array([offsets[k] for k in order])
    weights = numpy.array([weights[k] for k in order], dtype=numpy.float64)
    k, j, i = numpy.meshgrid(numpy.arange(nz), numpy.arange(ny), numpy.arange(nx), indexing="ij")
    i, j, k = (a.reshape(-1, 1) for a in (i, j, k))
    ii, jj, kk = i + offsets[:, 0], j + offsets[:, 1], k + offsets[:, 2]
    inside = (ii >= 0) & (ii < nx) & (jj >= 0) & (jj < ny) & (kk >= 0) & (kk < nz)
    cols = (kk * ny + jj) * nx + ii
    indptr = numpy.zeros(nx * ny * nz + 1, dtype=numpy.int64)
    numpy.cumsum(inside.sum(axis=1), out=indptr[1:])
    data = numpy.broadcast_to(weights, inside.shape)[inside]
    return indptr, cols[inside].astype(numpy.int32), data


def laplacian(n, points=7):
    """The SPD Dirichlet Laplacian (unit spacing) with a 7- or 27-point stencil on an n^3 grid."""
    if points == 7:
        offsets = [(0, 0, 0)] + [tuple(s * e for e in axis) for axis in numpy.eye(3, dtype=int) for s in (-1, 1)]
        weights = [6.0] + [-1.0] * 6
    elif points == 27:
        offsets = list(itertools.product((-1, 0, 1), repeat=3))
        weights = [26.0 if o == (0, 0, 0) else -1.0 for o in offsets]
    else:
        raise ValueError(f"points must be 7 or 27, got {points}")
    return stencil_csr((n, n, n), offsets, weights)


def block_stencil(n, bs, seed=0):
    """A 7-point block system like Luo et al. 2015's INCOMP3D matrices on an n^3
    grid: (indptr, indices, blocks (nnzb, bs, bs)), random off-diagonal
    blocks and block-diagonally dominant rows."""
    offsets = [(0, 0, 0)] + [tuple(s * e for e in axis) for axis in numpy.eye(3, dtype=int) for s in (-1, 1)]
    indptr, indices, _ = stencil_csr((n, n, n), offsets, [1.0] * 7)
    rng = numpy.random.default_rng(seed)
    blocks = rng.uniform(-0.1, 0.1, (indices.size, bs, bs)) - 0.15 * numpy.eye(bs)
    rows = numpy.repeat(numpy.arange(n ** 3), numpy.diff(indptr))
    diagonal = indices == rows
    off_sums = numpy.zeros((n ** 3, bs))
    numpy.add.at(off_sums, rows[~diagonal], numpy.abs(blocks[~diagonal]).sum(axis=2))
    blocks[diagonal] = rng.uniform(-0.1, 0.1, (n ** 3, bs, bs))
    own = numpy.abs(blocks[diagonal]).sum(axis=2)
    blocks[diagonal] += (off_sums + own + 0.5)[:, :, None] * numpy.eye(bs)
    return indptr, indices.astype(numpy.int64), blocks
