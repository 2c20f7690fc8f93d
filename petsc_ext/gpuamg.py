"""``-pc_type gpuamg``: aggregation algebraic multigrid, set up and cycled
where the matrix's vectors live (CUDA vectors: on the GPU, with CuPy), for
symmetric positive (semi)definite matrices. See gpu_mats.amg for the
algorithm: MIS-2 or pairwise aggregation, smoothed or tentative prolongation,
Galerkin coarse matrices by sparse products (or coarse levels the
application gives, ``set_levels``), a V-cycle with Chebyshev-Jacobi or
l1-Jacobi smoothing that is symmetric (fit for CG), or a K-cycle.

A matrix whose null space is the constants (an all-Neumann Laplacian) keeps
it on every level: the coarsest level's pseudo-inverse solves the singular
system there. In parallel the hierarchy is distributed
(gpu_mats.distributed_amg): aggregates inside a rank, prolongations and
Galerkin products across ranks, the coarsest level gathered on every rank.
"""

import numpy

from gpu_mats import VALUE_DTYPES
from gpu_mats.amg import (AGGREGATIONS, CYCLES, DEGREE, SMOOTHERS, SPARSIFY, THRESHOLD, AggregationAMG, AMGError,
                          AMGSettings, GeometricMultigrid)
from gpu_mats.distributed_amg import DistributedAggregationAMG
from gpu_mats.exchange import TRANSPORTS
from gpu_mats.kernels import graph_cache
from gpu_mats.stencil import StencilMatrix

from .arrays import in_out_arrays
from .gpusell import local_block
from .options import Option
from .python_type import PythonPC


class AggregationMultigridPC(PythonPC):
    """The context of a PC of type gpuamg (petsc4py's Python PC protocol)."""

    TYPE, TITLE, EVENTS = "gpuamg", "GPU aggregation multigrid (gpuamg)", ("Apply",)
    SUMMARY = "aggregation multigrid"
    OPTIONS = (
        Option("pc_gpuamg_threshold", "threshold", THRESHOLD, "strength of connection: |a_ij| >= threshold "
               "sqrt(a_ii a_jj)", low=0.0, high=1.0, view="threshold {}"),
        Option("pc_gpuamg_aggregation", "aggregation", "mis2", "mis2: aggregates around the roots of a "
               "distance-2 maximal independent set; pairwise: repeated pairwise matchings", choices=AGGREGATIONS,
               view="{} aggregation"),
        Option("pc_gpuamg_passes", "passes", 2, "pairwise: matchings per level (aggregates of about 2^passes "
               "rows)", low=1, high=5, view="{} passes", applies=("aggregation", ("pairwise",))),
        Option("pc_gpuamg_mis2_pairs", "mis2_pairs", 0, "mis2: pairwise matchings of the finest level's aggregates "
               "(each halves the first coarse level: a lower operator complexity for more CG iterations)", low=0,
               high=3,
               view="{} pairings of the finest aggregates", applies=("aggregation", ("mis2",))),
        Option("pc_gpuamg_sparsify", "sparsify", SPARSIFY, "coarse operators: drop the Galerkin products' "
               "off-diagonal entries below this fraction of the smaller of their row's and column's largest, "
               "adding them to the diagonal (row sums kept: faster cycles on near-isotropic Laplacians; on "
               "stretched cells more iterations, and a level may turn indefinite); 0: the Galerkin products", low=0.0,
               high=1.0, view=lambda theta: f"coarse operators sparsified at {theta:g}" if theta else
               "Galerkin coarse operators"),
        Option("pc_gpuamg_smoothed", "smoothed", True, "smooth the tentative prolongation by one damped Jacobi "
               "step (smoothed aggregation)", view="smoothed {}"),
        Option("pc_gpuamg_cycle", "cycle", "v", "v: V-cycle, symmetric and linear (cg, cacg); k: K-cycle, two "
               "flexible CG steps per coarse correction (nonlinear: fcg, fgmres)", choices=CYCLES,
               view="{}-cycle"),
        Option("pc_gpuamg_smoother", "smoother", "chebyshev", "chebyshev: Chebyshev-Jacobi on [0.2, 1.1] x the "
               "largest eigenvalue of D^-1 A; l1jacobi: l1-Jacobi", choices=SMOOTHERS, view="{} smoothing"),
        Option("pc_gpuamg_degree", "degree", DEGREE, "smoothing steps before and after the coarse correction", low=1,
               high=16, view="{} steps"),
        Option("pc_gpuamg_max_levels", "max_levels", 25, "most levels", low=1, high=50, view="at most {} levels"),
        Option("pc_gpuamg_value_type", "value_type", "float64", "precision of the hierarchy's stored values",
               choices=tuple(VALUE_DTYPES), view="values {}"),
        Option("pc_gpuamg_vector_type", "vector_type", "float64", "precision of the cycle's vectors (the Krylov "
               "method's stay float64); float32 on one rank with the V-cycle", choices=tuple(VALUE_DTYPES),
               view="cycle vectors {}"),
        Option("pc_gpuamg_cuda_graph", "cuda_graph", True, "replay each V-cycle as one CUDA graph (CUDA vectors; "
               "a graph per pair of vector addresses, captured at its second use)", view="CUDA graph {}"),
        Option("pc_gpuamg_stencil", "stencil", True, "cycle a box's geometric levels as stencils from their grids "
               "(no matrix read per product) where the application gives the grids and a level's operator is one",
               view="box levels as stencils {}"),
        Option("pc_gpuamg_coarse_size", "coarse_size", 1000, "rows at or below which a level is the coarsest "
               "(dense pseudo-inverse; in parallel gathered on every rank)", low=1, high=5000,
               view="coarse size {}"),
        Option("pc_gpuamg_halo_transport", "halo_transport", "auto", "in parallel, how the levels' halos travel: "
               "nccl (GPU to GPU), mpi (through host memory), auto (NCCL where CuPy has it)", choices=TRANSPORTS),
    )

    def __init__(self):
        super().__init__()
        self.amg, self.refreshed, self.graphs, self.given_levels = None, False, None, None

    def set_levels(self, coarse_operators, prolongations, grids=None):
        """Take the coarse levels from the application (scipy CSR: each coarse
        grid's operator, and the prolongations from level k+1 to k), as a box's
        geometric multigrid has them, instead of aggregating: the cycle is the
        same (gpu_mats.amg.GeometricMultigrid). ``grids``: each level's
        (shape, periodic), finest first, cells numbered x fastest, for the
        stencil products (-pc_gpuamg_stencil)."""
        self.given_levels = (list(coarse_operators), list(prolongations), grids)
        self.release()

    def options_changed(self, pc, changed):
        self.release()  # new options: a new hierarchy

    def build(self, pc):
        operator = self.operator(pc)
        block_size = operator.getBlockSize()
        if block_size > 1:
            raise AMGError(f"gpuamg aggregates scalar unknowns; this matrix has block size {block_size} (several "
                           "unknowns per node would be aggregated apart, with a constant null space per unknown "
                           "that a system does not have): use -pc_type gamg, which aggregates blocks")
        comm = operator.getComm().tompi4py()
        if comm.Get_size() > 1:
            if self.vector_type != "float64":
                raise AMGError(f"-pc_gpuamg_vector_type {self.vector_type} is for one rank: in parallel the "
                               "cycle's halo exchanges carry float64")
            if self.given_levels is not None:
                raise AMGError("levels given by the application (set_levels) are one rank's: on several ranks "
                               "gpuamg aggregates")
            indptr, indices, data = operator.getValuesCSR()  # the rank's rows, global columns
            n = operator.getSize()[0]
        else:
            A = local_block(operator, self.xp)
            indptr, indices, data = A.to_csr()
            n = A.shape[0]
        self.refreshed = self.amg is not None and self.amg.xp is self.xp and self.amg.has_pattern(indptr, indices)
        if self.refreshed:  # new values on the same pattern: the aggregates and prolongations stay
            self.amg.refresh(data)
        elif comm.Get_size() > 1:
            self.amg = DistributedAggregationAMG(indptr, indices, data, operator.getOwnershipRanges(), comm, self.xp,
                                                 self.settings())
        elif self.given_levels is not None:
            coarse_operators, prolongations, grids = self.given_levels
            self.amg = GeometricMultigrid(indptr, indices, data, n, self.xp, coarse_operators, prolongations,
                                          self.settings(), grids=grids if self.stencil else None)
        else:
            self.amg = AggregationAMG(indptr, indices, data, n, self.xp, self.settings())
        if self.xp is not numpy and comm.Get_size() == 1:  # graphs of the cycle hold its arrays and scalars
            self.graphs = graph_cache()

    def settings(self):
        """The hierarchy's settings from the options."""
        return AMGSettings(threshold=self.threshold, aggregation=self.aggregation, passes=self.passes,
                           mis2_pairs=self.mis2_pairs, smoothed=self.smoothed, sparsify=self.sparsify,
                           degree=self.degree, smoother=self.smoother, cycle=self.cycle, max_levels=self.max_levels,
                           coarse_size=self.coarse_size, value_dtype=VALUE_DTYPES[self.value_type],
                           vector_dtype=VALUE_DTYPES[self.vector_type], halo_transport=self.halo_transport)

    def release(self):
        self.amg = self.graphs = None

    def apply(self, pc, x, y):
        with in_out_arrays(x, y, self.xp, "gpuamg") as (xa, ya):
            self.apply_arrays(xa, ya)

    def applyTranspose(self, pc, x, y):
        if self.cycle != "v":
            raise AMGError("gpuamg's K-cycle is nonlinear: it has no transpose (the V-cycle is symmetric)")
        self.apply(pc, x, y)

    def apply_arrays(self, x, y):
        self._run(lambda: self.amg.apply(x, y), x, y)

    def rounded(self):
        """(b, z, apply) for a caller that rounds its right-hand side into the
        float32 cycle's own b and reads z (ArrayOperator.rounded); None where
        the cycle's vectors are float64."""
        vectors = self.amg.rounded_vectors()
        return None if vectors is None else (*vectors, lambda: self._run(self.amg.apply_rounded))

    def _run(self, cycle, *arrays):
        """``cycle()``, as one launch of a CUDA graph per set of ``arrays`` where graphs are kept."""
        self.events["Apply"].begin()
        try:
            if self.graphs is None or not self.cuda_graph:
                cycle()
            else:
                self.graphs.run(tuple(a.data.ptr for a in arrays), cycle)
        finally:
            self.events["Apply"].end()

    def graph_key(self):
        """What a CUDA graph of apply_arrays reads (the cycle launches kernels
        on the current stream only, with no temporary arrays): None on the
        host, and in parallel where a level's halos pass through host memory
        (MPI, not NCCL)."""
        if self.xp is numpy or (self.amg.comm is not None and not self.amg.exchanges_on_device):
            return None
        return self.amg, self.amg.generation

    def describe(self, pc):
        if self.amg is None:
            return []
        operator, grid = self.amg.complexities()  # of the whole hierarchy, over all ranks in parallel
        origin = "given by the application (geometric)" if self.given_levels is not None else "aggregated"
        stencils = sum(isinstance(level.A_cycle, StencilMatrix) for level in self.amg.levels)
        if stencils:
            origin += f", {stencils} cycled as stencils"
        spread = ("" if self.amg.comm is None else
                  f", split over {self.amg.comm.Get_size()} ranks (aggregates inside a rank; the coarsest level "
                  "gathered on every rank)")
        lines = [f"  {len(self.amg.levels)} levels, {origin}{spread}; operator complexity {operator:.3f}, "
                 f"grid complexity {grid:.3f}",
                 "  level      rows       nonzeros   MiB on rank 0"]
        for k, ((rows, nnz), level) in enumerate(zip(self.amg.sizes(), self.amg.levels)):
            held = [t.nbytes for t in (level.A, level.A_cycle, level.P, level.R, level.inverse, level.A_halo, level.P_halo,
                                       level.R_halo, level.whole) if t is not None]
            lines.append(f"  {k:5d} {rows:9d} {nnz:14d} {sum(held) / 2**20:8.2f}")
        phases = ", ".join(f"{name} {seconds:.4f}" for name, seconds in self.amg.phases.items())
        kind = "values refreshed on the same pattern" if self.refreshed else "new hierarchy"
        return lines + [self.setup_line(pc), f"  last set-up ({kind}) on rank 0, seconds: {phases}"]
