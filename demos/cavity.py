"""Lid-driven cavity, incompressible, on a DMDA with the project's GPU types.

2D (default): the unit square, lid y = 1 moving with u = 1, run to a steady
state and compared with Ghia, Ghia and Shin (1982) at Re = 100, 400, 1000.
3D (-flow_dim 3): Vianello 2020's case, the box (0,1) x (0,1) x (-1,1) whose face
x = 1 slides with velocity (0, 1, 0), run to -flow_t_end; profiles in the
mid-plane z = 0.

    python demos/cavity.py -flow_re 100 -da_grid_x 64 -da_grid_y 64 -flow_output_dir out
    python demos/cavity.py -flow_dim 3 -flow_re 1000 -da_grid_x 64 -da_grid_y 64 -da_grid_z 128 -flow_t_end 8
    python demos/cavity.py -flow_mesh square.msh -flow_re 100     (demos/meshes.py makes such meshes)

With -flow_mesh FILE (any mesh meshio reads; rank 0 reads it and sends each
rank its part, -flow_mesh_partitioner metis, bisection, or columns for a
mesh extruded along z) the cavity is that mesh of the unit square or
cube, whose boundary groups are named "lid" (moving with u = 1 along x)
and "wall"; in 2D its centrelines are interpolated
linearly from the cell centres and the walls and compared with Ghia's. Its
other groups may come in periodic pairs, -flow_mesh_periodic a:b,c:d (each
b the face of a moved by one translation): their faces join the cells on
either side, as a DMDA's periodic axis does.

With -flow_output_dir DIR it writes there centerline_u.csv (y,u along x = 0.5),
centerline_v.csv (x,v along y = 0.5), the fields as cavity.xdmf (+ .h5) for
ParaView and centerlines.png against Ghia's tables. The matrices are gpusell
(-dm_mat_type to change), the pressure solver graphcg + gpuamg
(-pressure_ksp_type, -pressure_pc_type, ...); -help lists every option,
-log_view the phases.
"""

import os
import resource
import sys
import time

import numpy
import petsc4py

petsc4py.init(sys.argv)

from petsc4py import PETSc  # noqa: E402

import plugin  # noqa: E402,F401  (registers gpusell, ainv, cacg)
from petsc_ext.device import gpu_available  # noqa: E402
from petsc_ext.matrices import dm_mat_type  # noqa: E402
from petsc_ext.options import OptionError, OptionsReader, help_requested, option_defaults  # noqa: E402
from plugin.flow import ghia, output  # noqa: E402
from plugin.flow.boundary import BoundaryError, Wall  # noqa: E402
from plugin.flow.box import dmda_partition  # noqa: E402
from plugin.flow.checkpoint import CheckpointError  # noqa: E402
from plugin.flow.collective import exit_with  # noqa: E402
from plugin.flow.distribution import distribute  # noqa: E402
from plugin.flow.mesh import MeshError, periodic_pairs  # noqa: E402
from plugin.flow.partition import PARTITIONERS  # noqa: E402
from plugin.flow.solver import CPU_NOTICE, FlowBlowUp, FlowSolver, program_mat_type  # noqa: E402

LID = {2: {"ymax": Wall((1.0, 0.0))}, 3: {"xmax": Wall((0.0, 1.0, 0.0))}}  # the moving side
LENGTHS = {2: (1.0, 1.0), 3: (1.0, 1.0, 2.0)}


def main():
    reader = OptionsReader("", "Lid-driven cavity demo")
    dim = reader.int("flow_dim", 2, "2: Ghia's square cavity; 3: Vianello 2020's box", low=2, high=3)
    re = reader.real("flow_re", 100.0 if dim == 2 else 1000.0, "Reynolds number (lid speed and size 1)", low=1e-12)
    directory = reader.string("flow_output_dir", "", "directory for profiles, fields and plot (none: no files)")
    mesh_path = reader.string("flow_mesh", "", "an unstructured mesh (meshio) with boundary groups lid and wall, "
                              "instead of the DMDA box")
    partitioner = reader.choice("flow_mesh_partitioner", "metis", tuple(PARTITIONERS), "how -flow_mesh is cut among "
                                "ranks: METIS on the cell graph, or recursive coordinate bisection")
    periodic = reader.string("flow_mesh_periodic", "", "pairs of -flow_mesh's boundary groups joined as periodic, "
                             "a:b,c:d (each second group the first moved by a translation)")
    if mesh_path:
        return run_on_mesh(mesh_path, re, directory, partitioner, periodic)
    if dim == 2 and PETSc.Options().hasName("da_grid_z"):
        raise SystemExit("cavity: -da_grid_z needs -flow_dim 3")
    sizes = (64, 64) if dim == 2 else (32, 32, 64)
    da = PETSc.DMDA().create(dim=dim, sizes=sizes, stencil_width=1, setup=False)
    da.setMatType("gpusell" if gpu_available() else "aij")
    da.setFromOptions()
    da.setUp()
    if dm_mat_type(da) == "aij" and not gpu_available():
        PETSc.Sys.Print(f"cavity: {CPU_NOTICE}")
    if min(da.getSizes()) < 2:
        raise SystemExit(f"cavity: the grid {'x'.join(map(str, da.getSizes()))} needs at least 2 cells along "
                         "every axis (-da_grid_x, -da_grid_y, -da_grid_z)")
    defaults = with_output(STEADY_2D if dim == 2 else {"flow_t_end": 8.0}, directory, da.getComm().tompi4py())
    try:
        with option_defaults(da.getOptionsPrefix(), defaults):
            solver = FlowSolver.from_dmda(da, LENGTHS[dim], nu=1.0 / re, boundary_conditions=LID[dim])
    except (BoundaryError, OptionError) as exc:
        exit_with(da.getComm().tompi4py(), f"cavity: {exc}")
    cells = "x".join(str(n) for n in da.getSizes())
    PETSc.Sys.Print(f"cavity: {dim}D, Re = {re:g}, {cells} cells on {da.getComm().getSize()} ranks, "
                    f"{solvers_line(solver)}")
    state = run(solver)
    if state is None:
        return 1
    comm = da.getComm().tompi4py()
    partition = dmda_partition(da)
    u = output.natural_field(comm, partition, solver.xp, state.u)
    p = output.natural_field(comm, partition, solver.xp, state.p)
    if comm.Get_rank() == 0:
        report(dim, re, u, p, solver.boundary_conditions, directory, state, solver.widths)
    return 0


# 2D runs to a steady state, where Crank-Nicolson diffusion lets dt follow the CFL limit alone
STEADY_2D = {"flow_t_end": 200.0, "flow_steady_tol": 1e-5, "flow_diffusion": "implicit"}


def with_output(defaults, directory, comm):
    """``defaults`` with the checkpoint file in ``directory``, which is made and
    checked on every rank before the run, not after it."""
    if not directory:
        return defaults
    output.prepare_directory(directory, comm)
    return {**defaults, "flow_checkpoint_file": os.path.join(directory, "flow_checkpoint.h5")}


def solvers_line(solver):
    return (f"matrices {solver.matrices.poisson.getType()}, pressure {solver.pressure_ksp.getType()} + "
            f"{solver.pressure_ksp.getPC().getType()} from {solver.pressure_start}, diffusion {solver.diffusion}")


def run(solver):
    """The run from -flow_restart or rest to its end, its timing printed; None after a blow-up (reported).
    With -help the options are listed: nothing to run."""
    if help_requested():
        raise SystemExit(0)
    try:
        state = solver.run(solver.initial_state())
    except FlowBlowUp as exc:
        PETSc.Sys.Print(str(exc))
        return None
    except CheckpointError as exc:
        exit_with(solver.mpi, f"cavity: {exc}")
    solver.print_timing()
    return state


def run_on_mesh(path, re, directory, partitioner, periodic=""):
    """The cavity on the unstructured mesh at ``path``: rank 0 reads it and
    sends each rank its part (cells ordered by reverse Cuthill-McKee inside
    it), the groups of ``periodic`` (-flow_mesh_periodic) joined; rank 0
    writes the results."""
    comm = PETSc.COMM_WORLD
    mpi = comm.tompi4py()
    start = time.perf_counter()
    try:
        parts = distribute(path, mpi, partitioner, periodic_pairs(periodic))
    except MeshError as exc:
        exit_with(mpi, f"cavity: {exc}")
    geometry = parts.geometry
    if mpi.size > 1:
        PETSc.Sys.Print(f"cavity: {partitioner} partition: {parts.faces_cut} of {geometry.num_global_faces} faces "
                        f"cut, halo cells per rank {parts.halo}")
    dim = geometry.dim
    lid = {"lid": Wall(tuple(numpy.eye(dim)[0])), "wall": Wall()}
    defaults = with_output(STEADY_2D if dim == 2 else {}, directory, mpi)
    mat_type = program_mat_type("cavity")
    try:
        with option_defaults("", defaults):
            solver = FlowSolver(geometry, comm, mat_type, 1.0 / re, lid)
    except (BoundaryError, OptionError) as exc:
        exit_with(mpi, f"cavity: {exc}")
    done = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    reading = ", ".join(f"mesh {name} {seconds:.2f}" for name, seconds in parts.seconds.items())
    PETSc.Sys.Print(f"cavity: set-up {done - start:.2f} s ({reading}, {solver.setup_report()}), peak host memory "
                    f"{peak:.2f} GiB on rank 0")
    if mpi.rank == 0:
        kinds = ", ".join(sorted({b.type for b in parts.mesh.cells if b.dim == dim}))
        print(f"cavity: {dim}D, Re = {re:g}, mesh {path}: {geometry.num_global_cells} cells ({kinds}) on {mpi.size} "
              f"ranks, {solvers_line(solver)}")
    state = run(solver)
    if state is None:
        return 1
    fields = [output.mesh_field(mpi, geometry, solver.xp, a) for a in (state.u, state.p)]
    if mpi.rank == 0:
        report_on_mesh(path, re, directory, parts.mesh, parts.whole, solver.boundary_conditions, state, *fields)
    return 0


def report_on_mesh(path, re, directory, mesh, whole, walls, state, u, p):
    profiles = output.mesh_centerlines(whole, u, walls) if whole.dim == 2 else None
    if profiles is not None:
        compare_with_ghia(re, profiles)
    if not directory:
        return
    written = [output.write_mesh_xdmf(os.path.join(directory, "cavity.xdmf"), mesh, u, p)]
    if profiles is not None:
        written += output.write_centerlines(directory, profiles)
        title = f"2D lid-driven cavity, Re = {re:g}, {whole.num_cells} cells of {os.path.basename(path)}, t = {state.t:.4g}"
        written.append(output.plot_centerlines(os.path.join(directory, "centerlines.png"), profiles, title,
                                               ghia_reference(re)))
    print("cavity: wrote " + ", ".join(os.path.abspath(w) for w in written))


def ghia_reference(re):
    if int(re) in ghia.U and re == int(re):
        return (ghia.Y, ghia.U[int(re)]), (ghia.X, ghia.V[int(re)])
    return None


def compare_with_ghia(re, profiles):
    if ghia_reference(re) is None:
        return
    (y, uy), (x, vx) = profiles
    du, dv = ghia.deviations(int(re), y, uy, x, vx)
    left_out = ghia.suspect_points(int(re))
    print(f"cavity: largest difference from Ghia et al. (Re = {re:g}): u {du:.4f}, v {dv:.4f} (lid speed 1)"
          + (f"; left out: {left_out}, an entry of the table suspect as printed (plugin/flow/ghia.py)"
             if left_out else ""))


def report(dim, re, u, p, walls, directory, state, widths=None):
    profiles = output.centerlines(u, LENGTHS[dim], walls, widths)
    if dim == 2:
        compare_with_ghia(re, profiles)
    if not directory:
        return
    os.makedirs(directory, exist_ok=True)
    written = output.write_centerlines(directory, profiles)
    origin = (0.0, 0.0) if dim == 2 else (0.0, 0.0, -1.0)  # Vianello 2020's box is (0,1) x (0,1) x (-1,1)
    written.append(output.write_xdmf(os.path.join(directory, "cavity.xdmf"), u, p, LENGTHS[dim], origin, widths))
    title = f"{dim}D lid-driven cavity, Re = {re:g}, {'x'.join(map(str, u.shape[1:][::-1]))} cells, t = {state.t:.4g}"
    written.append(output.plot_centerlines(os.path.join(directory, "centerlines.png"), profiles, title,
                                           ghia_reference(re) if dim == 2 else None))
    print("cavity: wrote " + ", ".join(os.path.abspath(path) for path in written))


if __name__ == "__main__":
    sys.exit(main())
