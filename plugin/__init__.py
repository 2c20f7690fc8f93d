"""``import plugin`` registers the project's types with PETSc.

After it, ``-mat_type gpusell`` and ``-dm_mat_type gpusell`` select the SELL-C-sigma
GPU matrix in any petsc4py program.
"""

from petsc_ext import gpusell

gpusell.register()
