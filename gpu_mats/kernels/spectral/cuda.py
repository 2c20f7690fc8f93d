"""The spectral family on the GPU: cuFFT plans of CuPy that write into the
caller's arrays (cupy.fft allocates its outputs, which a CUDA graph cannot
replay), and ``spectral.cu``'s sweeps."""

import functools
import math
import pathlib

import cupy
import numpy
from cupy.cuda import cufft


@functools.cache
def _sweeps():
    code = pathlib.Path(__file__).with_name("spectral.cu").read_text()
    return cupy.RawModule(code=code).get_function("tridiagonal_sweeps")


def _strides(shape):
    """A C-contiguous array's strides, in elements."""
    return [math.prod(shape[a + 1:]) for a in range(len(shape))]


def _layout(shape, axes):
    """cuFFT's advanced layout (embed, stride, dist, batch) of the transform
    along ``axes`` of a C-contiguous array of ``shape``, the other axis (at
    most one) its batch: element (i_0 .. i_k) of batch b at
    b dist + ((i_0 embed_1 + i_1) embed_2 + ...) stride."""
    strides, others = _strides(shape), [a for a in range(len(shape)) if a not in axes]
    if len(others) > 1:
        raise ValueError(f"one cuFFT plan transforms along all axes of {shape} but one, not along {axes}")
    embed = [shape[axes[0]]] + [strides[a] // strides[b] for a, b in zip(axes, axes[1:])]
    if others:
        return embed, strides[axes[-1]], strides[others[0]], shape[others[0]]
    return embed, strides[axes[-1]], math.prod(shape), 1


@functools.cache
def _plan(real_shape, axes, forward):
    """The D2Z (``forward``) or Z2D plan between a real array of
    ``real_shape`` and its half spectrum along ``axes``."""
    half = list(real_shape)
    half[axes[-1]] = real_shape[axes[-1]] // 2 + 1
    (r_embed, r_stride, r_dist, batch), (c_embed, c_stride, c_dist, _) = _layout(real_shape, axes), _layout(half, axes)
    sizes = [real_shape[a] for a in axes]
    if forward:
        layout = (r_embed, r_stride, r_dist, c_embed, c_stride, c_dist, cufft.CUFFT_D2Z)
    else:
        layout = (c_embed, c_stride, c_dist, r_embed, r_stride, r_dist, cufft.CUFFT_Z2D)
    return cufft.PlanNd(sizes, *layout, batch, "C", axes[-1], half[axes[-1]] if forward else real_shape[axes[-1]])


def real_transform(x, axes, out):
    """out = x's real FFT along ``axes`` (cuFFT, no allocation after the plan's first use)."""
    _plan(tuple(x.shape), tuple(axes), True).fft(x, out, cufft.CUFFT_FORWARD)


def inverse_real_transform(spectrum, axes, out):
    """out = the unnormalized inverse real FFT of ``spectrum`` along ``axes`` (cuFFT; spectrum overwritten)."""
    _plan(tuple(out.shape), tuple(axes), False).fft(spectrum, out, cufft.CUFFT_INVERSE)


def tridiagonal_sweeps(couplings, inverse_pivots, scale, rows):
    """The Thomas algorithm along rows' middle axis, a thread per column (spectral.cu)."""
    outer, m, inner = rows.shape
    components = 2 if rows.dtype.kind == "c" else 1
    threads, block = outer * inner * components, 128
    if threads:
        _sweeps()((-(-threads // block),), (block,),
                  (numpy.int64(outer), numpy.int32(m), numpy.int64(inner), numpy.int32(components), couplings,
                   inverse_pivots, numpy.float64(scale), rows.view(cupy.float64)))
