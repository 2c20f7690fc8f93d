"""gpu_mats.box_faces in the flow driver: on a DMDA box of equal cells on
one rank with gpusell, the loop's face operators are the box's stencils
(the NumPy twins here; the CUDA kernels against them in tests/test_gpu.py).
Each stencil against the assembled operator, the flow with and without them,
and where the matrices stay."""

import numpy
import pytest
from petsc4py import PETSc

from gpu_mats.backend import to_host
from petsc_ext.options import option_defaults
from plugin.flow.boundary import Outflow, Slip, Wall
from plugin.flow.matrices import STENCILS, component_blocks
from plugin.flow.operators import host_matrix
from plugin.flow.solver import FlowSolver

BOXES = {  # name -> (cells, DMDA boundary types, a moving lid on ymax)
    "periodic 3D": ((6, 5, 4), ("periodic",) * 3, False),
    "walls along y": ((6, 5, 4), ("periodic", "none", "periodic"), True),
    "walls 3D": ((5, 4, 3), ("none",) * 3, True),
    "walls 2D": ((6, 5), ("none", "none"), True),
    "periodic 2D": ((6, 5), ("periodic", "periodic"), False),
}


def box_solver(name, options=(), conditions=None):
    cells, periodic, lid = BOXES[name]
    dim = len(cells)
    da = PETSc.DMDA().create(list(cells), boundary_type=periodic, stencil_width=1, comm=PETSc.COMM_SELF)
    da.setMatType("gpusell")
    if conditions is None:
        conditions = {"ymax": Wall(velocity=[1.0] + [0.0] * (dim - 1))} if lid else {}
    with option_defaults("", {"gpu_backend": "numpy", "flow_max_steps": 5, "flow_dt": 0.01, **dict(options)}):
        return FlowSolver.from_dmda(da, (1.0, 1.2, 0.8)[:dim], 0.05, conditions)


@pytest.mark.parametrize("name", BOXES)
def test_each_stencil_is_the_assembled_operator(name):
    solver = box_solver(name, {"flow_diffusion": "implicit"} if "2D" in name else {})
    m, ops, n, dim = solver.matrices, solver.operators, solver.geometry.num_cells, solver.geometry.dim
    assert m.stencils is not None
    rng = numpy.random.default_rng(3)
    cells, faces, velocity = (rng.standard_normal(size) for size in (n, ops.num_faces, dim * n))
    m.refresh_convection(faces)
    half = 0.5 if "2D" in name else 1.0  # Crank-Nicolson's explicit half of D
    expected = {"Ms": (faces, ops.Ms @ faces), "Gamma": (velocity, ops.Gamma @ velocity), "Gs": (cells, ops.Gs @ cells),
                "G": (cells, ops.G @ cells), "flux_rate": (abs(faces), ops.flux_rate @ abs(faces)),
                "K": (velocity, half * (component_blocks(host_matrix(ops.D), dim, [n]) @ velocity)),
                "C": (velocity, component_blocks(host_matrix(ops.convection(faces)), dim, [n]) @ velocity)}
    assert set(expected) == set(STENCILS)
    for operator, (x, Ax) in expected.items():
        y = numpy.full(Ax.size, numpy.nan)
        getattr(m, operator)(x, y)
        numpy.testing.assert_allclose(y, Ax, rtol=0, atol=1e-13 * abs(Ax).max(), err_msg=operator)
    z = rng.standard_normal(n)
    y = numpy.empty(n)
    m.Ms(faces, y, z)
    numpy.testing.assert_allclose(y, ops.Ms @ faces + z, rtol=0, atol=1e-13 * abs(y).max())
    other = rng.standard_normal(dim * n)
    y = numpy.empty(dim * n)
    m.explicit_rate(velocity, other, y)
    C, K = expected["C"][1], half * (component_blocks(host_matrix(ops.D), dim, [n]) @ other)
    numpy.testing.assert_allclose(y, C + K, rtol=0, atol=1e-13 * abs(C + K).max())
    largest = numpy.empty(1)
    m.largest_speed_rate(faces, largest, numpy.empty(n), numpy.empty(ops.num_faces), numpy.empty(1))
    assert largest[0] == pytest.approx((ops.flux_rate @ abs(faces)).max(), rel=1e-13)
    faces[7] = numpy.nan  # a blow-up is seen
    m.largest_speed_rate(faces, largest, numpy.empty(n), numpy.empty(ops.num_faces), numpy.empty(1))
    assert numpy.isnan(largest[0])


def flows_agree(name, options=()):
    """The box's steps with its stencils and with its matrices: the same velocities, face velocities and
    pressures (a closed box's up to its constant) to 1e-12."""
    runs = []
    for stencils in (True, False):
        solver = box_solver(name, {**dict(options), "flow_box_stencils": stencils,
                                   "flow_diffusion": "implicit" if "2D" in name else "explicit"})
        assert (solver.matrices.stencils is not None) is stencils
        x = solver.geometry.centroids
        start = [numpy.sin(2 * numpy.pi * x[:, 1]), numpy.cos(2 * numpy.pi * x[:, 0]), 0.3 * numpy.sin(x[:, 0])]
        state = solver.run(solver.initial_state(numpy.array(start[:solver.geometry.dim]), project=True))
        runs.append([to_host(solver.xp, a) for a in (state.u, state.p - state.p.mean(), state.u_s)])
    for with_stencils, with_matrices in zip(*runs):
        numpy.testing.assert_allclose(with_stencils, with_matrices, rtol=0, atol=1e-12 * abs(with_matrices).max())


@pytest.mark.parametrize("name", BOXES)
def test_the_flow_with_stencils_is_the_flow_with_matrices(name):
    flows_agree(name)


def test_where_the_stencils_do_not_apply_the_matrices_serve():
    assert box_solver("walls along y", {"flow_box_grading": 1.5}).matrices.stencils is None  # unequal cells
    assert box_solver("periodic 3D", {"flow_les": "wale"}).matrices.stencils is None  # D's values change
    assert box_solver("walls along y", conditions={"ymin": Slip()}).matrices.stencils is None
    assert box_solver("walls 2D", conditions={"xmax": Outflow()}).matrices.stencils is None
    assert box_solver("periodic 3D", {"flow_pressure_laplacian": "wide"}).matrices.stencils is None
    assert box_solver("periodic 3D", {"flow_box_stencils": False}).matrices.stencils is None
