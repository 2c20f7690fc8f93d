"""Checkpoints of a flow state: one NumPy .npz file written by rank 0.

A file is written under a temporary name and renamed into place, so a run
killed at any moment leaves the last complete checkpoint readable. Fields are
stored in PETSc's global numbering with the ranks' ownership ranges: a restart
needs the same grid and the same number of ranks (it is then identical to an
uninterrupted run, to rounding), and is refused otherwise. The grid is
recognised by a fingerprint of its cells (volume and index-weighted
centroids), so a 16 x 48 grid's checkpoint is refused on 48 x 16. A file that
cannot be read is an error naming it on every rank, never a hang.
"""

import os

import numpy
from mpi4py import MPI

from gpu_mats.backend import to_host


FORMAT = 3  # 3: with the grid's fingerprint


def _gather(comm, xp, array, axis=-1):
    parts = comm.gather(to_host(xp, array), root=0)
    return numpy.concatenate(parts, axis=axis) if parts is not None else None


def fingerprint(geometry, comm):
    """What tells grids apart: the total volume and the sums over cells of
    (global index + 1) times each centroid coordinate. Collective."""
    index = numpy.arange(geometry.num_cells) + geometry.cell_start + 1.0
    local = numpy.concatenate(([geometry.volumes.sum()], index @ geometry.centroids))
    return comm.allreduce(local, op=MPI.SUM)


def save(path, comm, xp, state, geometry, extra):
    """Write ``state`` (and the scalars in ``extra``) to ``path``; collective."""
    fields = {name: _gather(comm, xp, getattr(state, name)) for name in ("u", "u_old", "u_s", "p", "p_old")}
    grid = fingerprint(geometry, comm)
    if comm.Get_rank() == 0:
        temporary = f"{path}.tmp"
        with open(temporary, "wb") as stream:
            numpy.savez(stream, format=FORMAT, t=state.t, step=state.step, dt_old=state.dt_old,
                        cell_ranges=geometry.cell_ranges, face_ranges=geometry.face_ranges, grid=grid, **fields,
                        **extra)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    comm.Barrier()


def load(path, comm, geometry, state, xp):
    """Fill ``state``'s arrays from ``path`` (it must match the geometry's
    grid and ranks); returns the file's extra scalars. Collective."""
    data, problem = None, ""
    grid = fingerprint(geometry, comm)
    if comm.Get_rank() == 0:
        try:
            with numpy.load(path) as stored:
                data = {name: stored[name] for name in stored.files}
        except Exception as exc:  # any failure must reach every rank, not leave them waiting
            problem = (f"cannot read the checkpoint {os.path.abspath(path)}: {type(exc).__name__}: {exc} "
                       "(a missing, truncated or corrupt file)")
        else:
            problem = _mismatch(data, geometry, grid, path)
    problem = comm.bcast(problem, root=0)
    if problem:
        raise ValueError(problem)
    rank, cells, faces = comm.Get_rank(), geometry.cell_ranges, geometry.face_ranges
    pieces = {}
    for name, ranges in (("u", cells), ("u_old", cells), ("u_s", faces), ("p", cells), ("p_old", cells)):
        parts = None
        if rank == 0:
            parts = [data[name][..., ranges[r]:ranges[r + 1]] for r in range(len(ranges) - 1)]
        pieces[name] = comm.scatter(parts, root=0)
    for name, piece in pieces.items():
        getattr(state, name)[...] = xp.asarray(piece)
    scalars = comm.bcast({k: v.item() for k, v in data.items() if v.ndim == 0} if rank == 0 else None, root=0)
    state.t, state.step, state.dt_old = scalars.pop("t"), int(scalars.pop("step")), scalars.pop("dt_old")
    scalars.pop("format")
    return scalars


def _mismatch(data, geometry, grid, path):
    missing = {"format", "t", "step", "dt_old", "cell_ranges", "face_ranges", "grid", "u", "u_old", "u_s", "p",
               "p_old"} - set(data)
    if int(data.get("format", -1)) != FORMAT or missing:
        return (f"{os.path.abspath(path)} is not a checkpoint of format {FORMAT} "
                f"(format {data.get('format')}, missing {', '.join(sorted(missing)) or 'nothing'})")
    for name in ("cell_ranges", "face_ranges"):
        stored, here = data[name], getattr(geometry, name)
        if stored.shape != here.shape or (stored != here).any():
            return (f"the checkpoint {os.path.abspath(path)} was written on another grid or number of ranks "
                    f"({name} {list(stored)}, this run {list(here)}): restart with the same grid and the same "
                    "number of MPI ranks")
    if data["grid"].shape != grid.shape or not numpy.allclose(data["grid"], grid, rtol=1e-12, atol=0.0):
        return (f"the checkpoint {os.path.abspath(path)} was written on another grid (other cell sizes, shape or "
                "lengths with the same numbers of cells and faces): restart on the grid it was written on")
    return ""
