"""One pressure solve on a mesh extruded along a periodic axis (the
spanwise-periodic cylinder of demos/cylinder_les.py), layerfft against
gpuamg on the 3D mesh: the flow driver's pressure Laplacian (its two-point
compact operator, the outlet's pressure held), a random right-hand side,
from x = 0 to rtol 1e-8 of the true residual. Each variant's KSP is set up
once; a solve is timed by the wall clock after a device synchronize
(median of --repeats, after --warmup), on gpusell matrices with CUDA
vectors (--host: aij and host vectors, layerfft's direct sections against
gamg). Under mpiexec the mesh is cut by its cross-section (the columns
partition) and the right-hand side is the same whatever the ranks; on GPUs
layerfft's spectra and graphcg's sums travel by NCCL (their default where
CuPy has it) or, in the variants so named, through host memory by MPI.

    python demos/cylinder_mesh.py ...  # or cylinder_les's make_spanwise
    python benchmarks/extruded_solves.py --mesh span.msh --json extruded-solves.json
    mpiexec -n 8 python benchmarks/extruded_solves.py --mesh span.msh --host --json extruded-solves-8.json
"""

import argparse
import gzip
import shutil
import sys

import petsc4py

petsc4py.init(sys.argv[:1])

import numpy  # noqa: E402
from mpi4py.MPI import MAX  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
import plugin  # noqa: E402,F401
from petsc_ext.matrices import aij_from_rows  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402
from plugin.flow.extrusion import layer_order  # noqa: E402
from plugin.flow.operators import compact_laplacian  # noqa: E402

PERIODIC = (("front", "back"),)
VARIANTS = {
    "cg + layerfft multigrid": {"ksp_type": "cg", "pc_type": "layerfft", "pc_layerfft_sections": "multigrid"},
    "cg + layerfft multigrid, spectra by MPI": {"ksp_type": "cg", "pc_type": "layerfft",
                                                "pc_layerfft_sections": "multigrid", "pc_layerfft_transport": "mpi"},
    "graphcg + gpuamg": {"ksp_type": "graphcg", "pc_type": "gpuamg"},
    "graphcg + gpuamg, sums by MPI": {"ksp_type": "graphcg", "pc_type": "gpuamg", "ksp_graphcg_transport": "mpi"},
    "graphcg + gpuamg float32": {"ksp_type": "graphcg", "pc_type": "gpuamg", "pc_gpuamg_value_type": "float32",
                                 "pc_gpuamg_vector_type": "float32"},
    "graphcg + gpuamg float32, sparsified": {"ksp_type": "graphcg", "pc_type": "gpuamg",
                                             "pc_gpuamg_value_type": "float32", "pc_gpuamg_vector_type": "float32",
                                             "pc_gpuamg_sparsify": 0.2},
}
HOST_VARIANTS = {
    "cg + layerfft direct": {"ksp_type": "cg", "pc_type": "layerfft", "pc_layerfft_sections": "direct"},
    "cg + layerfft multigrid": {"ksp_type": "cg", "pc_type": "layerfft", "pc_layerfft_sections": "multigrid"},
    "cg + gamg": {"ksp_type": "cg", "pc_type": "gamg"},
}


def unzipped(path, mpi):
    """The mesh's path, a .msh.gz unpacked beside it on rank 0 first."""
    if path.endswith(".gz"):
        if mpi.rank == 0:
            with gzip.open(path, "rb") as stream, open(path[:-3], "wb") as out:
                shutil.copyfileobj(stream, out)
        mpi.Barrier()
        path = path[:-3]
    return path


def run(name, options, P, b, layers, args):
    ksp = harness.krylov_solver(P, f"v{abs(hash(name)) % 10**6}_", options, max_it=500)
    ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
    if options["pc_type"] == "layerfft":
        ksp.getPC().getPythonContext().set_layers(layers)
    x, r = P.createVecRight(), P.createVecLeft()
    setup = harness.seconds(ksp.setUp)
    ms = harness.median_solve_ms(ksp, b, x, args.warmup, args.repeats)
    P.mult(x, r)
    r.aypx(-1.0, b)
    row = {"variant": name, "ms_per_solve": ms, "iterations": ksp.getIterationNumber(),
           "reason": int(ksp.getConvergedReason()), "setup_s": setup, "relative_residual": r.norm() / b.norm(),
           "solution": x.getArray().copy()}
    context = ksp.getPC().getPythonContext() if options["pc_type"] == "layerfft" else None
    if context is not None and context.solver.sections == "multigrid":
        row["section_iterations"] = context.solver.section_solver.iterations
        row["section_levels"] = [n for n, _ in context.solver.section_solver.multigrid.sizes()]
    for vec in (x, r):
        vec.destroy()
    ksp.destroy()
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mesh", required=True, help="a .msh (or .msh.gz) with groups outlet, front and back")
    parser.add_argument("--host", action="store_true", help="aij and host vectors")
    parser.add_argument("--variants", nargs="*")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json")
    parser.add_argument("--commit")
    args = parser.parse_args()
    variants = HOST_VARIANTS if args.host else VARIANTS
    comm = PETSc.COMM_WORLD
    mpi = comm.tompi4py()
    g = distribute(unzipped(args.mesh, mpi), mpi, "columns", PERIODIC).geometry
    layers = layer_order(g.centroids)
    A = (-compact_laplacian(g, open_tags=[g.boundary_names["outlet"]])).tocsr()
    A.sort_indices()
    P = aij_from_rows(A.indptr, A.indices, A.data, g.num_cells, comm=comm, mat_type="aij" if args.host else "gpusell")
    b = P.createVecLeft()
    b.setArray(numpy.random.default_rng(0).standard_normal(g.num_global_cells)[g.cell_numbers])
    payload = {**harness.metadata(args.commit), "mesh": args.mesh, "cells": g.num_global_cells, "ranks": mpi.size,
               "layers": int(layers.shape[0]), "columns": mpi.allreduce(int(layers.shape[1])), "rows": []}
    reference = None
    for name in args.variants or list(variants):
        row = run(name, variants[name], P, b, layers, args)
        solution = row.pop("solution")
        reference = solution if reference is None else reference
        row["difference_from_first"] = (mpi.allreduce(float(abs(solution - reference).max(initial=0.0)), op=MAX) /
                                        mpi.allreduce(float(abs(reference).max(initial=0.0)), op=MAX))
        payload["rows"].append(row)
        if mpi.rank == 0:
            harness.write_json(args.json, payload, quiet=True)  # after every variant: a timeout loses nothing
    if mpi.rank != 0:
        return
    harness.print_table(payload["rows"], [("variant", "variant", "{}"), ("ms_per_solve", "ms a solve", "{:.3f}"),
                                          ("iterations", "its", "{}"), ("setup_s", "set-up s", "{:.2f}"),
                                          ("relative_residual", "||b - A x|| / ||b||", "{:.2e}"),
                                          ("difference_from_first", "max diff / max", "{:.1e}")])
    harness.write_json(args.json, payload)


if __name__ == "__main__":
    main()
