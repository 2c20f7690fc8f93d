"""The loop of the exact-solution demos (demos/beltrami.py,
demos/hiemenz.py): one run on each of several gmsh meshes, each with cells
half the size of the last, and the observed orders of the errors between
successive meshes, printed as each mesh is done and kept in
DIR/summary.json, so that a run stopped on a fine mesh keeps the coarser
ones."""

import json
import math
import os
import tempfile

import numpy
from petsc4py import PETSc

from petsc_ext.options import OptionError
from plugin.flow.collective import RankZeroError, exit_with, on_rank_zero
from plugin.flow.mesh import MeshError
from plugin.flow.solver import FlowBlowUp


def refuse_bad_input(program, main):
    """main() (a demo's exit status), or its bad option or mesh as one line, "program: what", on every rank."""
    try:
        return main()
    except (OptionError, MeshError) as exc:
        exit_with(PETSc.COMM_WORLD.tompi4py(), f"{program}: {exc}")


def level_options(reader, program, size, most):
    """(size, levels, directory, mesh_dir) from -PROGRAM_size (default ``size``), -PROGRAM_levels (at most
    ``most``), -flow_output_dir and -PROGRAM_mesh_dir."""
    return (reader.real(f"{program}_size", size, "cell size of the first mesh", low=1e-3, high=1.0),
            reader.int(f"{program}_levels", 3, "meshes, each with cells half the size of the last", low=1, high=most),
            reader.string("flow_output_dir", "", "directory for summary.json (none: no file)"),
            reader.string(f"{program}_mesh_dir", "", f"keep the meshes {program}-SIZE.msh here and read those "
                          "already here (made where gmsh is, run where it is not); none: made afresh in a scratch "
                          "directory"))


def observed_orders(program, levels, size, make_mesh, run, keys, directory="", mesh_dir="", header=None):
    """The rows of ``run(path)`` (a dict with "cells", "h" and "<key>_error" for each of ``keys``) on the
    meshes ``make_mesh(h, path)`` writes with h = size / 2^level (on rank zero; kept in, and read again
    from, ``mesh_dir`` where given), each row with "<key>_order" against the row before; each printed as it
    is done, and DIR/summary.json ({**header, "levels": rows}) rewritten."""
    mpi, rows = PETSc.COMM_WORLD.tompi4py(), []
    with tempfile.TemporaryDirectory() as scratch:
        for level in range(levels):
            h = size / 2**level
            path = os.path.join(mesh_dir or scratch, f"{program}-{h:g}.msh")
            try:
                on_rank_zero(mpi, lambda: _made(path, h, make_mesh))
            except RankZeroError as exc:
                exit_with(mpi, f"{program}: cannot make the gmsh mesh ({exc})")
            try:
                rows.append(run(path))
            except FlowBlowUp as exc:
                exit_with(mpi, str(exc))
            _report(program, rows, keys, mpi, directory, header or {})
    return rows


def balanced_velocity(velocity, g, mpi, held, normals):
    """``velocity(x, t)`` less the net flux of its values at the boundary faces ``held`` (a mask of g's),
    spread over their area along ``normals(x)``: held velocities that balance, the exact ones' net flux at the
    faces' centroids being O(h^2). Every rank takes all those faces once, so that a call, which a rank makes
    only for the groups it has faces of, is not collective."""
    centres, outward, areas = (numpy.concatenate(mpi.allgather(a[held]))
                               for a in (g.boundary_centroids, g.boundary_normals, g.boundary_areas))

    def balanced(x, t):
        net = float(((velocity(centres, t) * outward).sum(axis=1) * areas).sum())
        return velocity(x, t) - net / areas.sum() * normals(x)

    return balanced


def l2(weights, values, mpi):
    """The ``weights``-weighted L2 norm of ``values`` (a row a point) over every rank."""
    sums = mpi.allreduce(numpy.array([float((weights * (values**2).reshape(len(weights), -1).sum(axis=1)).sum()),
                                      float(weights.sum())]))
    return math.sqrt(sums[0] / sums[1])


def less_mean(weights, values, mpi):
    """``values`` less their ``weights``-weighted mean over every rank."""
    sums = mpi.allreduce(numpy.array([float((weights * values).sum()), float(weights.sum())]))
    return values - sums[0] / sums[1]


def gmsh_meshes():
    """demos/meshes.py, beside this module: imported only where meshes are made (gmsh is an optional extra)."""
    import meshes

    return meshes


def _made(path, h, make_mesh):
    """The mesh at ``path``, made there (its directory too) unless it is."""
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        make_mesh(h, path)


def _report(program, rows, keys, mpi, directory, header):
    row, previous = rows[-1], rows[-2] if len(rows) > 1 else None
    for key in keys:
        row[f"{key}_order"] = (math.log(previous[f"{key}_error"] / row[f"{key}_error"])
                               / math.log(previous["h"] / row["h"]) if previous else None)
    if mpi.rank != 0:
        return
    print(f"{program}: {row['cells']:8d}  " + "  ".join(
        f"{row[key + '_error']:.4e}" + (f" ({row[key + '_order']:.2f})" if previous else "") for key in keys),
        flush=True)
    if directory:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "summary.json"), "w") as stream:
            json.dump({**header, "levels": rows}, stream, indent=1)
