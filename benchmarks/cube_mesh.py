"""The unit cube cut into 6 n^3 tetrahedra (Kuhn's split, tests/meshes.py),
with its boundary groups "lid" (z = 1) and "wall", written as a gmsh file for
demos/cavity.py -flow_mesh.

    python benchmarks/cube_mesh.py 70 cube70.msh     (2,058,000 tetrahedra)
"""

import sys
import time

import meshio

import harness  # noqa: F401  (puts tests/ on the path)
from meshes import unit_mesh


def main():
    n, path = int(sys.argv[1]), sys.argv[2]
    start = time.perf_counter()
    mesh = unit_mesh("tetra", n=n)
    meshio.write(path, mesh, file_format="gmsh22", binary=True)
    cells = sum(len(block.data) for block in mesh.cells if block.type == "tetra")
    print(f"cube_mesh: {path}: {cells} tetrahedra in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
