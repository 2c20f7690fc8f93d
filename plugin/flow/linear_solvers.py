"""The flow driver's linear solvers: the pressure KSP and, with
Crank-Nicolson diffusion, the momentum KSP, the types each starts from, and
what a type asks of the geometry (a DMDA box's grids, one rank; layers along z).

The pressure takes the fastest preconditioner measured for its matrices
(BENCHMARKS.md), under cg: gamg on host AIJ; on the project's and GPU
matrices boxfft on a 3D box it inverts, else gpuamg (on a box on one rank
cycling the box's own grids) under graphcg, whose blocks of iterations the
GPU replays without the host (petsc_ext.graphcg; boxfft too where its
transforms allocate nothing: no walled axis transformed; else cg). The momentum
solve is gmres with PETSc's default PC on host AIJ, else graphcg + ainv fsai.
Options under the prefixes ``pressure_`` and ``momentum_`` change any of it.
"""

import functools

import numpy
from mpi4py import MPI
from petsc4py import PETSc

from petsc_ext.options import OptionError, option_defaults

from .extrusion import ExtrusionError, layer_order
from .faces import conductance_spread

ISOTROPIC_SPREAD = 10.0  # conductance_spread at most this: cells alike in every direction
ISOTROPIC_SPARSIFY = 0.2  # -pc_gpuamg_sparsify there


def _true_residual_norm(ksp, prefix, types):
    """The unpreconditioned norm for a KSP of one of ``types`` whose norm type the user did not choose."""
    if ksp.getType() in types and not PETSc.Options().hasName(f"{prefix}ksp_norm_type"):
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)


class LinearSolvers:
    """The KSPs of one flow: ``matrices`` (FlowMatrices), ``operators``
    (FlowOperators), ``multigrid`` (a box of equal cells' PressureMultigrid,
    None on a mesh or a graded box), ``comm``; ``pressure_levels`` and
    ``pressure_laplacian`` as the -flow_ options give them; ``box``: a DMDA
    box's (shape, periodic), None on a mesh."""

    def __init__(self, matrices, operators, multigrid, comm, pressure_levels, pressure_laplacian, box=None):
        self.matrices, self.operators, self.multigrid, self.comm = matrices, operators, multigrid, comm
        self.pressure_levels, self.pressure_laplacian, self.box = pressure_levels, pressure_laplacian, box

    @property
    def box_on_one_rank(self):
        """Whether the geometry is a DMDA box held on one rank."""
        return self.box is not None and self.comm.getSize() == 1

    @property
    def grids_on_one_rank(self):
        """Whether it is a box of equal cells (it has grids: the geometric levels) held on one rank."""
        return self.multigrid is not None and self.comm.getSize() == 1

    @property
    def petsc_defaults(self):
        """The solvers start from PETSc's own (cg + gamg for the pressure,
        gmres with PETSc's default PC for momentum) on host AIJ matrices, the
        fastest measured on the CPU; from the project's on gpusell and GPU
        matrices."""
        return self.matrices.poisson.getType() in (PETSc.Mat.Type.SEQAIJ, PETSc.Mat.Type.MPIAIJ)

    def _gpuamg_defaults(self, prefix):
        """gpuamg's defaults in the flow: the hierarchy's values in float32,
        and on one rank under the V-cycle its vectors too (the K-cycle and the
        halo exchanges take float64 only): the same iterations in less time.
        Where the cells are alike in every direction (conductance_spread at
        most ISOTROPIC_SPREAD on every rank) the coarse levels are sparsified
        at ISOTROPIC_SPARSIFY, which costs less a cycle for the same iterations there; on
        stretched cells the Galerkin products, which take far fewer
        iterations there (BENCHMARKS.md, "Sparsified or Galerkin coarse
        levels")."""
        defaults = {"pc_gpuamg_value_type": "float32"}
        if self.comm.getSize() == 1 and PETSc.Options(prefix).getString("pc_gpuamg_cycle", "v") == "v":
            defaults["pc_gpuamg_vector_type"] = "float32"
        if self.isotropic:
            defaults["pc_gpuamg_sparsify"] = ISOTROPIC_SPARSIFY
        return defaults

    @functools.cached_property
    def isotropic(self):
        """Whether every cell's interior faces conduct alike (the coarse levels' sparsification: above)."""
        spread = self.comm.tompi4py().allreduce(conductance_spread(self.operators.geometry), op=MPI.MAX)
        return spread <= ISOTROPIC_SPREAD

    def pressure_ksp(self, prefix="pressure_"):
        """The pressure KSP (options ``prefix``): cg (graphcg under gpuamg) to
        rtol 1e-8 of the true residual, from the last pressure. With
        ``-pressure_pc_type mg`` its levels come from the geometry's grids (plugin.flow.pressure_multigrid
        on a box, with the outflow sides' pressure held on every level): by
        default all of them, Jacobi-preconditioned Chebyshev smoothing, SVD on
        the coarsest grid."""
        ksp = PETSc.KSP().create(comm=self.comm)
        ksp.setOptionsPrefix(prefix)
        ksp.setOperators(self.matrices.poisson)
        pc_type = self._pressure_pc_default()
        ksp.setType("graphcg" if pc_type == "gpuamg" or (pc_type == "boxfft" and self._transforms_replay()) else "cg")
        ksp.getPC().setType(pc_type)
        ksp.setTolerances(rtol=1e-8)
        ksp.setInitialGuessNonzero(True)  # warm start from the last pressure
        with option_defaults(prefix, self._gpuamg_defaults(prefix)):
            ksp.setFromOptions()
        # rtol on ||b - A q|| / ||b||, the discrete divergence left: PETSc's default for a nonzero guess,
        # ||B b|| with B the preconditioner, costs one more cycle per solve
        _true_residual_norm(ksp, prefix, (PETSc.KSP.Type.CG, "graphcg"))
        pc = ksp.getPC()
        if pc.getType() == PETSc.PC.Type.MG:
            if self.multigrid is None:
                raise OptionError(f"-{prefix}pc_type mg needs the grids of a DMDA box (FlowSolver.from_dmda); "
                                  f"on this geometry use an algebraic multigrid such as -{prefix}pc_type gamg")
            with option_defaults(prefix, {"pc_mg_levels": self.multigrid.depth}):
                pc.setFromOptions()  # the level count first: -pc_mg_cycle_type and the like act on the levels
            self.multigrid.attach(pc, self.matrices.poisson.getType(), self.operators.open_tags)
        if pc.getType() == "boxfft":
            self._need_box_on_one_rank(f"-{prefix}pc_type boxfft", "; use gpuamg")
            pc.getPythonContext().set_box(*self.box)
        if pc.getType() == "layerfft":
            pc.getPythonContext().set_layers(self._layers(f"-{prefix}pc_type layerfft"))
        if pc.getType() == "gpuamg" and self._pressure_levels() == "geometric":
            self._need_box_on_one_rank("-flow_pressure_levels geometric")
            if self.multigrid is None:
                raise OptionError("-flow_pressure_levels geometric needs a box of equal cells: a graded box's "
                                  "pressure takes gpuamg's aggregation")
            pc.getPythonContext().set_levels(*self.multigrid.array_levels(self.operators.open_tags))
        return ksp

    def momentum_ksp(self):
        """The momentum KSP (options ``momentum_``) on the Crank-Nicolson matrix
        Omega + dt/2 D, symmetric positive definite, to rtol 1e-10 of the true
        residual: gmres with PETSc's default PC on host AIJ, else graphcg +
        ainv fsai (the factored approximate inverse of an SPD matrix), whose
        blocks the GPU replays as CUDA graphs."""
        ksp = PETSc.KSP().create(comm=self.comm)
        ksp.setOptionsPrefix("momentum_")
        ksp.setOperators(self.matrices.momentum)
        ksp.setType("gmres")
        ksp.setTolerances(rtol=1e-10)
        ksp.setInitialGuessNonzero(True)
        if self.petsc_defaults:
            ksp.setFromOptions()
            return ksp
        ksp.setType("graphcg")
        ksp.getPC().setType("ainv")
        with option_defaults("momentum_", {"pc_ainv_type": "fsai"}):
            ksp.setFromOptions()
        _true_residual_norm(ksp, "momentum_", ("graphcg",))  # as the pressure's
        return ksp

    def _layers(self, what):
        """The rank's cells by layer along z (plugin.flow.extrusion), or an OptionError naming ``what`` and why
        not (on every rank: collective)."""
        if self.box is not None:
            raise OptionError(f"{what} needs a mesh extruded along z (this run: a DMDA box: use boxfft)")
        centroids = self.operators.geometry.centroids
        try:
            order, problem = layer_order(centroids), ""
        except ExtrusionError as exc:
            order, problem = None, str(exc)
        mpi = self.comm.tompi4py()
        every = mpi.allgather((problem, None if order is None else centroids[order[:, 0], 2]))
        problems = [found or _other_layers(levels, every[0][1]) for found, levels in every]
        if any(problems):
            rank = next(r for r, p in enumerate(problems) if p)
            if mpi.size == 1:
                raise OptionError(f"{what}: the mesh is not extruded along z in equal layers: {problems[rank]}")
            raise OptionError(f"{what}: rank {rank}'s cells are not whole columns of a mesh extruded along z in "
                              f"equal layers ({problems[rank]}); cut the mesh by its cross-section "
                              f"(-flow_mesh_partitioner columns)")
        return order

    def _need_box_on_one_rank(self, what, advice=""):
        """An OptionError naming ``what`` where the geometry is not a DMDA box on one rank."""
        if not self.box_on_one_rank:
            raise OptionError(f"{what} needs the grids of a DMDA box on one rank (this run: "
                              f"{'a mesh' if self.multigrid is None else 'several ranks'}){advice}")

    def _pressure_levels(self):
        """-flow_pressure_levels, auto resolved: geometric on a DMDA box on one
        rank (faster per step, at seconds of host set-up), else algebraic."""
        if self.pressure_levels != "auto":
            return self.pressure_levels
        return "geometric" if self.grids_on_one_rank else "algebraic"

    def _pressure_pc_default(self):
        if self.petsc_defaults:
            return "gamg"
        return "boxfft" if self._transformable_box() else "gpuamg"

    def _transforms_replay(self):
        """Whether boxfft's solve allocates nothing, so that graphcg and the step's graph replay it: no walled
        axis transformed, every side periodic but the graded axis's (y, on a graded box)."""
        graded = 1 if self.multigrid is None else None
        return all(wraps or d == graded for d, wraps in enumerate(self.box[1]))

    def _transformable_box(self):
        """Whether boxfft is the default: a 3D DMDA box on one rank, its sides walls or periodic (an outflow
        holds the pressure), the compact Laplacian (a 7-point stencil), its cells equal, or graded along y with
        x and z periodic (the channel: the transforms and sweeps in the step's graph). In 2D gpuamg is faster
        (the transforms' kernel launches outweigh their work on small grids), and on a graded box with walls
        across x or z too, where boxfft's cosine transforms run outside the step's graph (BENCHMARKS.md)."""
        return (self.box_on_one_rank and not self.operators.has_outflow and self.pressure_laplacian == "compact"
                and len(self.box[0]) == 3 and (self.multigrid is not None or self._transforms_replay()))


def _other_layers(levels, first):
    """Why a rank's layers at heights ``levels`` are not rank 0's at ``first`` ("" where they are, or where
    either is unknown)."""
    if levels is None or first is None or (len(levels) == len(first) and numpy.allclose(
            levels, first, rtol=0, atol=1e-8 * (abs(first).max() + 1.0))):
        return ""
    return (f"its {len(levels)} layers, z from {levels[0]:.6g} to {levels[-1]:.6g}, are not rank 0's {len(first)}, "
            f"z from {first[0]:.6g} to {first[-1]:.6g}")
