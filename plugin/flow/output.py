"""What a run on a box leaves behind: fields gathered in the DMDA's natural
order, centreline profiles (CSV and a PNG against reference data), and the
fields as XDMF/HDF5 through meshio for ParaView. All on rank 0."""

import os

import numpy
from mpi4py import MPI

from gpu_mats.backend import to_host


def prepare_directory(path, comm):
    """Make the output directory ``path`` (rank 0) and check before the first
    step that every rank can write there: results found unwritable only after
    the run are lost. Collective; the same error on every rank."""
    problem = ""
    if comm.Get_rank() == 0:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            problem = f"{exc.strerror}"
    problem = comm.bcast(problem, root=0)
    writable = os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)
    if not problem and not comm.allreduce(writable, op=MPI.LAND):
        problem = "not a directory every rank can write to"
    if problem:
        raise ValueError(f"-flow_output_dir {os.path.abspath(path)}: {problem}")
    return path


def natural_field(comm, partition, xp, array):
    """A field of the rank's cells, shape (..., n), gathered on rank 0 as
    (..., [nz,] ny, nx); None on the other ranks."""
    own = partition.block(comm.Get_rank())
    numbers = numpy.ravel_multi_index(tuple(own[::-1]), partition.shape[::-1])
    field = _gathered(comm, numbers, int(numpy.prod(partition.shape)), xp, array)
    return None if field is None else field.reshape(array.shape[:-1] + partition.shape[::-1])


def _gathered(comm, numbers, total, xp, array):
    """The ranks' fields (..., cells) on rank 0, each rank's cells at its ``numbers``; None elsewhere."""
    parts = comm.gather((numbers, to_host(xp, array)), root=0)
    if parts is None:
        return None
    field = numpy.empty(array.shape[:-1] + (total,))
    for cells, values in parts:
        field[..., cells] = values
    return field


def _at(field, axis, coordinate, centres):
    """The field interpolated linearly along ``axis`` at ``coordinate`` between its cell ``centres``."""
    i = int(numpy.clip(numpy.searchsorted(centres, coordinate) - 1, 0, field.shape[axis] - 2))
    w = (coordinate - centres[i]) / (centres[i + 1] - centres[i])
    return (1 - w) * numpy.take(field, i, axis=axis) + w * numpy.take(field, i + 1, axis=axis)


def _centres(lengths, counts, widths=None):
    """Each axis's cell centres (from 0): equal cells, or of the given widths (a graded box)."""
    widths = widths or [numpy.full(n, length / n) for length, n in zip(lengths, counts, strict=True)]
    return [numpy.cumsum(w) - numpy.asarray(w) / 2 for w in widths]


def centerlines(u, lengths, walls, widths=None):
    """((y, u along x = Lx/2), (x, v along y = Ly/2)) from the velocity (dim, [nz,] ny, nx),
    in the mid-plane z = Lz/2 in 3D, with the wall values at both ends
    (``walls``: {box side tag: Wall}, plugin.flow.box); ``widths``: a graded box's cells."""
    dim = u.shape[0]
    centres = _centres(lengths, u.shape[1:][::-1], widths)
    if dim == 3:
        u = _at(u, 1, lengths[2] / 2, centres[2])
    along_y = _at(u[0], 1, lengths[0] / 2, centres[0])  # u(y) on x = Lx/2
    along_x = _at(u[1], 0, lengths[1] / 2, centres[1])  # v(x) on y = Ly/2

    def with_walls(values, axis, component):
        low, high = (float(walls[2 * axis + side].velocity_at(numpy.zeros((1, dim)), 0.0)[0, component])
                     for side in (0, 1))
        return numpy.concatenate(([0.0], centres[axis], [lengths[axis]])), numpy.concatenate(([low], values, [high]))

    return with_walls(along_y, 1, 0), with_walls(along_x, 0, 1)


def mesh_field(comm, geometry, xp, array):
    """A field of the rank's cells, shape (..., n), gathered on rank 0 in the
    mesh's cell order (``geometry.cell_numbers``); None on the other ranks."""
    return _gathered(comm, geometry.cell_numbers, geometry.num_global_cells, xp, array)


def mesh_centerlines(geometry, u, conditions, samples=129):
    """((y, u along x = 0.5), (x, v along y = 0.5)) of a 2D mesh of the unit
    square, sampled by ``sample``, with the wall values at both ends.
    ``conditions``: {tag: condition}."""
    s = numpy.linspace(0.0, 1.0, samples)
    along_y = sample(geometry, u, conditions, numpy.column_stack([numpy.full(samples, 0.5), s]))[:, 0]
    along_x = sample(geometry, u, conditions, numpy.column_stack([s, numpy.full(samples, 0.5)]))[:, 1]
    return (s, along_y), (s, along_x)


def sample(geometry, u, conditions, points, t=0.0):
    """The velocity u (dim, cells) of a one-rank geometry at ``points`` (k, dim):
    linear interpolation on the Delaunay triangles of the cell centres and the
    boundary faces' centroids, where a wall's or an inflow's velocity at time t
    holds (elsewhere the cell's)."""
    from scipy.interpolate import LinearNDInterpolator

    g = geometry
    edge = u[:, g.boundary_cells].T.copy()
    for tag in numpy.unique(g.boundary_tags).tolist():
        at = g.boundary_tags == tag
        if conditions[tag].holds_velocity:
            edge[at] = conditions[tag].velocity_at(g.boundary_centroids[at], t)
    interpolate = LinearNDInterpolator(numpy.concatenate([g.centroids, g.boundary_centroids]),
                                       numpy.concatenate([u.T, edge]))
    return interpolate(points)


def write_mesh_xdmf(path, mesh, u, p):
    """Velocity (dim, cells) and pressure of a meshio mesh's cells (in its
    order) as XDMF + HDF5 for ParaView."""
    import meshio

    dim = u.shape[0]
    blocks = [block for block in mesh.cells if block.dim == dim]
    ends = numpy.cumsum([0] + [len(block.data) for block in blocks])
    pieces = list(zip(ends[:-1], ends[1:], strict=True))
    velocity = [u[:, a:b].T for a, b in pieces]
    pressure = [p[a:b] for a, b in pieces]
    meshio.write(path, meshio.Mesh(mesh.points, blocks, cell_data={"velocity": velocity, "pressure": pressure}))
    return path


def write_centerlines(directory, profiles):
    """centerline_u.csv (header y,u) and centerline_v.csv (header x,v)."""
    paths = []
    for (coordinate, values), name, axis in zip(profiles, ("u", "v"), ("y", "x"), strict=True):
        path = f"{directory}/centerline_{name}.csv"
        numpy.savetxt(path, numpy.column_stack((coordinate, values)), delimiter=",", header=f"{axis},{name}",
                      comments="", fmt="%.10g")
        paths.append(path)
    return paths


def plot_centerlines(path, profiles, title, reference=None):
    """A PNG of the two profiles, with reference points ((y, u), (x, v)) if given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    (y, u), (x, v) = profiles
    axes[0].plot(u, y, "-", label="petsc-gpu-fv")
    axes[0].set(xlabel="u", ylabel="y", title="u along x = 0.5")
    axes[1].plot(x, v, "-", label="petsc-gpu-fv")
    axes[1].set(xlabel="x", ylabel="v", title="v along y = 0.5")
    if reference is not None:
        (ry, ru), (rx, rv) = reference
        axes[0].plot(ru, ry, "o", label="Ghia, Ghia & Shin (1982)")
        axes[1].plot(rx, rv, "o", label="Ghia, Ghia & Shin (1982)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def write_xdmf(path, u, p, lengths, origin, widths=None):
    """Velocity (dim, [nz,] ny, nx) and pressure on the quads or hexahedra of
    the box from ``origin`` with side ``lengths`` (cells of ``widths`` along
    each axis where given: a graded box), as XDMF + HDF5."""
    import meshio

    dim = u.shape[0]
    cells_per_axis = u.shape[1:][::-1]  # nx, ny[, nz]
    if widths is None:
        axes = [start + numpy.linspace(0.0, length, n + 1)
                for start, length, n in zip(origin, lengths, cells_per_axis, strict=True)]
    else:
        axes = [start + numpy.concatenate(([0.0], numpy.cumsum(w))) for start, w in zip(origin, widths, strict=True)]
    points = numpy.stack([a.ravel() for a in numpy.meshgrid(*axes[::-1], indexing="ij")[::-1]], axis=1)
    vertex = numpy.arange(len(points)).reshape([n + 1 for n in cells_per_axis[::-1]])  # [z,] y, x

    def shifted(*offsets):  # offsets (dx, dy[, dz]) of a corner
        index = tuple(slice(o, o + n) for o, n in zip(offsets[::-1], cells_per_axis[::-1], strict=True))
        return vertex[index].ravel()

    if dim == 2:
        cells = [("quad", numpy.stack([shifted(0, 0), shifted(1, 0), shifted(1, 1), shifted(0, 1)], axis=1))]
    else:
        bottom = [shifted(0, 0, 0), shifted(1, 0, 0), shifted(1, 1, 0), shifted(0, 1, 0)]
        top = [shifted(0, 0, 1), shifted(1, 0, 1), shifted(1, 1, 1), shifted(0, 1, 1)]
        cells = [("hexahedron", numpy.stack(bottom + top, axis=1))]
    velocity = u.reshape(dim, -1).T
    meshio.write(path, meshio.Mesh(points, cells, cell_data={"velocity": [velocity], "pressure": [p.ravel()]}))
    return path
