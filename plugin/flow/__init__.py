"""The incompressible fractional-step flow driver: a finite-volume geometry
(from a DMDA box, plugin.flow.box), boundary conditions per boundary group,
the symmetry-preserving operators as PETSc matrices, and the time loop
(plugin.flow.solver.FlowSolver)."""
