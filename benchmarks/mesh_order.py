"""SpMV of an unstructured mesh's pressure Laplacian in three cell orders:
the mesh file's, reverse Cuthill-McKee's (plugin.flow.partition.locality_order) and
a random one, as gpusell and aijcusparse, against the copy bandwidth.

    python benchmarks/mesh_order.py --mesh cube-tets.msh --json mesh-order.json
    python benchmarks/mesh_order.py --cube 70 --json mesh-order.json   (6 x 70^3 tetrahedra, Kuhn's split)
"""

import argparse
import os
import sys

import petsc4py

petsc4py.init(sys.argv[:1])

import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
import plugin  # noqa: E402,F401
from petsc_ext import gpusell  # noqa: E402
from petsc_ext.matrices import aij_from_csr  # noqa: E402
from plugin.flow.mesh import mesh_geometry  # noqa: E402
from plugin.flow.partition import locality_order  # noqa: E402
from plugin.flow.operators import compact_laplacian  # noqa: E402


def orders(whole, seed=0):
    """Cell numberings: {name: new number of each mesh cell}."""
    n = whole.num_cells
    return {"mesh file": numpy.arange(n), "reverse Cuthill-McKee": locality_order(whole.face_cells, numpy.zeros(n, int)),
            "random": numpy.random.default_rng(seed).permutation(n)}


def renumbered(L, number):
    """L with rows and columns renumbered (cell c becomes number[c]), as CSR arrays."""
    inverse = numpy.argsort(number)
    P = L[inverse][:, inverse].tocsr()
    P.sort_indices()
    return P.indptr, P.indices, P.data


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--mesh", help="a mesh file meshio reads")
    source.add_argument("--cube", type=int, help="the unit cube cut into 6 n^3 tetrahedra (tests/meshes.py)")
    parser.add_argument("--json")
    parser.add_argument("--commit")
    args = parser.parse_args()
    import meshio

    from meshes import unit_mesh

    mesh = meshio.read(args.mesh) if args.mesh else unit_mesh("tetra", n=args.cube)
    name = os.path.basename(args.mesh) if args.mesh else f"cube of 6 x {args.cube}^3 tetrahedra"
    whole = mesh_geometry(mesh)
    L = -compact_laplacian(whole)
    bandwidth = harness.copy_bandwidth_GBs()
    rows = []
    for order, number in orders(whole).items():
        csr = renumbered(L, number)
        n = whole.num_cells
        for mat_type in ("gpusell", "aijcusparse"):
            A = aij_from_csr(*csr, (n, n), comm=PETSc.COMM_SELF, mat_type=mat_type)
            x, y = A.createVecs()
            x.set(1.0)
            us = harness.wall_us(lambda A=A, x=x, y=y: A.mult(x, y))
            matrix_bytes = (gpusell.context(A).local.nbytes if mat_type == "gpusell"
                            else L.nnz * 12 + (n + 1) * 4)
            moved = matrix_bytes + 2 * n * 8
            rows.append({"order": order, "type": mat_type, "us": us, "GBs": moved / (us * 1e-6) / 1e9,
                         "copy": 100 * moved / (us * 1e-6) / 1e9 / bandwidth})
            print(rows[-1], flush=True)
    print(f"{name}: {whole.num_cells} cells, {L.nnz} nonzeros; copy bandwidth {bandwidth:.0f} GB/s")
    harness.print_table(rows, [("order", "order", "{}"), ("type", "type", "{}"), ("us", "MatMult us (wall)", "{:.1f}"),
                               ("GBs", "GB/s", "{:.0f}"), ("copy", "% copy", "{:.1f}")])
    harness.write_json(args.json, {**harness.metadata(args.commit), "mesh": name,
                                   "cells": whole.num_cells, "nnz": int(L.nnz), "copy_bandwidth_GBs": bandwidth,
                                   "table": rows})


if __name__ == "__main__":
    main()
