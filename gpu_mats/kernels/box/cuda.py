"""The box family on the GPU: launchers for ``box.cu``, compiled once per process with ``cupy.RawModule``."""

import functools
import pathlib

import cupy
import numpy

BLOCK = (32, 4)  # a block's cells along x and y (the fastest of 128x1, 64x2, 32x4, 32x8: BENCHMARKS.md)
KERNELS = ("interpolate", "face_gradient", "face_sum", "largest_face_sum", "cell_gradient", "convection", "diffusion",
           "transport")


@functools.cache
def _module():
    return cupy.RawModule(code=pathlib.Path(__file__).with_name("box.cu").read_text(), options=("-std=c++17",),
                          name_expressions=[f"{name}<{dim}>" for name in KERNELS for dim in (2, 3)])


PLANES = 8  # the cells along z of a thread of largest_face_sum


def _launch(name, grid, *args, planes=1):
    """Kernel ``name`` for the grid's dimension, a thread a cell (or a column of ``planes`` cells along z) in
    blocks of BLOCK cells of an x-y plane, after the grid's arguments."""
    if grid.cells:
        nx, ny, nz = grid.shape
        bits = sum(1 << d for d, wraps in enumerate(grid.periodic) if wraps)
        off = grid.offsets
        bx, by = min(BLOCK[0], nx), min(BLOCK[1], ny)
        _module().get_function(f"{name}<{grid.dim}>")((-(-nx // bx), -(-ny // by), -(-nz // planes)), (bx, by), (
            numpy.int64(grid.cells), numpy.int32(nx), numpy.int32(ny), numpy.int32(nz), numpy.int32(bits),
            numpy.int64(off[1]), numpy.int64(off[2]), *args))


def _constants(values):
    return tuple(numpy.float64(v) for v in tuple(values) + (0.0,) * (3 - len(values)))


def _addend(z, out):
    """A kernel's optional addend and its flag: z to add, or out, which the kernel then does not read."""
    return out if z is None else z, numpy.int32(z is not None)


def interpolate(grid, u, w):
    _launch("interpolate", grid, u, w)


def face_gradient(grid, p, w, inverse, z=None):
    _launch("face_gradient", grid, p, *_addend(z, w), w, *_constants(inverse))


def face_sum(grid, w, out, scale, z=None, speeds=False):
    _launch("face_sum", grid, numpy.int32(speeds), w, *_addend(z, out), out, *_constants(scale))


def largest_rate(grid, w, out, scale):
    out.fill(0.0)
    _launch("largest_face_sum", grid, numpy.int32(PLANES), w, out, *_constants(scale), planes=PLANES)


def cell_gradient(grid, p, out, scale):
    _launch("cell_gradient", grid, p, out, *_constants(scale))


def convection(grid, w, u, out, half):
    _launch("convection", grid, w, u, out, *_constants(half))


def diffusion(grid, u, out, conductance, z=None):
    _launch("diffusion", grid, u, *_addend(z, out), out, *_constants(conductance))


def transport(grid, w, u, v, out, half, conductance):
    _launch("transport", grid, w, u, v, out, *_constants(half), *_constants(conductance))
