"""The incompressible fractional-step flow driver: geometry from a DM, the
symmetry-preserving operators, and (in progress) the time loop."""
