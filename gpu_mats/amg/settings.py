"""What a hierarchy is built with, in one place: the aggregation, the
prolongation, the coarse operators, the smoothing, the cycle and the
values' and vectors' types (petsc_ext.gpuamg fills it from the options)."""

from dataclasses import dataclass

import numpy

from .aggregation import THRESHOLD
from .cycle import DEGREE
from .galerkin import SPARSIFY


@dataclass(frozen=True)
class AMGSettings:
    """The hierarchy's settings; each field's meaning is its -pc_gpuamg_ option's (docs/options.md)."""

    threshold: float = THRESHOLD  # strength of connection
    aggregation: str = "mis2"  # or "pairwise"
    passes: int = 2  # pairwise matchings per level
    mis2_pairs: int = 0  # pairings of the finest mis2 aggregates
    smoothed: bool = True  # smoothed aggregation, or the tentative prolongation
    sparsify: float = SPARSIFY  # coarse operators' weak entries to the diagonal (0: Galerkin)
    degree: int = DEGREE  # smoothing steps before and after the coarse correction
    smoother: str = "chebyshev"  # or "l1jacobi"
    cycle: str = "v"  # or "k"
    max_levels: int = 25
    coarse_size: int = 1000  # rows at or below which a level is the coarsest
    slice_height: int = 32  # SELL's C
    value_dtype: object = numpy.float64  # the levels' stored values
    vector_dtype: object = numpy.float64  # the cycle's vectors
    halo_transport: str = "auto"  # in parallel: "nccl", "mpi" or "auto"
