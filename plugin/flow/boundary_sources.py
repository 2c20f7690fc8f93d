"""The boundary's contributions to a step, at a time, on the matrices' backend."""

from gpu_mats.backend import sparse_module


class BoundarySources:
    """The boundary's momentum source (dim, n), inflow fluxes (n,) and, where
    the velocity's least-squares gradients take the held velocities, their
    part (dim * dim, n), at a time, on the matrices' backend: worked out on
    the host face by face (FlowOperators.boundary_values, for the few
    boundary faces), summed into cells on the device by sparse products; once
    where the conditions do not change in time. Every time's values go into
    the same arrays, each overwriting the last (a caller uses them before it
    asks for another time): the Vecs PETSc's products make over them are
    made once, where new arrays each step made a Vec each and kept its array
    (an unsteady inflow's run grew by its cells' values a step)."""

    def __init__(self, ops, xp):
        self.ops, self.xp = ops, xp
        self.to_cells = sparse_module(xp).csr_matrix(ops.boundary_to_cells)
        source = ops.velocity_gradient_source
        self.to_gradients = None if source is None else sparse_module(xp).csr_matrix(source)
        dim, n = ops.dim, ops.geometry.num_cells
        self.cells = xp.zeros((dim + 1, n))
        self.gradients = None if source is None else xp.zeros((dim * dim, n))
        self.sources = (self.cells[:dim], self.cells[dim], self.gradients)
        self._done = False  # steady conditions' values are in the arrays

    def __call__(self, t):
        """(momentum source, inflow fluxes, velocity gradients' part or None) at time t."""
        if self._done:
            return self.sources
        dim, n, xp = self.ops.dim, self.ops.geometry.num_cells, self.xp
        velocity = self.ops.boundary_velocity(t)
        values = xp.asarray(self.ops.boundary_values(t, velocity))
        if values.shape[1]:
            self.cells[...] = (self.to_cells @ values.T).T
        if self.to_gradients is not None:
            held = self.to_gradients @ xp.asarray(velocity)
            self.gradients[...] = xp.ascontiguousarray(held.T).reshape(dim * dim, n)
        self._done = self.ops.boundary_steady
        return self.sources
