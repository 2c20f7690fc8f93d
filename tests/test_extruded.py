"""gpu_mats.extruded and plugin.flow.extrusion: the layers of a mesh
extruded along a periodic axis, and the exact solve of its pressure
Laplacian by a real FFT along the layers and one 2D system per wavenumber
(on the host; its 2D systems by SuperLU, or all at once by CG with one
multigrid hierarchy): against scipy's direct solve, singular (walls only)
or not; and what is refused, naming the layer or spacing that differs.
The CuPy twin is in tests/test_gpu.py."""

import meshio
import numpy
import pytest
import scipy.sparse
import scipy.sparse.linalg

from gpu_mats.extruded import SECTIONS, ExtrudedSolver, ExtrusionError, SectionConvergenceError
from meshes import prism_layers_mesh, sided, unit_mesh
from plugin.flow.extrusion import layer_order
from plugin.flow.mesh import mesh_geometry
from plugin.flow.operators import compact_laplacian


def prism_layers(n=4, lengths=(1.0, 1.0, 2.0), periodic=True):
    """The geometry of prism_layers_mesh, its z sides joined."""
    return mesh_geometry(prism_layers_mesh(n, lengths), periodic=[("zmin", "zmax")] if periodic else ())


def test_the_layers_of_an_extrusion_stand_above_each_other():
    g = prism_layers()
    order = layer_order(g.centroids)
    assert order.shape == (4, 32) and numpy.unique(order).size == g.num_cells
    z = g.centroids[order, 2]
    numpy.testing.assert_allclose(z - z[:, :1], 0.0, atol=1e-14)
    numpy.testing.assert_allclose(g.centroids[order][:, :, :2] - g.centroids[order[0]][None, :, :2], 0.0, atol=1e-14)


def layered_system(held, n=4):
    """(A, order, b) of prism_layers(n)'s pressure Laplacian: walls only (singular, b of zero mean), or with
    an outflow's held pressure along one column, in every layer."""
    g = prism_layers(n)
    A = (-compact_laplacian(g)).tocsr()
    order = layer_order(g.centroids)
    if held:
        A = (A + scipy.sparse.diags(numpy.isin(numpy.arange(g.num_cells), order[:, 5]) * 3.0)).tocsr()
    b = numpy.random.default_rng(1).standard_normal(g.num_cells)
    return A, order, b if held else b - b.mean()


def direct_solution(A, b, held):
    """scipy's solve; of the singular system pinned at cell 0 and made of zero mean."""
    if held:
        return scipy.sparse.linalg.spsolve(A.tocsc(), b)
    pinned = A.tolil()
    pinned[0, :] = 0.0
    pinned[0, 0] = 1.0
    direct = scipy.sparse.linalg.spsolve(pinned.tocsc(), numpy.concatenate(([0.0], b[1:])))
    return direct - direct.mean()


@pytest.mark.parametrize("sections", SECTIONS)
@pytest.mark.parametrize("held", [False, True], ids=["walls only (singular)", "a held value in every layer"])
def test_the_transform_and_2d_solves_give_the_direct_solve(held, sections):
    """n = 16: a cross-section of 512 cells, which the multigrid sections coarsen to a second level."""
    A, order, b = layered_system(held, n=16)
    x = numpy.full_like(b, numpy.nan)
    solver = ExtrudedSolver(A, order, sections, rtol=1e-11)
    assert solver.singular is not held
    solver.solve(b, x)
    if sections == "multigrid":
        assert len(solver.section_solver.multigrid.levels) == 2 and 1 < solver.section_solver.iterations < 30
    assert numpy.linalg.norm(b - A @ x) <= 1e-10 * numpy.linalg.norm(b)
    numpy.testing.assert_allclose(x, direct_solution(A, b, held), rtol=0, atol=1e-9 * abs(x).max())


def test_the_multigrid_sections_say_when_cg_stops_short_and_direct_ones_stay_on_the_host():
    A, order, b = layered_system(True, n=16)
    with pytest.raises(SectionConvergenceError, match="did not reach a relative residual of 1e-10 in 2 iterations"):
        ExtrudedSolver(A, order, "multigrid", max_it=2).solve(b, numpy.empty_like(b))
    with pytest.raises(ValueError, match="sections must be one of"):
        ExtrudedSolver(A, order, "lu")


def test_what_is_no_extrusion_is_refused_with_the_layer_or_spacing():
    holed = sided(unit_mesh("wedge", n=4))
    holed.cells[0] = meshio.CellBlock("wedge", holed.cells[0].data[1:])  # a prism of the first layer gone
    holed.cell_data["gmsh:physical"][0] = holed.cell_data["gmsh:physical"][0][1:]
    with pytest.raises(ExtrusionError, match=r"layer 1 along z \(at 0.375\) has 32 cells where layer 0 has 31"):
        layer_order(mesh_geometry(holed, ungrouped="wall").centroids)
    with pytest.raises(ExtrusionError, match="not equally spaced"):  # Kuhn's tetrahedra: no layers
        layer_order(mesh_geometry(sided(unit_mesh("tetra", n=3))).centroids)
    stretched = sided(unit_mesh("wedge", n=4))
    stretched.points[:, 2] = stretched.points[:, 2] ** 2  # layers 1/16, 3/16, 5/16, 7/16 thick
    with pytest.raises(ExtrusionError, match="not equally spaced: 0.375 between layers 2 and 3, 0.125 between"):
        layer_order(mesh_geometry(stretched).centroids)
    g = prism_layers(periodic=False)
    with pytest.raises(ExtrusionError, match="no coupling between the last layer and the first: the axis is not "
                                          "periodic"):
        ExtrudedSolver((-compact_laplacian(g)).tocsr(), layer_order(g.centroids))
    g = prism_layers()
    A = (-compact_laplacian(g)).tocsr()
    order = layer_order(g.centroids)
    cell = order[2, 0]
    neighbour = next(j for j in A[cell].indices if j != cell and j in order[2])  # in the same layer
    A = A.tolil()
    A[cell, neighbour] *= 1.5  # one layer's cross-section differs
    A[neighbour, cell] *= 1.5
    with pytest.raises(ExtrusionError, match="layer 2's cross-section operator differs from layer 0's"):
        ExtrudedSolver(A.tocsr(), order)


def test_the_flow_on_a_periodic_extrusion_takes_layerfft_in_one_iteration_a_step():
    """-pressure_pc_type layerfft in the flow driver on the host: one cg
    iteration a step, the flow of gamg's to the solvers' tolerance; on a
    mesh that is no extrusion an OptionError names the layer."""
    from petsc4py import PETSc

    from petsc_ext.options import OptionError, option_defaults
    from plugin.flow.boundary import Wall
    from plugin.flow.solver import FlowSolver

    g = prism_layers()
    start = numpy.array([numpy.sin(numpy.pi * g.centroids[:, 2]), 0.3 * numpy.cos(numpy.pi * g.centroids[:, 2]),
                         0.0 * g.centroids[:, 2]])
    runs = {}
    for pc, sections in (("layerfft", "direct"), ("layerfft", "multigrid"), ("gamg", None)):
        options = {"flow_max_steps": 5, "flow_dt": 0.01, "pressure_ksp_rtol": 1e-12, "pressure_ksp_type": "cg",
                   "pressure_pc_type": pc, "pressure_pc_layerfft_rtol": 1e-13}
        if sections:
            options["pressure_pc_layerfft_sections"] = sections
        with option_defaults("", options):
            solver = FlowSolver(g, PETSc.COMM_SELF, "aij", 0.05, {name: Wall() for name in g.boundary_names})
        state = solver.run(solver.initial_state(start, project=True))
        runs[sections or pc] = (solver.pressure_iterations / solver.steps_run, state.u.copy())
    assert runs["direct"][0] == runs["multigrid"][0] == 1.0 and runs["gamg"][0] > 1.0
    for sections in ("direct", "multigrid"):
        numpy.testing.assert_allclose(runs[sections][1], runs["gamg"][1], rtol=0, atol=1e-9)
    tets = mesh_geometry(sided(unit_mesh("tetra", n=3)), periodic=[("zmin", "zmax")])
    with option_defaults("", {"pressure_pc_type": "layerfft"}), pytest.raises(
            OptionError, match="-pressure_pc_type layerfft: the mesh is not extruded along z in equal layers"):
        FlowSolver(tets, PETSc.COMM_SELF, "aij", 0.05, {name: Wall() for name in tets.boundary_names})
