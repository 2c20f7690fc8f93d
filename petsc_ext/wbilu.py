"""``-pc_type wbilu``: block ILU(0) with wavefront (level) scheduling.

The factors equal PETSc's ``ilu`` on the same BAIJ matrix (natural ordering,
zero fill) to rounding; the levels only order the work. The block size is the
matrix's (BAIJ, or any matrix with MatSetBlockSize); it runs where the
operator's vectors live: NumPy for host vectors, CUDA kernels for CUDA ones
(an aijcusparse or gpusell matrix with a block size). In parallel each rank
factors its own diagonal block, as bjacobi + ilu does.

Levels (``-pc_wbilu_levels_method``): ``dmda``, the hyperplanes i + j + k of
the DMDA the matrix came from (star stencils); ``graph``, Kahn's layers of
the dependency graph (any pattern); ``auto``, dmda when the matrix has a DMDA
with one block per cell, else graph. See gpu_mats.block_ilu.
"""

import numpy
import scipy.sparse
from petsc4py import PETSc

from gpu_mats.block_ilu import PERSISTENT_MAX_BLOCK_SIZE, BlockILU, SingularBlockError, graph_levels, grid_levels

from .arrays import in_out_arrays
from .options import Option
from .python_type import PythonPC

LEVEL_METHODS = ("auto", "dmda", "graph")
SCHEDULES = ("auto", "launch", "graph", "persistent")
PETSC_ERR_MAT_LU_ZRPVT = 71


class ZeroPivotError(SingularBlockError):
    petsc_code = PETSC_ERR_MAT_LU_ZRPVT


def local_blocks(P):
    """The rank's diagonal block of P as (indptr, indices, blocks (nnzb, bs, bs))."""
    rbs, cbs = P.getBlockSizes()
    if rbs != cbs:
        raise ValueError(f"wbilu needs square blocks; the matrix has {rbs}-by-{cbs} blocks")
    n = P.getLocalSize()[0]
    if n % rbs or P.getLocalSize()[1] != n:
        raise ValueError(f"wbilu needs a square local block whose size is a multiple of the block size {rbs}; "
                         f"this rank has {P.getLocalSize()} rows and columns")
    indptr, indices, data = P.getDiagonalBlock().getValuesCSR()
    bsr = scipy.sparse.csr_matrix((data, indices, indptr), shape=(n, n)).tobsr(blocksize=(rbs, rbs))
    bsr.sort_indices()
    return bsr.indptr, bsr.indices, bsr.data


def dmda_levels(P):
    """Levels i + j + k of the rank's cells, or None when P has no DMDA with one block per cell."""
    dm = P.getDM()
    if not dm or dm.getType() != PETSc.DM.Type.DA or dm.getDof() != P.getBlockSize():  # no DM: a NULL handle
        return None
    if dm.getStencilType() != PETSc.DMDA.StencilType.STAR:
        raise ValueError("wbilu: DMDA levels need a star stencil (a box stencil couples cells of one "
                         "hyperplane); use -pc_wbilu_levels_method graph")
    return grid_levels([hi - lo for lo, hi in dm.getRanges()])


class WavefrontBlockILU(PythonPC):
    """The context of a PC of type wbilu (petsc4py's Python PC protocol)."""

    TYPE, TITLE, EVENTS = "wbilu", "Wavefront block ILU(0) (wbilu)", ("Apply",)
    SUMMARY = "block ILU(0), natural ordering"
    OPTIONS = (
        Option("pc_wbilu_levels_method", "levels_method", "auto", "dmda: the hyperplanes i+j+k of the "
               "matrix's DMDA (star stencils); graph: layers of the dependency graph (any pattern); auto: dmda "
               "when the matrix has a DMDA with one block per cell", choices=LEVEL_METHODS, view="levels {}"),
        Option("pc_wbilu_schedule", "schedule", "auto", "GPU sweeps: launch (a kernel per level), graph (those "
               "launches replayed as a CUDA graph), persistent (one cooperative kernel, a grid barrier between "
               "levels); auto: persistent for block sizes up to 32 (a row's lanes share a warp), graph above",
               choices=SCHEDULES, view="schedule {}"),
    )

    def __init__(self):
        super().__init__()
        self.factors, self.levels_used = None, None
        self._gpu_events = None  # (start, end) of the last GPU apply
        self.apply_seconds, self.applies = 0.0, 0

    def build(self, pc):
        P = self.operator(pc)
        indptr, indices, blocks = local_blocks(P)
        levels = None if self.levels_method == "graph" else dmda_levels(P)
        if levels is None and self.levels_method == "dmda":
            raise ValueError("-pc_wbilu_levels_method dmda: the matrix has no DMDA with one block per cell "
                             "(create it with DMCreateMatrix, or use graph)")
        self.levels_used = "dmda" if levels is not None else "graph"
        if levels is None:
            levels = graph_levels(indptr, indices)
        try:
            schedule = self._schedule(P.getBlockSize())
            self.factors = BlockILU(indptr, indices, blocks, levels, self.xp, schedule)
        except SingularBlockError as exc:
            raise ZeroPivotError(exc.row + P.getOwnershipRange()[0] // P.getBlockSize(), exc.pivot) from None
        if self.xp is not numpy:
            self._gpu_events = (self.xp.cuda.Event(), self.xp.cuda.Event())

    def release(self):
        self.factors = None

    def _schedule(self, bs):
        # auto: the persistent sweeps were the fastest at every size measured (BENCHMARKS.md)
        if self.schedule == "persistent" and bs > PERSISTENT_MAX_BLOCK_SIZE and self.xp is not numpy:
            raise ValueError(f"-pc_wbilu_schedule persistent needs a block size of at most "
                             f"{PERSISTENT_MAX_BLOCK_SIZE} (the matrix has {bs}); use launch or graph")
        if self.schedule != "auto" or self.xp is numpy:
            return self.schedule
        return "persistent" if bs <= PERSISTENT_MAX_BLOCK_SIZE else "graph"

    def apply(self, pc, x, y):
        # Timed without a device synchronize: host applies by the clock, a GPU
        # apply by CUDA events read when the PC is viewed.
        self.events["Apply"].begin()
        if self.xp is numpy:
            start = PETSc.Log.getTime()
        else:
            self._gpu_events[0].record()
        try:
            with in_out_arrays(x, y, self.xp, "wbilu") as (xa, ya):
                self.factors.apply(xa, ya)
        finally:
            if self.xp is numpy:
                self.apply_seconds += PETSc.Log.getTime() - start
            else:
                self._gpu_events[1].record()
            self.applies += 1
            self.events["Apply"].end()

    def describe(self, pc):
        f = self.factors
        if f is None:
            return []
        parallel = pc.getComm().getSize() > 1
        levels = self.max_over_ranks(pc, f.num_levels)
        lines = [f"  block size {f.block_size}, {f.num_rows} block rows and {f.nnzb} blocks on rank 0's "
                 "diagonal block (block-local on each rank)" if parallel else
                 f"  block size {f.block_size}, {f.num_rows} block rows, {f.nnzb} blocks",
                 f"  {levels} levels ({self.levels_used}), {f.num_rows / max(f.num_levels, 1):.1f} rows per "
                 f"level on average, schedule {f.schedule} ({'GPU' if self.xp is not numpy else 'host'})",
                 self.setup_line(pc)]
        if self.applies and self.xp is numpy:
            per_apply = self.max_over_ranks(pc, self.apply_seconds / self.applies)
            lines.append(f"  apply time: {per_apply * 1e3:.4f} ms mean over {self.applies} applies")
        elif self.applies:
            last = self.max_over_ranks(pc, self.xp.cuda.get_elapsed_time(*self._gpu_events))
            lines.append(f"  apply time: {last:.4f} ms, the last of {self.applies} applies (CUDA events)")
        return lines
