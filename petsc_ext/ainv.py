"""``-pc_type ainv``: sparse approximate-inverse preconditioners on the GPU.

``-pc_ainv_type fsai`` (default; SPD matrices): z = G^T G r, the factored
sparse approximate inverse. ``spai`` (nonsymmetric matrices): z = M r with M
minimising ||I - A M||_F. ``chebyshev``: z = p(D^-1 A) D^-1 r, a Chebyshev
polynomial whose interval comes from Lanczos steps. See
gpu_mats.approximate_inverse for the algorithms.

The preconditioner runs where its operator's vectors live (CUDA vectors: on
the GPU). In parallel each rank builds it from its own diagonal block, the
rows and columns it owns, as PETSc's bjacobi does: no communication in setup
or apply, at the price of ignoring the coupling between ranks.
"""

import numpy
from mpi4py import MPI

from gpu_mats import VALUE_DTYPES
from gpu_mats.approximate_inverse import ChebyshevPolynomial, FactoredInverse, SparseApproximateInverse

from .arrays import in_out_arrays
from .gpusell import local_block
from .options import Option
from .python_type import PythonPC

TYPES = ("fsai", "spai", "chebyshev")
_PATTERNED = ("kind", ("fsai", "spai"))  # options of the types with a sparsity pattern
_POLYNOMIAL = ("kind", ("chebyshev",))


class ApproximateInversePC(PythonPC):
    """The context of a PC of type ainv (petsc4py's Python PC protocol)."""

    TYPE, TITLE, EVENTS = "ainv", "Approximate inverse (ainv)", ("Apply",)
    OPTIONS = (
        Option("pc_ainv_type", "kind", "fsai", "fsai: z = G^T G r, the factored sparse approximate inverse "
               "for SPD matrices; spai: z = M r, M minimising ||I - AM||_F, for nonsymmetric ones; "
               "chebyshev: a Chebyshev polynomial in the Jacobi-scaled operator", choices=TYPES, view="{}"),
        Option("pc_ainv_levels", "levels", 1, "fsai, spai: pattern of A^k", low=1, high=3, view="levels {}",
               applies=_PATTERNED),
        Option("pc_ainv_drop", "drop", 0.0, "fsai, spai: drop |a_ij| < tol sqrt(|a_ii a_jj|) before forming "
               "the pattern", low=0.0, view="drop {}", applies=_PATTERNED),
        Option("pc_ainv_value_type", "value_type", "float64", "fsai, spai: precision of the stored G or M "
               "(vectors stay float64)", choices=tuple(VALUE_DTYPES), view="values {}", applies=_PATTERNED),
        Option("pc_ainv_degree", "degree", 4, "chebyshev: polynomial degree (SpMVs per apply)", low=1, high=64,
               view="degree {}", applies=_POLYNOMIAL),
        Option("pc_ainv_eig_steps", "eig_steps", 20, "chebyshev: Lanczos steps estimating the spectral interval",
               low=2, high=500, view="{} Lanczos steps", applies=_POLYNOMIAL),
    )

    def __init__(self):
        super().__init__()
        self.inverse = None

    def build(self, pc):
        P = self.operator(pc)
        A, offset = local_block(P, self.xp), P.getOwnershipRange()[0]
        if self.kind == "chebyshev":
            self.inverse = ChebyshevPolynomial(A, self.degree, self.eig_steps, row_offset=offset)
        else:
            build = FactoredInverse if self.kind == "fsai" else SparseApproximateInverse
            self.inverse = build(A, self.levels, self.drop, VALUE_DTYPES[self.value_type], row_offset=offset)

    def release(self):
        self.inverse = None

    def apply(self, pc, x, y, transpose=False):
        with in_out_arrays(x, y, self.xp, "ainv") as (xa, ya):
            self.apply_arrays(xa, ya, transpose)

    def applyTranspose(self, pc, x, y):
        self.apply(pc, x, y, transpose=True)

    def graph_key(self):
        """What a CUDA graph of apply_arrays reads (None: not capturable, the
        Chebyshev apply makes temporary arrays)."""
        if self.xp is numpy or isinstance(self.inverse, ChebyshevPolynomial):
            return None
        return (self.inverse,)

    def apply_arrays(self, x, y, transpose=False):
        """y = M x on arrays in the preconditioner's memory (no PETSc dispatch)."""
        self.events["Apply"].begin()
        try:
            (self.inverse.apply_transpose if transpose else self.inverse.apply)(x, y)
        finally:
            self.events["Apply"].end()

    def describe(self, pc):
        if self.inverse is None:
            return []
        comm = pc.getComm().tompi4py()
        if self.kind == "chebyshev":
            low = comm.allreduce(self.inverse.interval[0], op=MPI.MIN)
            high = comm.allreduce(self.inverse.interval[1], op=MPI.MAX)
            lines = [f"  spectral interval of D^-1 A: [{low:.4g}, {high:.4g}] (top times a safety factor)"]
        else:
            nnz = comm.allreduce(self.inverse.nnz)
            rows = self.operator(pc).getSize()[0]
            name = "G" if self.kind == "fsai" else "M"
            lines = [f"  nnz of {name}: {nnz} ({nnz / rows:.2f} per row), block-local on each rank"]
        return lines + [self.setup_line(pc)]
