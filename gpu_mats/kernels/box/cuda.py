"""The box family on the GPU: launchers for ``box.cu``, compiled once per process with ``cupy.RawModule``."""

import functools
import pathlib

import cupy
import numpy

from .. import family

BLOCK = (32, 4)  # a block's cells along x and y (the fastest of 128x1, 64x2, 32x4, 32x8: BENCHMARKS.md)
KERNELS = ("interpolate", "face_gradient", "face_sum", "cell_gradient", "convection", "diffusion", "transport")
PLANES = 4  # the cells along z of a thread of largest_face_sum (the fastest of PLANES_CHOICES: BENCHMARKS.md)
PLANES_CHOICES = (4, 8, 16, 32)  # those compiled, for benchmarks/box_stencils.py's --planes


@functools.cache
def _module():
    return cupy.RawModule(code=pathlib.Path(__file__).with_name("box.cu").read_text(), options=("-std=c++17",),
                          name_expressions=[f"{name}<{dim}>" for name in KERNELS for dim in (2, 3)]
                          + [f"largest_face_sum<{dim},{planes}>" for dim in (2, 3) for planes in PLANES_CHOICES])


def _launch(name, grid, *args, planes=None):
    """Kernel ``name`` for the grid's dimension, a thread a cell (or, given ``planes``, its template's second
    argument, a column of that many cells along z) in blocks of BLOCK cells of an x-y plane, after the grid's
    arguments."""
    if grid.cells:
        nx, ny, nz = grid.shape
        bits = sum(1 << d for d, wraps in enumerate(grid.periodic) if wraps)
        off = grid.offsets
        bx, by = min(BLOCK[0], nx), min(BLOCK[1], ny)
        template = f"{name}<{grid.dim}>" if planes is None else f"{name}<{grid.dim},{planes}>"
        _module().get_function(template)((-(-nx // bx), -(-ny // by), -(-nz // (planes or 1))), (bx, by), (
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
    if PLANES not in PLANES_CHOICES:
        raise ValueError(f"the box family's PLANES is {PLANES}; compiled: {PLANES_CHOICES}")
    family("blas", cupy).fill(out, 0.0)  # a kernel, not a memset node in a step's graph
    _launch("largest_face_sum", grid, w, out, *_constants(scale), planes=PLANES)


def cell_gradient(grid, p, out, scale):
    _launch("cell_gradient", grid, p, out, *_constants(scale))


def convection(grid, w, u, out, half):
    _launch("convection", grid, w, u, out, *_constants(half))


def diffusion(grid, u, out, conductance, z=None):
    _launch("diffusion", grid, u, *_addend(z, out), out, *_constants(conductance))


def transport(grid, w, u, v, out, half, conductance):
    _launch("transport", grid, w, u, v, out, *_constants(half), *_constants(conductance))
