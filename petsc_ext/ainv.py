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
from petsc4py import PETSc

from gpu_mats import VALUE_DTYPES
from gpu_mats.approximate_inverse import ChebyshevPolynomial, FactoredInverse, SparseApproximateInverse

from .arrays import array_module_of, in_out_arrays
from .callbacks import petsc_method
from .gpusell import local_block
from .options import OptionsReader
from .viewing import ascii_view

TYPES = ("fsai", "spai", "chebyshev")
_EVENTS = {name: PETSc.Log.Event(f"AINV{name}") for name in ("Setup", "Apply")}


class ApproximateInversePC:
    """The context of a PC of type ainv (petsc4py's Python PC protocol)."""

    def __init__(self):
        self.kind, self.levels, self.drop, self.value_type = "fsai", 1, 0.0, "float64"
        self.degree, self.eig_steps = 4, 20
        self.inverse, self.setup_seconds, self.xp = None, 0.0, None

    @petsc_method("PCSetFromOptions_AINV")
    def setFromOptions(self, pc):
        reader = OptionsReader(pc.getOptionsPrefix(), "Approximate inverse (ainv)", pc.getComm())
        self.kind = reader.choice("pc_ainv_type", self.kind, TYPES, "approximate inverse")
        self.levels = reader.int("pc_ainv_levels", self.levels, "pattern of A^k (fsai, spai)", low=1, high=3)
        self.drop = reader.real("pc_ainv_drop", self.drop,
                                "drop |a_ij| < tol sqrt(|a_ii a_jj|) before forming the pattern (fsai, spai)", low=0.0)
        self.value_type = reader.choice("pc_ainv_value_type", self.value_type, tuple(VALUE_DTYPES),
                                        "precision of the stored G or M (vectors stay float64)")
        self.degree = reader.int("pc_ainv_degree", self.degree, "polynomial degree, SpMVs per apply (chebyshev)",
                                 low=1, high=64)
        self.eig_steps = reader.int("pc_ainv_eig_steps", self.eig_steps,
                                    "Lanczos steps estimating the spectral interval (chebyshev)", low=2, high=500)

    @petsc_method("PCSetUp_AINV")
    def setUp(self, pc):
        _EVENTS["Setup"].begin()
        start = PETSc.Log.getTime()
        try:
            _, P = pc.getOperators()
            self.xp = array_module_of(P.createVecRight())
            A = local_block(P, self.xp)
            offset = P.getOwnershipRange()[0]
            if self.kind == "chebyshev":
                self.inverse = ChebyshevPolynomial(A, self.degree, self.eig_steps, row_offset=offset)
            else:
                build = FactoredInverse if self.kind == "fsai" else SparseApproximateInverse
                self.inverse = build(A, self.levels, self.drop, VALUE_DTYPES[self.value_type], row_offset=offset)
            if self.xp is not numpy:
                self.xp.cuda.get_current_stream().synchronize()  # setup time includes the GPU work
        finally:
            self.setup_seconds = PETSc.Log.getTime() - start
            _EVENTS["Setup"].end()

    @petsc_method("PCApply_AINV")
    def apply(self, pc, x, y, transpose=False):
        with in_out_arrays(x, y, self.xp, "ainv") as (xa, ya):
            self.apply_arrays(xa, ya, transpose)

    def graph_key(self):
        """What a CUDA graph of apply_arrays reads (None: not capturable, the
        Chebyshev apply makes temporary arrays)."""
        if self.xp is numpy or isinstance(self.inverse, ChebyshevPolynomial):
            return None
        return (self.inverse,)

    def apply_arrays(self, x, y, transpose=False):
        """y = M x on arrays in the preconditioner's memory (no PETSc dispatch)."""
        _EVENTS["Apply"].begin()
        try:
            (self.inverse.apply_transpose if transpose else self.inverse.apply)(x, y)
        finally:
            _EVENTS["Apply"].end()

    @petsc_method("PCApplyTranspose_AINV")
    def applyTranspose(self, pc, x, y):
        self.apply(pc, x, y, transpose=True)

    def reset(self, pc):
        self.inverse = None

    @petsc_method("PCView_AINV")
    def view(self, pc, viewer):
        ascii_view(viewer, self._describe(pc))

    def _describe(self, pc):
        if self.kind == "chebyshev":
            lines = [f"ainv: chebyshev, degree {self.degree}, {self.eig_steps} Lanczos steps"]
        else:
            lines = [f"ainv: {self.kind}, levels {self.levels}, drop {self.drop:g}, values {self.value_type}"]
        if self.inverse is None:
            return lines
        comm = pc.getComm().tompi4py()
        if self.kind == "chebyshev":
            low = comm.allreduce(self.inverse.interval[0], op=MPI.MIN)
            high = comm.allreduce(self.inverse.interval[1], op=MPI.MAX)
            lines.append(f"  spectral interval of D^-1 A: [{low:.4g}, {high:.4g}] (top times a safety factor)")
        else:
            nnz = comm.allreduce(self.inverse.nnz)
            rows = pc.getOperators()[1].getSize()[0]
            name = "G" if self.kind == "fsai" else "M"
            lines.append(f"  nnz of {name}: {nnz} ({nnz / rows:.2f} per row), block-local on each rank")
        seconds = comm.allreduce(self.setup_seconds, op=MPI.MAX)
        lines.append(f"  setup time: {seconds:.4f} s ({'GPU' if self.xp is not numpy else 'host'})")
        return lines
