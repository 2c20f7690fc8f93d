"""layerfft on several ranks: a mesh extruded along z cut by its
cross-section (the columns partition), each rank transforming its own
columns and solving its share of the wavenumbers on the whole
cross-section. Held against scipy's direct solve of the whole mesh on one
rank and against gamg's flow; a partition that cuts the columns is refused.
Run on 1 rank and, under mpiexec, on 2 and 3."""

import re

import meshio
import numpy
import pytest
import scipy.sparse
from meshes import prism_layers_mesh, shared_file
from petsc4py import PETSc
from test_extruded import direct_solution

from gpu_mats.extruded import SECTIONS, ExtrudedSolver
from gpu_mats.wavenumbers import SpectrumTranspose, spectrum_split
from petsc_ext.options import OptionError, option_defaults
from plugin.flow.boundary import Wall
from plugin.flow.distribution import distribute
from plugin.flow.extrusion import layer_order
from plugin.flow.mesh import MeshError, mesh_geometry
from plugin.flow.operators import compact_laplacian
from plugin.flow.partition import column_partition
from plugin.flow.solver import FlowSolver

pytestmark = pytest.mark.mpi
PERIODIC = (("zmin", "zmax"),)


def written_prisms(tmp_path_factory, n):
    """(path, the whole mesh's geometry): prisms in n layers of 2 n^2 cells, written for every rank."""
    path, _ = shared_file(tmp_path_factory.mktemp("prisms"), lambda: prism_layers_mesh(n=n), "prisms.msh")
    return path, mesh_geometry(meshio.read(path), periodic=PERIODIC)


@pytest.fixture(scope="module")
def prisms(tmp_path_factory):
    return written_prisms(tmp_path_factory, 8)


@pytest.fixture(scope="module")
def three_layers(tmp_path_factory):
    """Two wavenumbers: on three ranks one has none of its own."""
    return written_prisms(tmp_path_factory, 3)


def test_the_columns_partition_gives_each_rank_whole_columns(prisms):
    path, whole = prisms
    comm = PETSc.COMM_WORLD.tompi4py()
    g = distribute(path, comm, "columns", PERIODIC).geometry
    order = layer_order(g.centroids)  # an ExtrusionError if a rank held part of a column
    assert order.shape[0] == 8 and comm.allreduce(order.shape[1]) == 128
    assert comm.allreduce(g.num_cells) == whole.num_cells
    owner = column_partition(whole.face_cells, whole.centroids, 3)
    columns = layer_order(whole.centroids)
    counts = numpy.bincount(owner, minlength=3)
    assert (owner[columns] == owner[columns[0]]).all() and (counts > 0).all() and (counts % 8 == 0).all()
    squashed = whole.centroids.copy()
    squashed[squashed[:, 2] > 1.8, 2] -= 0.05  # the last layer's centres lower
    with pytest.raises(MeshError, match="the columns partition needs a mesh extruded along z in equal layers: the "
                                        "layers along z are not equally spaced"):
        column_partition(whole.face_cells, squashed, 3)


@pytest.mark.parametrize("mesh", ["prisms", "three_layers"])
@pytest.mark.parametrize("sections", SECTIONS)
@pytest.mark.parametrize("held", [False, True], ids=["walls only (singular)", "a held value in every layer"])
def test_each_ranks_share_gives_the_direct_solve_of_the_whole_mesh(request, mesh, held, sections):
    path, whole = request.getfixturevalue(mesh)
    comm = PETSc.COMM_WORLD.tompi4py()
    g = distribute(path, comm, "columns", PERIODIC).geometry
    columns = layer_order(whole.centroids)
    held_cells = columns[:, 5]  # one column, numbered as in the file
    A_whole = (-compact_laplacian(whole)).tocsr()
    A = (-compact_laplacian(g)).tocsr()
    if held:
        A_whole = A_whole + scipy.sparse.diags(numpy.isin(numpy.arange(whole.num_cells), held_cells) * 3.0)
        rows = numpy.arange(g.num_cells)
        A = A + scipy.sparse.csr_matrix((numpy.isin(g.cell_numbers, held_cells) * 3.0, (rows, g.cell_start + rows)),
                                        shape=A.shape)
    b_whole = numpy.random.default_rng(1).standard_normal(whole.num_cells)
    if not held:
        b_whole -= b_whole.mean()
    b = b_whole[g.cell_numbers]
    x = numpy.full_like(b, numpy.nan)
    solver = ExtrudedSolver(A.tocsr(), layer_order(g.centroids), sections, rtol=1e-11, comm=comm)
    assert solver.singular is not held and solver.cross_section == columns.shape[1]
    solver.solve(b, x)
    expected = direct_solution(A_whole.tocsr(), b_whole, held)[g.cell_numbers]
    numpy.testing.assert_allclose(x, expected, rtol=0, atol=1e-9 * abs(expected).max())


def test_the_spectrum_is_shared_in_contiguous_ranges():
    assert spectrum_split(17, 3) == [(0, 6), (6, 12), (12, 17)]
    assert spectrum_split(2, 3) == [(0, 1), (1, 2), (2, 2)]  # more ranks than wavenumbers: the last has none


def test_host_spectra_travel_by_mpi_and_an_unknown_transport_is_refused():
    comm = PETSc.COMM_WORLD.tompi4py()
    columns = [4] * comm.Get_size()
    assert SpectrumTranspose(comm, columns, 5, numpy).nccl is None
    with pytest.raises(ValueError, match="the nccl transport of the spectra needs device arrays; host arrays use mpi"):
        SpectrumTranspose(comm, columns, 5, numpy, "nccl")
    with pytest.raises(ValueError, match="unknown transport 'shm' of the spectra: valid values are auto, nccl, mpi"):
        SpectrumTranspose(comm, columns, 5, numpy, "shm")


def test_the_flow_takes_layerfft_on_each_ranks_columns(prisms):
    """The flow of -pressure_pc_type layerfft is gamg's to the solvers'
    tolerance, one cg iteration a step; a partition that cuts columns
    (bisection across the longest side, z) is an OptionError on every
    rank that says how to cut instead."""
    path, _ = prisms
    comm = PETSc.COMM_WORLD
    runs = {}
    for partitioner, pc, sections in (("columns", "layerfft", "direct"), ("columns", "layerfft", "multigrid"),
                                      ("columns", "gamg", None), ("bisection", "layerfft", "direct")):
        g = distribute(path, comm.tompi4py(), partitioner, PERIODIC).geometry
        start = numpy.array([numpy.sin(numpy.pi * g.centroids[:, 2]), 0.3 * numpy.cos(numpy.pi * g.centroids[:, 2]),
                             0.2 * g.centroids[:, 0]])
        options = {"flow_max_steps": 4, "flow_dt": 0.01, "pressure_ksp_rtol": 1e-12, "pressure_ksp_type": "cg",
                   "pressure_pc_type": pc, "pressure_pc_layerfft_rtol": 1e-13}
        if sections:
            options["pressure_pc_layerfft_sections"] = sections
        with option_defaults("", options):
            make = lambda: FlowSolver(g, comm, "aij", 0.05, {name: Wall() for name in g.boundary_names})  # noqa: E731
            if partitioner == "bisection" and comm.getSize() > 1:
                words = ("rank 1's cells are not whole columns .*layers, z from 1.125 to 1.875, are not rank 0's 4, "
                         "z from 0.125 to 0.875" if comm.getSize() == 2 else "rank .'s cells are not whole columns")
                with pytest.raises(OptionError, match=words + ".*; cut the mesh by its cross-section "
                                                              r"\(-flow_mesh_partitioner columns\)"):
                    make()
                continue
            solver = make()
        state = solver.run(solver.initial_state(start, project=True))
        if pc == "layerfft":  # -ksp_view's words: the layers, and on several ranks how the spectra travel
            pc_object = solver.pressure_ksp.getPC()
            shared = (rf" \(rank 0's share of the wavenumbers among {comm.getSize()} ranks, the spectra by MPI\)"
                      if comm.getSize() > 1 else "$")
            assert re.match(r"  8 layers of 128 cells: .*" + shared, pc_object.getPythonContext().describe(pc_object)[0])
        natural = numpy.concatenate(comm.tompi4py().allgather(g.cell_numbers))
        u = numpy.concatenate(comm.tompi4py().allgather(state.u.T), axis=0)
        runs[partitioner, sections or pc] = (solver.pressure_iterations / solver.steps_run, u[numpy.argsort(natural)])
    assert runs["columns", "direct"][0] == runs["columns", "multigrid"][0] == 1.0 and runs["columns", "gamg"][0] > 1
    for key in [("columns", "direct"), ("columns", "multigrid")] + [("bisection", "direct")] * (comm.getSize() == 1):
        numpy.testing.assert_allclose(runs[key][1], runs["columns", "gamg"][1], rtol=0, atol=1e-9)
