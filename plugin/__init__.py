"""``import plugin`` registers the project's types with PETSc.

After it, in any petsc4py program: ``-mat_type gpusell`` and ``-dm_mat_type
gpusell`` select the SELL-C-sigma GPU matrix, ``-pc_type ainv`` the sparse
approximate-inverse preconditioners, ``-pc_type wbilu`` the wavefront
block ILU(0), ``-pc_type gpuamg`` aggregation algebraic multigrid set up on
the GPU, ``-pc_type boxfft`` the exact solve of a box's pressure Laplacian by
fast transforms, ``-pc_type layerfft`` that of a mesh extruded along a
periodic axis (host), ``-ksp_type cacg`` communication-avoiding CG, ``-ksp_type graphcg``
CG in blocks of iterations replayed as CUDA graphs.
"""

from petsc_ext import gpusell
from petsc_ext.registry import register_python_type

gpusell.register()
register_python_type("PC", "ainv", "petsc_ext.ainv.ApproximateInversePC")
register_python_type("PC", "wbilu", "petsc_ext.wbilu.WavefrontBlockILU")
register_python_type("PC", "gpuamg", "petsc_ext.gpuamg.AggregationMultigridPC")
register_python_type("PC", "boxfft", "petsc_ext.boxfft.BoxTransformPC")
register_python_type("PC", "layerfft", "petsc_ext.layerfft.LayerTransformPC")
register_python_type("KSP", "cacg", "petsc_ext.cacg.CommunicationAvoidingCG")
register_python_type("KSP", "graphcg", "petsc_ext.graphcg.GraphCG")
