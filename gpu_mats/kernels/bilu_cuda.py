"""Launchers for ``block_ilu.cu``, one compiled module per block size.

The sweeps run their levels in one of three schedules (seed 001's per-level
cost is what they trade): ``launch``, a kernel launch per level from Python;
``graph``, the same launches captured once per (b, x) pair of addresses and
replayed as one CUDA graph; ``persistent``, one cooperative launch per sweep
whose thread blocks stride over each level and meet at a grid barrier.
"""

import functools
import pathlib
import weakref

import cupy
import numpy

from ..block_ilu import PIVOT_TOLERANCE
from .cuda import capture, replay

FACTOR_BLOCK = 128
SWEEP_THREADS = 256  # a sweep block holds SWEEP_THREADS // bs rows, bs threads each
PERSISTENT_BLOCKS_PER_SM = 2
_GRAPHS_KEPT = 16


def _names(bs):
    return {"factor": f"bilu_factor_level<{bs}>",
            "lower": f"bilu_sweep_level<{bs},false>", "upper": f"bilu_sweep_level<{bs},true>",
            "lower_persistent": f"bilu_sweep_persistent<{bs},false>",
            "upper_persistent": f"bilu_sweep_persistent<{bs},true>"}


@functools.cache
def _kernels(bs):
    source = pathlib.Path(__file__).with_name("block_ilu.cu").read_text()
    names = _names(bs)
    plain = [names["factor"], names["lower"], names["upper"]]
    persistent = [names["lower_persistent"], names["upper_persistent"]]
    module = cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=plain)
    cooperative = cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=persistent,
                                 enable_cooperative_groups=True)
    return {key: (cooperative if key.endswith("persistent") else module).get_function(name)
            for key, name in names.items()}


def factor(f, vals, dinv):
    kernels = _kernels(f.block_size)["factor"]
    info = cupy.zeros(f.num_rows, dtype=numpy.int32)
    args = (f.ptr, f.diag, f.col_rank, f.tri_ptr, f.tri_target, f.tri_source, vals, dinv, info,
            numpy.float64(PIVOT_TOLERANCE))
    for level in range(f.num_levels):
        r0, r1 = int(f.level_ptr[level]), int(f.level_ptr[level + 1])
        kernels((-(-(r1 - r0) // FACTOR_BLOCK),), (FACTOR_BLOCK,), (numpy.int32(r0), numpy.int32(r1)) + args)
    return info


class _Sweeps:
    """Launch settings and arguments of one factorization's sweeps."""

    def __init__(self, f):
        bs = f.block_size
        self.kernels = _kernels(bs)
        self.rows_per_block = SWEEP_THREADS // bs
        self.block = (self.rows_per_block * bs,)
        self.shared = self.rows_per_block * bs * 8
        self.levels = [(int(f.level_ptr[i]), int(f.level_ptr[i + 1])) for i in range(f.num_levels)]
        self.level_ptr = cupy.asarray(f.level_ptr, dtype=numpy.int64)
        self.lower = (f.rows, f.lower_ptr, f.lower_cols, f.lower_vals, f.dinv)
        self.upper = (f.rows, f.upper_ptr, f.upper_cols, f.upper_vals, f.dinv)
        sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self.persistent_grid = (sms * PERSISTENT_BLOCKS_PER_SM,)
        self.graphs = {}

    def per_level(self, b, x):
        for key, args, levels, source in (("lower", self.lower, self.levels, b),
                                          ("upper", self.upper, self.levels[::-1], x)):
            kernel = self.kernels[key]
            for r0, r1 in levels:
                grid = (-(-(r1 - r0) // self.rows_per_block),)
                kernel(grid, self.block, (numpy.int32(r0), numpy.int32(r1)) + args + (source, x),
                       shared_mem=self.shared)

    def persistent(self, b, x):
        count = numpy.int32(len(self.levels))
        for key, args, source in (("lower_persistent", self.lower, b), ("upper_persistent", self.upper, x)):
            self.kernels[key](self.persistent_grid, self.block, (count, self.level_ptr) + args + (source, x),
                              shared_mem=self.shared)

    def graph(self, b, x):
        key = (b.data.ptr, x.data.ptr)
        graph = self.graphs.get(key)
        if graph is None:
            if len(self.graphs) >= _GRAPHS_KEPT:
                self.graphs.pop(next(iter(self.graphs)))
            graph = self.graphs[key] = capture(lambda: self.per_level(b, x))
        replay(graph)


_sweeps = weakref.WeakKeyDictionary()


def forget(f):
    """Drop the launch arguments cached for f (its factors were replaced)."""
    _sweeps.pop(f, None)


def solve(f, b, x, schedule):
    sweeps = _sweeps.get(f)
    if sweeps is None:
        sweeps = _sweeps[f] = _Sweeps(f)
    run = {"launch": sweeps.per_level, "graph": sweeps.graph, "persistent": sweeps.persistent}[schedule]
    run(b, x)
