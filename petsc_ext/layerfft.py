"""``-pc_type layerfft``: the exact solve of a pressure Laplacian on a mesh
extruded along a periodic axis in equal layers (gpu_mats.extruded: a real
FFT along the layers, one 2D system per wavenumber): under cg it converges
in one iteration. The layers are the application's (``set_layers``, as the
flow driver finds them on its mesh). On the host, on one rank: its 2D
solves are direct factorizations; vectors in GPU memory, several ranks, no
layers, or a matrix that is not such an operator on them are a PETSc error
with the reason.
"""

import numpy
import scipy.sparse

from gpu_mats.extruded import ExtrudedSolver, ExtrusionError

from . import gpusell
from .python_type import ExactSolvePC


class LayerTransformPC(ExactSolvePC):
    """The context of a PC of type layerfft (petsc4py's Python PC protocol)."""

    TYPE, TITLE = "layerfft", "Extruded-mesh Poisson solve by FFT along its layers (layerfft)"
    SUMMARY = "exact inverse of the Laplacian of a mesh extruded along a periodic axis (FFT along the layers, a " \
              "direct solve per wavenumber)"

    def __init__(self):
        super().__init__()
        self.order = None

    def set_layers(self, order):
        """The rows by layer and column: ``order`` (layers, columns), the layers along the periodic axis in turn."""
        self.order = numpy.asarray(order)
        self.release()

    def build(self, pc):
        P = self.operator(pc)
        if P.getComm().getSize() > 1:
            raise ValueError("layerfft solves a mesh held on one rank; on several ranks use -pc_type gpuamg")
        if self.xp is not numpy:
            raise ValueError("layerfft runs on the host (its 2D solves are direct factorizations); on the GPU use "
                             "-pc_type gpuamg")
        if self.order is None:
            raise ValueError("layerfft needs the mesh's layers, given to the PC (set_layers) as the flow driver "
                             "gives them")
        indptr, indices, data = gpusell.local_block(P, numpy).to_csr()
        try:
            self.solver = ExtrudedSolver(scipy.sparse.csr_matrix((data, indices, indptr), shape=P.getLocalSize()),
                                         self.order)
        except ExtrusionError as exc:
            raise ValueError(f"layerfft needs the Laplacian of a mesh extruded along a periodic axis in equal "
                             f"layers; this matrix: {exc}") from exc

    def describe(self, pc):
        if self.solver is None:
            return []
        s = self.solver
        return [f"  {s.layers} layers of {s.columns} cells: {len(s.factors)} wavenumbers, a direct solve each",
                self.setup_line(pc)]
