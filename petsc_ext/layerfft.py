"""``-pc_type layerfft``: the exact solve of a pressure Laplacian on a mesh
extruded along a periodic axis in equal layers (gpu_mats.extruded: a real
FFT along the layers, one 2D system per wavenumber): under cg it converges
in one iteration. The layers are the application's (``set_layers``, as the
flow driver finds them on its mesh). The 2D systems are solved by direct
factorizations on the host, or all at once by CG with one aggregation
hierarchy of the family (cuFFT and CuPy for CUDA vectors; the same
kernels' NumPy twins on the host): ``-pc_layerfft_sections``. The CG reads
its residual's column norms back after each iteration (each replayed as a
CUDA graph), so a solve cannot be queued into a larger graph: the flow's
step then runs without one. On several ranks each holds whole columns of
the mesh and solves its share of the wavenumbers; the spectra travel by
NCCL or MPI (``-pc_layerfft_transport``). No layers, direct solves of GPU
vectors, or a matrix that is not such an operator on its layers are a
PETSc error with the reason.
"""

import numpy
import scipy.sparse
from petsc4py import PETSc

from gpu_mats.exchange import TRANSPORTS
from gpu_mats.extruded import MAX_IT, RTOL, SECTIONS, ExtrudedSolver, ExtrusionError

from . import gpusell
from .options import Option
from .python_type import ExactSolvePC


class LayerTransformPC(ExactSolvePC):
    """The context of a PC of type layerfft (petsc4py's Python PC protocol)."""

    TYPE, TITLE = "layerfft", "Extruded-mesh Poisson solve by FFT along its layers (layerfft)"
    SUMMARY = "exact inverse of the Laplacian of a mesh extruded along a periodic axis (FFT along the layers, a " \
              "2D solve per wavenumber)"
    OPTIONS = (
        Option("pc_layerfft_sections", "sections", "auto", "how the 2D system of each wavenumber is solved: direct "
               "(SuperLU, host vectors), multigrid (CG with one aggregation hierarchy for all wavenumbers at once), "
               "auto (direct on the host, multigrid on the GPU)", choices=("auto",) + SECTIONS, view="sections {}"),
        Option("pc_layerfft_rtol", "rtol", RTOL, "multigrid: the 2D systems' CG stops at this relative residual "
               "of the 3D right-hand side", above=0.0, high=1.0, view="rtol {}", applies=("sections", ("multigrid",))),
        Option("pc_layerfft_max_it", "max_it", MAX_IT, "multigrid: most CG iterations (more is an error)", low=1,
               high=100000),
        Option("pc_layerfft_transport", "transport", "auto", "in parallel, how the spectra travel between the ranks' "
               "columns and wavenumbers: nccl (GPU to GPU), mpi (through host memory), auto (NCCL for GPU data "
               "where CuPy has it)", choices=TRANSPORTS),
    )

    def __init__(self):
        super().__init__()
        self.order = None

    def set_layers(self, order):
        """The rows by layer and column: ``order`` (layers, columns), the layers along the periodic axis in turn."""
        self.order = numpy.asarray(order)
        self.release()

    def build(self, pc):
        P = self.operator(pc)
        sections = self.sections if self.sections != "auto" else "direct" if self.xp is numpy else "multigrid"
        if sections == "direct" and self.xp is not numpy:
            raise ValueError("layerfft's direct 2D solves run on the host; for CUDA vectors take "
                             "-pc_layerfft_sections multigrid")
        if self.order is None:
            raise ValueError("layerfft needs the mesh's layers, given to the PC (set_layers) as the flow driver "
                             "gives them")
        comm = P.getComm().tompi4py()
        if comm.Get_size() == 1:
            indptr, indices, data = gpusell.local_block(P, numpy).to_csr()
        else:
            indptr, indices, data = P.getValuesCSR()  # the rank's rows, global columns
        rows = scipy.sparse.csr_matrix((data, indices, indptr), shape=(P.getLocalSize()[0], P.getSize()[1]))
        try:
            self.solver = ExtrudedSolver(rows, self.order, sections, self.xp, self.rtol, self.max_it, comm,
                                         self.transport, PETSc.Sys.Print)
        except ExtrusionError as exc:
            raise ValueError(f"layerfft needs the Laplacian of a mesh extruded along a periodic axis in equal "
                             f"layers; this matrix: {exc}") from exc

    def describe(self, pc):
        if self.solver is None:
            return []
        s = self.solver
        shared = (f" (rank 0's share of the wavenumbers among {s.ranks} ranks, the spectra by "
                  f"{'MPI' if s.spectrum.nccl is None else 'NCCL'})" if s.ranks > 1 else "")
        return [f"  {s.layers} layers of {s.cross_section} cells: {s.section_solver.describe()}{shared}",
                self.setup_line(pc)]
