"""Checkpoints of a flow state: one HDF5 file, written by rank 0.

Fields are stored in the grid's natural numbering (``geometry.cell_numbers``:
the DMDA natural order of a box, the mesh's own cell order), not in PETSc's
partition-dependent one: cell fields by natural cell number, face fields
with the natural numbers of each face's two cells (an outflow face: its
cell's number and N + k, N the number of cells, k its place among that
cell's outflow faces in the geometry's boundary order). A run may restart on any
number of ranks and on either backend (the file holds host arrays); a face
whose cells come in the other order there has its normal velocity negated.
With Crank-Nicolson the momentum solve's implicit shares (FlowState.implicit
and implicit_old) are kept too, so that a restart's solves start from the
guesses the uninterrupted run's would (a file without them: from zero); and
the face velocities of the level before (FlowState.u_s_old), which the next
step's convecting velocities extrapolate (a file without them: u_s's).
Beyond the state, a run may keep cell arrays of its own, (k, cells) each,
under names of its choosing (the pressure's Fischer basis: a restart's
solves then start from the guesses the uninterrupted run's would).

A file is written under a temporary name and renamed into place, so a run
killed at any moment leaves the last complete checkpoint readable. The grid
is recognised by its cell and face counts and a fingerprint of its cells
(total volume and natural-number-weighted centroids), so a 16 x 48 grid's
checkpoint is refused on 48 x 16. A file that cannot be read is an error
naming it on every rank, never a hang.
"""

import os

import h5py
import numpy
from mpi4py import MPI

from gpu_mats.backend import to_host

FORMAT = 4  # 4: HDF5 in the natural numbering, restart on any number of ranks


class CheckpointError(ValueError):
    """A checkpoint that cannot be written, read or used here, named, on every rank."""


CELL_FIELDS = ("u", "u_old", "p", "p_old")
OPTIONAL_CELL_FIELDS = ("implicit", "implicit_old")  # FlowState's, where a momentum solve keeps them (else zero)
FACE_FIELDS = ("u_s",)
OPTIONAL_FACE_FIELDS = ("u_s_old",)  # FlowState's (files before it: u_s taken for it)
SCALARS = ("t", "step", "dt_old")
STATE_FIELDS = CELL_FIELDS + OPTIONAL_CELL_FIELDS + FACE_FIELDS + OPTIONAL_FACE_FIELDS


def fingerprint(geometry, comm):
    """What tells grids apart: the total volume and the sums over cells of
    (natural number + 1) times each centroid coordinate. Collective."""
    weight = geometry.cell_numbers + 1.0
    local = numpy.concatenate(([geometry.volumes.sum()], weight @ geometry.centroids))
    return comm.allreduce(local, op=MPI.SUM)


def face_pairs(operators):
    """(faces, 2): the two cells of each of the rank's flux faces (FlowOperators.faces),
    in PETSc's cell numbering; an outflow face's second is N + k (see above)."""
    g, f = operators.geometry, operators.faces
    owned = (g.face_ids >= g.face_start) & (g.face_ids < g.face_start + g.num_faces)
    pairs = numpy.empty((f.count, 2), dtype=numpy.int64)  # row k of a face field is face f.start + k
    pairs[f.ids[owned] - f.start] = g.face_cells[owned]
    cells = g.boundary_cells[f.open]
    order = numpy.argsort(cells, kind="stable")
    place = numpy.empty(len(cells), dtype=numpy.int64)
    place[order] = numpy.arange(len(cells)) - numpy.searchsorted(cells[order], cells[order])
    pairs[f.open_ids - f.start] = numpy.column_stack((cells, g.num_global_cells + place))
    return pairs


class _Numbering:
    """Where this rank's cells and owned faces sit in the natural numbering, and
    the moves of fields between the ranks and rank 0 in it. Collective."""

    def __init__(self, operators, comm):
        self.comm, g = comm, operators.geometry
        self.num_cells = n = g.num_global_cells
        parts = comm.gather((g.cell_numbers, face_pairs(operators)), root=0)
        if comm.Get_rank() == 0:
            natural = numpy.concatenate([numbers for numbers, _ in parts])  # PETSc's cell number -> natural
            self.cells = [numbers for numbers, _ in parts]
            self.face_pairs = [numpy.where(pairs < n, natural[numpy.minimum(pairs, n - 1)], pairs)
                               for _, pairs in parts]

    def gather(self, xp, fields):
        """The rank's cell and face ``fields`` on rank 0 in the natural order:
        ({name: (..., cells)}, sorted face cell pairs, {name: (faces,)}); None elsewhere."""
        parts = self.comm.gather({name: to_host(xp, array) for name, array in fields.items()}, root=0)
        if parts is None:
            return None
        cells = {}
        face_fields = [name for name in FACE_FIELDS + OPTIONAL_FACE_FIELDS if name in parts[0]]
        for name in parts[0].keys() - set(face_fields):
            cells[name] = numpy.empty(parts[0][name].shape[:-1] + (self.num_cells,))
            for numbers, part in zip(self.cells, parts, strict=True):
                cells[name][..., numbers] = part[name]
        pairs = numpy.concatenate(self.face_pairs)
        order = numpy.lexsort(pairs.T[::-1])  # by first cell, then second
        faces = {name: numpy.concatenate([part[name] for part in parts])[order] for name in face_fields}
        return cells, pairs[order], faces

    def pieces(self, cells, pairs, faces):
        """Each rank's part of natural-order fields, on rank 0."""
        pieces = []
        for numbers, wanted in zip(self.cells, self.face_pairs, strict=True):
            rows, sign = _find_pairs(pairs, wanted)
            piece = {name: field[..., numbers] for name, field in cells.items()}
            piece.update({name: sign * field[rows] for name, field in faces.items()})
            pieces.append(piece)
        return pieces


def _find_pairs(stored, wanted):
    """The rows of ``stored`` (face cell pairs, sorted) holding each pair of
    ``wanted`` either way round, and -1 where it is the other way (the face
    normal points the other way)."""
    n = max(int(stored.max(initial=0)), int(wanted.max(initial=0))) + 1
    keys = numpy.append(stored[:, 0] * n + stored[:, 1], numpy.iinfo(numpy.int64).max)  # an end that never matches

    def lookup(pairs):
        key = pairs[:, 0] * n + pairs[:, 1]
        rows = numpy.searchsorted(keys, key)
        return rows, keys[rows] == key

    rows, same = lookup(wanted)
    rows_reversed, reversed_ = lookup(wanted[:, ::-1])
    if not (same | reversed_).all():
        raise LookupError(f"{int((~(same | reversed_)).sum())} faces of this grid are not in the checkpoint")
    return numpy.where(same, rows, rows_reversed), numpy.where(same, 1.0, -1.0)


def save(path, comm, xp, state, operators, extra, arrays=None):
    """Write ``state`` of ``operators`` (a FlowOperators: its geometry and flux
    faces), the scalars in ``extra`` and the run's own cell ``arrays`` (by
    name; (k, cells), k the same on every rank) to ``path``; collective."""
    optional = OPTIONAL_CELL_FIELDS + OPTIONAL_FACE_FIELDS
    names = CELL_FIELDS + FACE_FIELDS + tuple(n for n in optional if getattr(state, n) is not None)
    fields = {name: getattr(state, name) for name in names}
    if set(arrays or ()) & set(fields):
        raise ValueError(f"a run's own arrays cannot take the state's names ({', '.join(set(arrays) & set(fields))})")
    gathered = _Numbering(operators, comm).gather(xp, {**fields, **(arrays or {})})
    grid = fingerprint(operators.geometry, comm)
    problem = ""
    if comm.Get_rank() == 0:
        try:
            _write(path, gathered, grid, {"t": state.t, "step": state.step, "dt_old": state.dt_old, **extra})
        except Exception as exc:  # any failure must reach every rank, not leave them waiting
            problem = f"cannot write the checkpoint {os.path.abspath(path)}: {type(exc).__name__}: {exc}"
    problem = comm.bcast(problem, root=0)
    if problem:
        raise CheckpointError(problem)


def _write(path, gathered, grid, scalars):
    """Write under a temporary name, then rename: a kill at any moment leaves the last complete file."""
    cells, pairs, faces = gathered
    temporary = f"{path}.tmp"
    with h5py.File(temporary, "w") as stored:
        stored.attrs.update({"format": FORMAT, "grid": grid, **scalars})
        for name, values in cells.items():
            stored[f"cells/{name}"] = values
        stored["faces/cells"] = pairs
        for name, values in faces.items():
            stored[f"faces/{name}"] = values
    with open(temporary, "rb+") as stream:
        os.fsync(stream.fileno())
    os.replace(temporary, path)


def load(path, comm, operators, state, xp, arrays=None):
    """Fill ``state``'s arrays from ``path`` (written on the grid of
    ``operators``, on any number of ranks, from either backend), and call
    ``arrays[name](rank's rows)`` for each of the run's own arrays the file
    holds (a file without one: not called); returns the file's extra
    scalars. Collective."""
    numbering = _Numbering(operators, comm)
    grid = fingerprint(operators.geometry, comm)
    pieces = scalars = None
    problem = ""
    if comm.Get_rank() == 0:
        try:
            cells, pairs, faces, scalars = _read(path)
        except Exception as exc:  # any failure must reach every rank, not leave them waiting
            problem = (f"cannot read the checkpoint {os.path.abspath(path)}: {type(exc).__name__}: {exc} "
                       "(a missing, truncated or corrupt file)")
        else:
            problem = _mismatch(path, scalars, cells, pairs, faces, operators, grid)
            if not problem:
                try:
                    pieces = numbering.pieces(cells, pairs, faces)
                except LookupError as exc:
                    problem = f"the checkpoint {os.path.abspath(path)} was written on another grid: {exc}"
    problem = comm.bcast(problem, root=0)
    if problem:
        raise CheckpointError(problem)
    pieces = comm.scatter(pieces, root=0)
    for name, piece in pieces.items():
        if name in (arrays or {}):
            arrays[name](piece)
        elif name in STATE_FIELDS and getattr(state, name) is not None:  # else a field this run does not keep
            getattr(state, name)[...] = xp.asarray(piece)
    if state.u_s_old is not None and "u_s_old" not in pieces:  # a file from before it
        state.u_s_old[...] = state.u_s
    scalars = comm.bcast(scalars, root=0)
    state.t, state.step, state.dt_old = scalars.pop("t"), int(scalars.pop("step")), scalars.pop("dt_old")
    for name in ("format", "grid"):
        scalars.pop(name)
    return scalars


def _read(path):
    with h5py.File(path, "r") as stored:
        scalars = {name: value.item() if numpy.ndim(value) == 0 else value for name, value in stored.attrs.items()}
        arrays = {name: stored[name][...] for name in
                  [f"cells/{f}" for f in stored.get("cells", {})] + ["faces/cells"] +
                  [f"faces/{f}" for f in FACE_FIELDS + OPTIONAL_FACE_FIELDS] if name in stored}
    cells = {name[len("cells/"):]: values for name, values in arrays.items() if name.startswith("cells/")}
    faces = {name: arrays[f"faces/{name}"] for name in FACE_FIELDS + OPTIONAL_FACE_FIELDS if f"faces/{name}" in arrays}
    return cells, arrays.get("faces/cells"), faces, scalars


def _mismatch(path, scalars, cells, pairs, faces, operators, grid):
    """What makes the file unusable on this grid, or ""; on rank 0."""
    where = os.path.abspath(path)
    missing = ({"format", "grid", *SCALARS} - set(scalars)) | {f"cells/{n}" for n in CELL_FIELDS if n not in cells}
    missing |= {f"faces/{n}" for n in FACE_FIELDS if n not in faces} | ({"faces/cells"} if pairs is None else set())
    if scalars.get("format") != FORMAT or missing:
        return (f"{where} is not a checkpoint of format {FORMAT} "
                f"(format {scalars.get('format')}, missing {', '.join(sorted(missing)) or 'nothing'})")
    bad = [name for name, value in [*cells.items(), *faces.items(), *((n, scalars[n]) for n in SCALARS)]
           if not numpy.isfinite(value).all()]
    if bad:
        return f"the checkpoint {where} holds Inf or NaN in {', '.join(bad)}: it is no state to go on from"
    counts = (cells["u"].shape[-1], len(pairs))
    here = (operators.geometry.num_global_cells, operators.faces.total)
    stored_grid = numpy.asarray(scalars["grid"])
    if counts != here or stored_grid.shape != grid.shape or not numpy.allclose(stored_grid, grid, rtol=1e-12, atol=0):
        return (f"the checkpoint {where} was written on another grid ({counts[0]} cells and {counts[1]} faces, this "
                f"grid {here[0]} and {here[1]}, outflow faces counted; or other cell sizes, shape or lengths): "
                "restart on the grid and outflow boundaries it was written on")
    return ""
