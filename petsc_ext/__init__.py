"""petsc4py contexts for the project's PETSc types, on top of gpu_mats."""
