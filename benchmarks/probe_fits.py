"""How much of a DFG cylinder's delta_p error is the reading, how much the
cells' pressure: the two probes' pressures from a checkpoint's cell
pressures by weighted least-squares fits (linear and quadratic, weights
1 / distance^2) over the cells whose centroids are nearest each point,
beside the nearest cell's value. The demo reads a probe as its nearest
cell's pressure carried along that cell's gradient (plugin.flow.forces),
whose normal part at a wall the scheme's zero-normal-gradient equation
holds near zero; fits that agree with that reading put the error in the
cells.

    python demos/cylinder.py -cyl_case 3d1z -flow_mesh cylinder3d-tet-2.msh -flow_checkpoint_every 1000000
    python benchmarks/probe_fits.py --case 3d1z --mesh cylinder3d-tet-2.msh --checkpoint flow_checkpoint.h5
"""

import argparse
import os
import sys

import h5py
import numpy
import petsc4py
from mpi4py import MPI
from scipy.spatial import cKDTree

petsc4py.init([sys.argv[0]])  # PETSc sees none of this script's arguments (the demo it imports would pass them on)
from petsc4py import PETSc  # noqa: E402,F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demos"))
from cylinder import CASES  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402

FITS = ((1, (None, 10, 20, 40)), (2, (20, 30, 40, 60)))  # (order, cells; None: dim + 2)


def fit(centroids, pressure, tree, point, cells, order):
    """The value at ``point`` of the fit of ``order`` over the ``cells`` nearest centroids."""
    distance, nearest = tree.query(point, k=cells)
    x = centroids[nearest] - point
    dim = x.shape[1]
    columns = [numpy.ones(cells)] + [x[:, a] for a in range(dim)]
    if order == 2:
        columns += [x[:, a] * x[:, b] for a in range(dim) for b in range(a, dim)]
    weights = 1.0 / numpy.maximum(distance, 1e-300)
    A = numpy.array(columns).T * weights[:, None]
    coefficients, *_ = numpy.linalg.lstsq(A, pressure[nearest] * weights, rcond=None)
    return coefficients[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("2d1", "3d1z"), required=True)
    parser.add_argument("--mesh", required=True)
    parser.add_argument("--checkpoint", required=True, help="a flow checkpoint of the run on that mesh")
    args = parser.parse_args()
    case = CASES[args.case]
    g = distribute(args.mesh, MPI.COMM_SELF).geometry
    with h5py.File(args.checkpoint, "r") as f:
        pressure = f["cells/p"][...][g.cell_numbers]  # the file is in the mesh's own cell order
    tree, reference = cKDTree(g.centroids), case.reference["delta_p"]
    probes = numpy.array(case.probes)

    def line(name, front, back):
        dp = front - back
        print(f"{name:32s} front {front:.6f} back {back:.6f} delta_p {dp:.6f} ({100 * (dp - reference) / reference:+.2f}%)")

    _, nearest = tree.query(probes, k=1)
    line("nearest cells' values", *pressure[nearest])
    for order, counts in FITS:
        for cells in counts:
            cells = cells or g.dim + 2
            line(f"order {order} over {cells} cells",
                 *(fit(g.centroids, pressure, tree, point, cells, order) for point in probes))


if __name__ == "__main__":
    main()
