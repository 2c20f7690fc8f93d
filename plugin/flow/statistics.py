"""Running averages of a wall-bounded flow over its homogeneous planes and
over time, as turbulent channel studies report them (Moser, Kim and
Mansour, Phys. Fluids 11, 1999): the mean velocity U(y) and the Reynolds
stresses <u'u'>, <v'v'>, <w'w'>, <u'v'>, on a DMDA box whose planes normal
to y are homogeneous; in wall units from the wall shear stress of the mean
profile. Sums of plane means weighted by the time since the last sample,
saved and loaded with a run's checkpoint."""

import numpy
from mpi4py import MPI

from gpu_mats.backend import sparse_module, to_host

_MIN, _MAX = MPI.MIN, MPI.MAX

# The plane means sampled: the velocity's components and the products of the stresses (u, v, w in 2D: u, v).
PRODUCTS = ((0, 0), (1, 1), (2, 2), (0, 1))
COLUMNS = ("y", "y+", "U+", "u_rms+", "v_rms+", "w_rms+", "uv+")


class PlaneStatistics:
    """The running averages of ``solver`` (a FlowSolver of a DMDA box, its
    box_shape known) over the planes normal to y, from time ``start`` on."""

    def __init__(self, solver, start=0.0):
        if solver.box_shape is None or solver.geometry.dim < 2 or "ymin" not in solver.geometry.boundary_names:
            raise ValueError("plane statistics average over the planes normal to y of a DMDA box with walls at "
                             "ymin and ymax (FlowSolver.from_dmda): this flow has no such homogeneous planes")
        g, xp, mpi = solver.geometry, solver.xp, solver.mpi
        nx, ny = solver.box_shape[0], solver.box_shape[1]
        self.solver, self.start, self.dim, self.ny = solver, float(start), g.dim, ny
        plane = (g.cell_numbers // nx) % ny  # each of the rank's cells' plane
        self.plane_volumes = mpi.allreduce(numpy.bincount(plane, g.volumes, ny))
        self.heights = mpi.allreduce(numpy.bincount(plane, g.volumes * g.centroids[:, 1], ny)) / self.plane_volumes
        sides = [g.boundary_tags == g.boundary_names[name] for name in ("ymin", "ymax")]
        self.walls = (mpi.allreduce(float(g.boundary_centroids[sides[0], 1].min(initial=numpy.inf)), op=_MIN),
                      mpi.allreduce(float(g.boundary_centroids[sides[1], 1].max(initial=-numpy.inf)), op=_MAX))
        self._means = sparse_module(xp).csr_matrix(  # plane means of a cell field, by one product
            (xp.asarray(g.volumes / self.plane_volumes[plane]), (xp.asarray(plane), xp.arange(g.num_cells))),
            shape=(ny, g.num_cells))
        self.sums = numpy.zeros((self.dim + len(PRODUCTS), ny))
        self.time = 0.0
        self._last = None

    def sample(self, state):
        """Add ``state``'s plane means, weighted by the time since the last sample (from ``start`` on)."""
        if state.t < self.start:
            return
        if self._last is None:
            self._last = state.t
            return
        weight, self._last = state.t - self._last, state.t
        xp, u = self.solver.xp, state.u
        fields = [u[d] for d in range(self.dim)] + [u[a] * u[b] if max(a, b) < self.dim else xp.zeros_like(u[0])
                                                   for a, b in PRODUCTS]
        local = to_host(xp, self._means @ xp.stack(fields).T).T
        self.sums += weight * self.solver.mpi.allreduce(local)
        self.time += weight

    def profiles(self):
        """(y, U, <u'u'>, <v'v'>, <w'w'>, <u'v'>) over the planes: the time averages so far."""
        if self.time <= 0:
            raise ValueError("no statistics yet: sample at least two states after the start time")
        mean = self.sums / self.time
        U = mean[:self.dim]
        w = U[2] if self.dim == 3 else numpy.zeros(self.ny)
        stresses = [mean[self.dim + k] - (U[a] if a < self.dim else w) * (U[b] if b < self.dim else w)
                    for k, (a, b) in enumerate(PRODUCTS)]
        return (self.heights, U[0], *stresses)

    def wall_units(self):
        """(u_tau, Re_tau, table): the friction velocity from the mean profile's
        slope at both walls (its first cells' U over their distance), and
        the rows of COLUMNS over the lower half of the channel."""
        y, U, uu, vv, ww, uv = self.profiles()
        nu = self.solver.operators.nu
        lower, upper = self.walls
        slope = (U[0] / (y[0] - lower) + U[-1] / (upper - y[-1])) / 2
        u_tau = numpy.sqrt(nu * abs(slope))
        half = (upper - lower) / 2
        below = y - lower <= half
        distance = numpy.where(below, y - lower, upper - y)
        table = numpy.column_stack([distance, distance * u_tau / nu, U / u_tau, *(numpy.sqrt(abs(s)) / u_tau
                                                                                  for s in (uu, vv, ww)),
                                    uv / u_tau**2 * numpy.where(below, 1.0, -1.0)])
        return u_tau, u_tau * half / nu, table[below]

    def save(self, path):
        """The averages so far to ``path`` (NumPy's .npz; rank 0 writes), beside a run's checkpoint."""
        if self.solver.mpi.rank == 0:
            last = numpy.nan if self._last is None else self._last
            numpy.savez(path, sums=self.sums, times=numpy.array([self.time, self.start, last]))
        self.solver.mpi.Barrier()

    def load(self, path):
        """The averages save() wrote, to go on with a run restarted from its checkpoint (every rank reads)."""
        with numpy.load(path) as saved:
            if saved["sums"].shape != self.sums.shape:
                raise ValueError(f"the statistics in {path} are of {saved['sums'].shape[1]} planes, not {self.ny}")
            self.sums = numpy.array(saved["sums"], dtype=float)
            self.time, self.start, last = (float(v) for v in saved["times"])
        self._last = None if numpy.isnan(last) else last

    def write(self, directory, reference=None):
        """profiles.csv (COLUMNS) and profiles.png in wall units against a
        ``reference`` CSV (a header naming some of COLUMNS, e.g. the DNS of
        Moser, Kim and Mansour 1999); rank 0 writes. The paths written."""
        import os

        u_tau, re_tau, table = self.wall_units()
        if self.solver.mpi.rank != 0:
            return []
        csv = os.path.join(directory, "profiles.csv")
        numpy.savetxt(csv, table, delimiter=",", header=",".join(COLUMNS), comments="")
        return [csv, _plot(os.path.join(directory, "profiles.png"), table, re_tau, reference)]


def _plot(path, table, re_tau, reference):
    """U+ (log y+) and the rms velocities and -u'v' in wall units, with the reference's where it has them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ref = None
    if reference is not None:
        ref = numpy.genfromtxt(reference, delimiter=",", names=True, deletechars="")
    figure, (mean, stresses) = plt.subplots(1, 2, figsize=(10, 4))
    column = dict(zip(COLUMNS, table.T))
    mean.semilogx(column["y+"], column["U+"], "o", label="this run")
    stresses_named = (("u_rms+", "u'"), ("v_rms+", "v'"), ("w_rms+", "w'"), ("uv+", "-u'v'"))
    for name, label in stresses_named:
        values = -column[name] if name == "uv+" else column[name]
        stresses.plot(column["y+"], values, "o", markersize=3, label=f"{label} (this run)")
    if ref is not None:
        names = ref.dtype.names
        if "U+" in names:
            mean.semilogx(ref["y+"], ref["U+"], "-", label="reference")
        for name, label in stresses_named:
            if name in names:
                stresses.plot(ref["y+"], -ref[name] if name == "uv+" else ref[name], "-", label=f"{label} (reference)")
    mean.set(xlabel="y+", ylabel="U+", title=f"Re_tau = {re_tau:.1f}")
    stresses.set(xlabel="y+", ylabel="in wall units")
    for axes in (mean, stresses):
        axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
