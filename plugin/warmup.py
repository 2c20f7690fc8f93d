"""``python -m plugin.warmup``: compile once, after installing, the GPU kernels
the project's types and flow driver use, so that a first real run does not.

CuPy compiles each kernel (its own elementwise and reduction kernels, and
the project's CUDA modules) with NVRTC at first use and keeps it in its
persistent cache (``~/.cupy/kernel_cache``, or ``CUPY_CACHE_DIR``). Kernels
do not depend on the problem's size, so small runs of every path compile
what the large ones need: the flow driver on 2D and 3D DMDA boxes (gpuamg on
the box's levels, boxfft, implicit and explicit diffusion) and on triangles
and tetrahedra (the aggregation), and a solve with each type. Never needed
for correctness: without it, the first run compiles as it goes.
"""

import itertools
import os
import sys
import time

import petsc4py

petsc4py.init(sys.argv)

import meshio  # noqa: E402
import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import plugin  # noqa: E402,F401  (registers the types)
from petsc_ext.options import option_defaults  # noqa: E402
from plugin.flow.boundary import Wall  # noqa: E402
from plugin.flow.mesh import mesh_geometry  # noqa: E402
from plugin.flow.solver import FlowSolver  # noqa: E402

STEPS = {"flow_max_steps": 3}
RUNS = {  # name -> (DMDA sizes or a simplex mesh's dimension, the options of the run)
    "2D box, implicit diffusion (make demo's case)": ((16, 16), {"flow_diffusion": "implicit"}),
    "3D box, explicit diffusion, boxfft": ((8, 8, 16), {}),
    "3D box, gpuamg on the box's levels": ((8, 8, 16), {"pressure_pc_type": "gpuamg"}),
    "3D box, gpuamg's aggregation": ((8, 8, 16), {"pressure_pc_type": "gpuamg", "flow_pressure_levels": "algebraic"}),
    "triangles, implicit diffusion": (2, {"flow_diffusion": "implicit"}),
    "tetrahedra (Fischer's guess for the pressure)": (3, {}),
}
SOLVES = {  # the types the flow driver does not choose by itself
    "cacg + ainv": {"ksp_type": "cacg", "pc_type": "ainv"},
    "cg + ainv chebyshev": {"ksp_type": "cg", "pc_type": "ainv", "pc_ainv_type": "chebyshev"},
    "gmres + ainv spai, float32": {"ksp_type": "gmres", "pc_type": "ainv", "pc_ainv_type": "spai",
                                   "pc_ainv_value_type": "float32"},
    "gmres + wbilu": {"ksp_type": "gmres", "pc_type": "wbilu"},
    "cg + gpuamg float32": {"ksp_type": "cg", "pc_type": "gpuamg", "pc_gpuamg_value_type": "float32"},
}


def simplex_mesh(dim, n=6):
    """The unit square or cube, n boxes a side, each cut into simplices
    (2 triangles, or Kuhn's 6 tetrahedra), positively oriented."""
    axes = numpy.linspace(0.0, 1.0, n + 1)
    points = numpy.array(list(itertools.product(axes, repeat=dim)))[:, ::-1]  # x fastest
    index = numpy.arange((n + 1) ** dim).reshape((n + 1,) * dim)
    corners = numpy.array([index[tuple(slice(o, o + n) for o in offset)].ravel()
                           for offset in itertools.product((0, 1), repeat=dim)]).T  # corner k: bits (z, y, x)
    paths = [[0] + list(itertools.accumulate(2 ** (dim - 1 - a) for a in order))
             for order in itertools.permutations(range(dim))]  # Kuhn: one simplex per axis order
    cells = numpy.concatenate([corners[:, path] for path in paths])
    edges = points[cells[:, 1:]] - points[cells[:, :1]]
    flip = numpy.linalg.det(edges) < 0
    cells[flip, :2] = cells[flip, 1::-1]
    return meshio.Mesh(points, [("triangle" if dim == 2 else "tetra", cells)])


def flow_run(grid, options):
    """A few steps of the lid-driven cavity on a DMDA box (``grid``: its sizes)
    or on a simplex mesh (``grid``: its dimension), every boundary moving; the steps taken."""
    with option_defaults("", {**STEPS, **options}):
        if isinstance(grid, tuple):
            da = PETSc.DMDA().create(dim=len(grid), sizes=grid, stencil_width=1, setup=False)
            da.setMatType("gpusell")
            da.setUp()
            lid = {"ymax": Wall((1.0, 0.0))} if len(grid) == 2 else {"xmax": Wall((0.0, 1.0, 0.0))}
            solver = FlowSolver.from_dmda(da, (1.0,) * len(grid), 0.01, lid)
        else:
            geometry = mesh_geometry(simplex_mesh(grid), ungrouped="wall")
            solver = FlowSolver(geometry, PETSc.COMM_SELF, "gpusell", 0.01, {"wall": Wall(numpy.eye(grid)[0])})
    steps = solver.run(solver.initial_state()).step
    solver.destroy()
    return steps


def type_solve(options):
    """A solve with a 3D Laplacian's gpusell matrix under ``options``; its converged reason."""
    from petsc_ext.matrices import aij_from_csr
    from scipy.sparse import diags, identity, kron

    one = diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(10, 10))
    lap = (kron(kron(one, identity(10)), identity(10)) + kron(identity(100), one)
           + kron(kron(identity(10), one), identity(10))).tocsr()
    lap.sort_indices()
    A = aij_from_csr(lap.indptr, lap.indices, lap.data, lap.shape, comm=PETSc.COMM_SELF, mat_type="gpusell")
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setOptionsPrefix("warmup_")
    ksp.setOperators(A)
    with option_defaults("warmup_", options):
        ksp.setFromOptions()
    b, x = A.createVecs()
    b.set(1.0)
    ksp.solve(b, x)
    reason = ksp.getConvergedReason()
    for obj in (ksp, A, b, x):
        obj.destroy()
    return reason


def main():
    from gpu_mats.backend import cupy_status

    cupy, why = cupy_status()
    if cupy is None or not PETSc.Sys.hasExternalPackage("cuda"):
        PETSc.Sys.Print(f"warmup: nothing to compile: no usable GPU ({why or 'this PETSc was built without CUDA'})")
        return 0
    start = time.perf_counter()
    work = [(name, flow_run, run) for name, run in RUNS.items()] + [(name, type_solve, (o,)) for name, o in
                                                                     SOLVES.items()]
    for name, call, arguments in work:
        began = time.perf_counter()
        call(*arguments)
        PETSc.Sys.Print(f"warmup: {name}: {time.perf_counter() - began:.1f} s")
    cache = os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))  # CuPy's default
    PETSc.Sys.Print(f"warmup: done in {time.perf_counter() - start:.1f} s; CuPy's kernel cache is {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
