"""The block ILU family on the GPU: launchers for ``block_ilu.cu``, compiled
per block size (and, for the persistent sweeps, per number of blocks
prefetched per row).

The sweeps run their levels in one of three schedules (Luo et al. 2015's per-level
cost is what they trade): ``launch``, a kernel launch per level from Python;
``graph``, the same launches captured once per (b, x) pair of addresses and
replayed as one CUDA graph; ``persistent``, one cooperative launch per sweep
whose warps stride over each level and meet at a grid barrier, each row's
blocks loaded before the barrier that opens its level.
"""

import functools
import pathlib
import weakref

import cupy
import numpy

from ...block_ilu import PERSISTENT_MAX_BLOCK_SIZE, PIVOT_TOLERANCE
from ..cuda_graphs import capture, replay

FACTOR_BLOCK = 128
SWEEP_THREADS = 256  # a sweep block holds SWEEP_THREADS // bs rows, bs threads each
PERSISTENT_BLOCKS_PER_SM = 2
PREFETCHED_BLOCKS = 4  # at most this many blocks per row wait in registers for a level's barrier
_GRAPHS_KEPT = 16


def _source():
    return pathlib.Path(__file__).with_name("block_ilu.cu").read_text()


@functools.cache
def _kernels(bs):
    names = {"factor": f"bilu_factor_level<{bs}>",
             "lower": f"bilu_sweep_level<{bs},false>", "upper": f"bilu_sweep_level<{bs},true>"}
    module = cupy.RawModule(code=_source(), options=("-std=c++17",), name_expressions=list(names.values()))
    return {key: module.get_function(name) for key, name in names.items()}


@functools.cache
def _persistent_kernel(bs, prefetched, upper):
    """The persistent sweep that loads its rows' first ``prefetched`` blocks
    ahead of each level's barrier."""
    name = f"bilu_sweep_persistent<{bs},{prefetched},{'true' if upper else 'false'}>"
    module = cupy.RawModule(code=_source(), options=("-std=c++17",), name_expressions=[name],
                            enable_cooperative_groups=True)
    return module.get_function(name)


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
        self.graphs = {}
        self.persistent_kernels = self._persistent_setup(f) if bs <= PERSISTENT_MAX_BLOCK_SIZE else None

    def _persistent_setup(self, f):
        """Grid and kernels of the persistent sweeps: enough blocks for the
        widest level, up to PERSISTENT_BLOCKS_PER_SM per SM (fewer
        blocks, cheaper barriers)."""
        bs, sms = f.block_size, cupy.cuda.Device().attributes["MultiProcessorCount"]
        widest = max(hi - lo for lo, hi in self.levels)
        rows_per_block = SWEEP_THREADS // 32 * (32 // bs)  # 32 // bs rows per warp
        blocks = min(sms * PERSISTENT_BLOCKS_PER_SM, -(-widest // rows_per_block))  # no block without a row
        self.persistent_grid = (max(blocks, 1),)
        kernels = {}
        for key, ptr in (("lower", f.lower_ptr), ("upper", f.upper_ptr)):
            longest = int(cupy.diff(ptr).max()) if ptr.size > 1 else 0
            kernels[key] = _persistent_kernel(bs, max(1, min(longest, PREFETCHED_BLOCKS)), key == "upper")
        return kernels

    def per_level(self, b, x):
        for key, args, levels, source in (("lower", self.lower, self.levels, b),
                                          ("upper", self.upper, self.levels[::-1], x)):
            kernel = self.kernels[key]
            for r0, r1 in levels:
                grid = (-(-(r1 - r0) // self.rows_per_block),)
                kernel(grid, self.block, (numpy.int32(r0), numpy.int32(r1)) + args + (source, x),
                       shared_mem=self.shared)

    def persistent(self, b, x):
        if self.persistent_kernels is None:
            raise ValueError(f"the persistent schedule needs a block size of at most {PERSISTENT_MAX_BLOCK_SIZE}")
        count = numpy.int32(len(self.levels))
        for key, args, source in (("lower", self.lower, b), ("upper", self.upper, x)):
            self.persistent_kernels[key](self.persistent_grid, (SWEEP_THREADS,),
                                         (count, self.level_ptr) + args + (source, x))

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
    if f.num_rows == 0:  # a rank without rows: no levels to sweep
        return
    sweeps = _sweeps.get(f)
    if sweeps is None:
        sweeps = _sweeps[f] = _Sweeps(f)
    run = {"launch": sweeps.per_level, "graph": sweeps.graph, "persistent": sweeps.persistent}[schedule]
    run(b, x)
