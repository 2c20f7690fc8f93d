"""The flow operators as PETSc matrices, and the products the time loop runs.

Every operator of plugin.flow.operators becomes a distributed matrix of one
type (gpusell by default: SELL kernels on the GPU, overlapped halo updates).
The time loop multiplies arrays, not Vecs (petsc_ext.array_operators): a
gpusell matrix runs its kernels on them directly, any other type PETSc's
MatMult on vectors wrapped over them, so ``-dm_mat_type aij`` runs the same
loop with PETSc's own products (the CPU reference). Operators assembled on
the GPU reach a device Mat type without a host CSR: aijcusparse by COO from
device arrays; with gpusell on one rank the loop's operators are SELL copies
only (gpusell.SellOperator), their Mats made when asked for (_LoopMatrices).

The pressure Laplacian is the compact L of Oyarzún 2015 (eq. 1.7), or with
``wide`` the literal product M Omega^-1 M^T = -Ms Gamma G of the collocated
scheme, with Gs replaced by Gamma G: the projection is then exact on the cell
velocities and conserves their kinetic energy (the compact L dissipates
O(dt h^2) of it, Trias et al. JCP 258, 2014), at the price of a wider stencil
and pressure modes that G does not see (checkerboards).

The convective matrix C shares L's pattern; its values change every step.
E, the constant matrix E_C with each row moved to where C stores that value
(Oyarzún 2015, eq. 2.14: the position in the SELL value array), refreshes them
with one SpMV written straight into C's storage (petsc_ext.matrix_values).

On a DMDA box of equal cells on one rank with gpusell, whose sides are
periodic or walls, the loop's face operators (Ms, Gamma, Gs, G, K,
flux_rate, C) are the box's stencils instead (gpu_mats.box_faces: no
matrix read, no E), checked once against the assembled operators
(``-flow_box_stencils``).
"""

from collections.abc import Mapping

import numpy
import scipy.sparse
from petsc4py import PETSc

from gpu_mats.backend import array_module, sparse_module
from gpu_mats.box_faces import BoxFaceOperators, BoxGrid
from gpu_mats.kernels import family
from petsc_ext import gpusell
from petsc_ext.array_operators import ArrayOperator, matrix_product
from petsc_ext.arrays import ArrayVecs, matrix_array_module
from petsc_ext.matrices import aij_from_device_csr, aij_from_rows
from petsc_ext.matrix_values import value_target

from .boundary import Wall
from .operators import host_matrix

# Mat types that take their values from device arrays (MatSetValuesCOO), without a host copy.
DEVICE_COO_TYPES = ("aijcusparse", "seqaijcusparse", "mpiaijcusparse")
# The loop's operators that a box's stencils replace, and the BoxFaceOperators method of each.
STENCILS = {"Ms": "divergence", "Gamma": "gamma", "Gs": "face_gradient", "G": "cell_gradient", "K": "diffusion",
            "flux_rate": "flux_rate", "C": "convection"}
STENCIL_TOLERANCE = 1e-12  # a stencil's product against the assembled operator's, relative to its largest value


class FlowMatrices:
    """The matrices of one FlowOperators on ``comm``, and their array products:
    ``Ms``, ``Gamma``, ``Gs``, ``G``, ``C``, ``K`` (the explicit part of
    diffusion: D, or D/2 with Crank-Nicolson), ``flux_rate`` and ``E``, and
    where the boundary or the scheme asks for them ``normal_term``,
    ``velocity_gradient`` (every velocity component's at once), ``held_difference`` (the same
    layout), ``face_pairs``
    (with the damping face memory: each flux face's two cells' values summed), ``E_D``
    (the eddy viscosities' part of K's values, refresh_diffusion) and
    ``eddy_rate`` (their part of each D_ii / Omega_i),
    ``diffusion_correction`` (times -nu), ``pressure_correction``,
    ``skewness_correction`` and ``convection_correction`` (else None), each called as ``product(x, y)`` for
    y = A x or ``product(x, y, z)`` for A x + z. ``box``: a DMDA box's
    (shape, periodic), whose stencils serve where they can with
    ``box_stencils`` (``stencils``: the BoxFaceOperators, else None)."""

    def __init__(self, ops, comm, mat_type, implicit_diffusion=False, pressure_laplacian="compact", box=None,
                 box_stencils=True):
        g = ops.geometry
        self.ops, self.comm, self.mat_type = ops, comm, mat_type
        n, faces, dim = g.num_cells, ops.num_faces, g.dim
        if pressure_laplacian == "wide":
            laplacian, face_gradient = self._wide_laplacian(ops, comm)
        else:
            laplacian, face_gradient = ops.L, ops.Gs
        self.poisson = self._mat(-laplacian, n, "-L (pressure)", prefix="pressure_")
        self.xp = matrix_array_module(self.poisson)
        self.vecs = ArrayVecs(comm)
        # The operators the time loop only multiplies: {name: (operator, local columns, matrix name)}.
        loop = {
            "Ms": (ops.Ms, faces, "Ms"),
            "Gamma": (ops.Gamma, dim * n, "Gamma"),
            "Gs": (face_gradient, n, "Gs"),
            "G": (ops.G, n, "G"),
            "K": (ops.D * 0.5 if implicit_diffusion else ops.D, n, "D/2" if implicit_diffusion else "D"),
            "flux_rate": (ops.flux_rate, faces, "flux rate"),
            "C": (ops.L * 0.0, n, "C(u_s)"),  # L's pattern, explicit zeros kept
        }
        if ops.normal_term is not None:
            loop["normal_term"] = (ops.normal_term, dim * n, "normal term (nu A / delta n n^T: slip faces, walls)")
        if ops.velocity_gradient is not None:
            counts = comm.tompi4py().allgather(n)
            loop["velocity_gradient"] = (component_blocks(host_matrix(ops.velocity_gradient), dim, counts), dim * n,
                                         "grad u (every component)")
        if ops.held_difference is not None:
            loop["held_difference"] = (component_blocks(host_matrix(ops.held_difference), dim, counts), dim * n,
                                       "grad u held - free (u^p's held velocities)")
        if ops.diffusion_correction is not None:
            loop["diffusion_correction"] = (ops.diffusion_correction * -ops.nu, dim * dim * n,
                                            "-nu T grad u (diffusion)")
        if ops.pressure_correction is not None:
            loop["pressure_correction"] = (ops.pressure_correction, dim * n, "T grad p (pressure face gradient)")
        if ops.skewness_correction is not None:
            loop["skewness_correction"] = (ops.skewness_correction, dim * dim * n, "K grad u (face interpolation)")
        if ops.convection_correction is not None:
            loop["convection_correction"] = (ops.convection_correction, dim * dim * n,
                                             "Kc grad u (convected face velocities)")
        if ops.face_pairs is not None:
            loop["face_pairs"] = (ops.face_pairs, n, "x_i + x_j (each face's two cells)")
        self.stencils = (self._box_stencils(box, 0.5 if implicit_diffusion else 1.0)
                         if box_stencils and pressure_laplacian == "compact" else None)
        if self.stencils is not None:
            loop = {name: spec for name, spec in loop.items() if name not in STENCILS}
        self.mats = _LoopMatrices(self, loop, self._sell_operators_fit())
        if self.stencils is None:
            self._values = value_target(self.mats.operator("C"))
            self.mats.add("E", (self._storage_order(ops.E_C, self._values), faces, "E_C (in C's storage order)"))
        self._diffusion = self._molecular = None
        if ops.eddy_diffusion is not None:  # explicit in time, with Crank-Nicolson too: the momentum matrix stays
            self._diffusion = target = value_target(self.mats.operator("K"))
            molecular = numpy.zeros(target.buffer.size)  # K's values from nu alone, in K's storage
            molecular[target.slots] = host_matrix(loop["K"][0]).data
            self._molecular = self.xp.asarray(molecular)
            self.mats.add("E_D", (self._storage_order(ops.eddy_diffusion, self._diffusion), n,
                                  "E_D (in D's storage order)"))
            self.mats.add("eddy_rate", (ops.eddy_rate, n, "the eddy viscosities' D_ii / Omega_i"))
        self.Ms, self.Gamma, self.Gs, self.G = map(self._product, ("Ms", "Gamma", "Gs", "G"))
        self.K, self.flux_rate, self.C, self.E, self.E_D, self.eddy_rate = map(
            self._product, ("K", "flux_rate", "C", "E", "E_D", "eddy_rate"))
        self.normal_term, self.velocity_gradient, self.held_difference, self.face_pairs = map(
            self._product, ("normal_term", "velocity_gradient", "held_difference", "face_pairs"))
        self.diffusion_correction, self.pressure_correction, self.skewness_correction, self.convection_correction = map(
            self._product, ("diffusion_correction", "pressure_correction", "skewness_correction",
                            "convection_correction"))
        if self.stencils is not None:
            for name, method in STENCILS.items():
                setattr(self, name, ArrayOperator(getattr(self.stencils, method), graph_key=("box", name), blocks=True))
        self.momentum = self._momentum() if implicit_diffusion else None
        self._outflow = self.xp.asarray(ops.open_faces, dtype=numpy.int64)
        self._convected = self.xp.empty(faces) if len(ops.open_faces) else None
        self.outflow_pressure = self._outflow_pressure(pressure_laplacian)

    def _product(self, name):
        """The array product of the loop operator ``name``; None where there is none."""
        return matrix_product(self.mats.operator(name), self.xp, self.vecs) if name in self.mats else None

    def _mat(self, matrix, local_columns, name, prefix=None, operator=None):
        """The Mat of an operator (scipy, or cupyx where the operators were
        assembled on the GPU: PETSc takes a host copy, and a gpusell matrix on
        that GPU its SELL copy from the device arrays, or that of the
        operator's gpusell.SellOperator ``operator``)."""
        on_device = not isinstance(matrix, scipy.sparse.spmatrix)
        chosen = PETSc.Options(prefix).getString("mat_type", self.mat_type) if prefix else self.mat_type
        if on_device and chosen in DEVICE_COO_TYPES:
            mat = aij_from_device_csr(matrix, local_columns, self.comm, self.mat_type, prefix)
            mat.setName(name)
            return mat
        csr = host_matrix(matrix)
        mat = aij_from_rows(csr.indptr, csr.indices, csr.data, local_columns, self.comm, self.mat_type, prefix)
        mat.setName(name)
        if operator is not None:
            gpusell.context(mat).adopt_operator(operator)
        elif csr is not matrix and mat.getType() == gpusell.SEQ_TYPE and gpusell.context(mat).xp is self.ops.xp:
            gpusell.context(mat).adopt(matrix.indptr, matrix.indices, matrix.data)
        return mat

    def _box_stencils(self, box, diffusion_scale):
        """The BoxFaceOperators of a DMDA box (``box``: (shape, periodic)) of
        equal cells on one rank with gpusell, whose sides are periodic or
        walls, under the symmetric scheme without LES, each checked against
        the assembled operator on a random vector; else None."""
        ops, g = self.ops, self.ops.geometry
        extras = (ops.normal_term, ops.velocity_gradient, ops.held_difference, ops.diffusion_correction,
                  ops.pressure_correction, ops.skewness_correction, ops.convection_correction, ops.eddy_diffusion)
        if (box is None or not self._sell_operators_fit() or any(e is not None for e in extras)
                or len(ops.open_faces) or not all(isinstance(c, Wall) for c in ops.conditions.values())):
            return None
        shape, periodic = box
        axis = numpy.argmax(abs(g.face_normals), axis=1)
        per_axis = [(g.face_areas[axis == d], g.face_distances[axis == d]) for d in range(g.dim)]
        walls = numpy.argmax(abs(g.boundary_normals), axis=1) if len(g.boundary_normals) else axis[:0]

        def equal(values, value):
            return abs(values - value).max(initial=0.0) <= STENCIL_TOLERANCE * abs(value)

        if not all(len(areas) for areas, _ in per_axis):
            return None  # an axis of one cell between walls
        spacings = [float(distances[0]) for _, distances in per_axis]
        areas = [float(areas[0]) for areas, _ in per_axis]
        if not (equal(g.volumes, g.volumes[0]) and all(equal(a, a[0]) and equal(h, h[0]) for a, h in per_axis)
                and all(equal(g.boundary_distances[walls == d], spacings[d] / 2) for d in range(g.dim))):
            return None  # a graded box
        grid = BoxGrid(tuple(int(n) for n in shape) + (1,) * (3 - len(shape)),
                       tuple(bool(p) for p in periodic) + (False,) * (3 - len(periodic)), g.dim)
        stencils = BoxFaceOperators(grid, areas, spacings, float(g.volumes[0]), ops.nu, diffusion_scale, self.xp)
        self._check_stencils(stencils, diffusion_scale)
        return stencils

    def _check_stencils(self, stencils, diffusion_scale):
        """Each stencil's product against the assembled operator's on a random vector, on the device where
        they are: a difference is a RuntimeError naming the operator (the box's numbering or values not the
        stencils')."""
        ops, xp, n, dim = self.ops, self.xp, self.ops.geometry.num_cells, self.ops.dim
        rng = numpy.random.default_rng(7)
        cells, faces, velocity = (xp.asarray(rng.standard_normal(size)) for size in (n, ops.num_faces, dim * n))
        stencils.set_face_velocities(faces)
        C = ops.convection(faces)

        def blocks(matrix, scale=1.0):  # the operator on each velocity component
            return xp.concatenate([scale * (matrix @ velocity[e * n:(e + 1) * n]) for e in range(dim)])

        checks = {"Ms": (faces, ops.Ms @ faces), "Gamma": (velocity, ops.Gamma @ velocity),
                  "Gs": (cells, ops.Gs @ cells), "G": (cells, ops.G @ cells),
                  "flux_rate": (abs(faces), ops.flux_rate @ abs(faces)),
                  "K": (velocity, blocks(ops.D, diffusion_scale)),
                  "C": (velocity, blocks(C))}
        for name, (x, expected) in checks.items():
            y = xp.empty(expected.shape)
            getattr(stencils, STENCILS[name])(x, y)
            difference, largest = (float(abs(v).max()) if v.size else 0.0 for v in (y - expected, expected))
            if difference > STENCIL_TOLERANCE * max(largest, 1.0):
                raise RuntimeError(f"the box's stencil for {name} differs from the assembled operator by "
                                   f"{difference:.3g}: the box's numbering or values are not the stencils'")

    def _sell_operators_fit(self):
        """Whether the loop's operators can be gpusell.SellOperators: gpusell on one rank, computing where
        the operators were assembled (then no PETSc matrix, no host copy, unless one is asked for)."""
        return self.poisson.getType() == gpusell.SEQ_TYPE and gpusell.context(self.poisson).xp is self.ops.xp

    @classmethod
    def _wide_laplacian(cls, ops, comm):
        """Ms Gamma G and Gamma G (the rank's rows, scipy CSR with global columns)."""
        face_gradient = cls._multiplied(ops.Gamma, ops.G, ops.geometry.num_cells, comm)
        return cls._multiplied(ops.Ms, face_gradient, ops.geometry.num_cells, comm), face_gradient

    @staticmethod
    def _storage_order(E_C, target):
        """E_C (host or device, rows in the CSR order of L's pattern) with each row moved to the slot where the
        matrix of ``target`` (a ValueTarget: C's, or D's) stores that value, in E_C's module."""
        xp = array_module(E_C.data)
        entries = E_C.tocoo()
        slots = xp.asarray(target.slots)
        E = sparse_module(xp).coo_matrix((entries.data, (slots[entries.row], entries.col)),
                                         shape=(target.buffer.size, E_C.shape[1])).tocsr()
        E.sort_indices()
        return E

    @staticmethod
    def _multiplied(A, B, columns, comm):
        """A B of two operators (the rank's rows, global columns; A's columns are
        B's rows; ``columns``: the rank's share of B's), multiplied by PETSc: the
        rows of B that A needs may be other ranks'. scipy CSR."""
        A, B = host_matrix(A), host_matrix(B)
        left = aij_from_rows(A.indptr, A.indices, A.data, B.shape[0], comm)
        right = aij_from_rows(B.indptr, B.indices, B.data, columns, comm)
        product = left.matMult(right)
        indptr, indices, data = product.getValuesCSR()
        result = scipy.sparse.csr_matrix((data, indices, indptr), shape=(product.getLocalSize()[0], product.getSize()[1]))
        for mat in (left, right, product):
            mat.destroy()
        return result

    def refresh_convection(self, u_s):
        """C's values from the face velocities: Val(C) = E_C u_s (eq. 2.10), with
        max(u_s, 0) on outflow faces (backflow brings no momentum in)."""
        if self.stencils is not None:
            self.stencils.set_face_velocities(u_s)
            return
        if self._convected is not None:
            family("flow", self.xp).upwind_outflow(self._convected, u_s, self._outflow)
            u_s = self._convected
        self.E(u_s, self._values.buffer)
        self._values.commit()

    def explicit_rate(self, u, v, out):
        """out = C(u_s) u + K v (u_s: the last refresh_convection's): a box's stencils in one pass."""
        if self.stencils is not None:
            self.stencils.transport(u, v, out)
            return
        self.C(u, out)
        self.K(v, out, out)

    def largest_speed_rate(self, u_s, out, cells, faces, partials):
        """out[0] = max over cells of the flux rate's product of |u_s| (NaN where any is): the CFL number's
        rate, not read; ``cells``, ``faces`` and ``partials`` (blas reduction slots of the cells): scratch.
        A box's stencils do it in one pass."""
        if self.stencils is not None:
            self.stencils.largest_flux_rate(u_s, out)
            return
        self.xp.abs(u_s, out=faces)
        self.flux_rate(faces, cells)
        family("blas", self.xp).max_abs(out, cells, None, partials)

    def refresh_diffusion(self, nu_t):
        """K's values from nu and the cells' eddy viscosities: K(nu) + E_D nu_t
        (Oyarzún 2015, eq. 2.11), written into K's storage as C's are. With
        Crank-Nicolson K(nu) is D(nu) / 2 and the eddy viscosity's part stays
        whole: explicit, so that the momentum matrix and its preconditioner
        stay as they are."""
        self.E_D(nu_t, self._diffusion.buffer, self._molecular)
        self._diffusion.commit()

    def _outflow_pressure(self, pressure_laplacian):
        """What outflow pressures p_b add for q = 1 x p_b, on this backend: {"cells": to
        the pressure equation's right-hand side, "faces": to u_s, "gradient": to u};
        None where they are all 0. With the wide Laplacian the face gradient is
        Gamma G, so its part is Gamma of the cell gradient's."""
        given = self.ops.outflow_pressure
        if given is None:
            return None
        xp = self.xp
        gradient = xp.asarray(given["gradient"])
        faces = xp.asarray(given["faces"])
        if pressure_laplacian == "wide":
            self.Gamma(gradient.ravel(), faces)
        cells = xp.empty(self.ops.geometry.num_cells)
        self.Ms(faces, cells)
        return {"cells": cells, "faces": faces, "gradient": gradient}

    def _momentum(self):
        """Omega + (dt / 2) D for every velocity component at once (options
        prefix momentum_): one block per component on the diagonal, over the
        velocity's own layout (each rank's (dim, n) array raveled), so that
        one solve takes the whole velocity; its right-hand side is Omega
        times the velocity's. Symmetric positive definite (D is, and Omega
        diagonal), so CG takes it, where I + (dt / 2) Omega^-1 D, the same
        equations, is not symmetric. Assembled once: its values are linear
        in dt, so a new dt only rewrites them."""
        ops = self.ops
        dim, n = ops.dim, ops.geometry.num_cells
        rate = (0.5 * host_matrix(ops.D)).tocsr()
        rate.sort_indices()
        rows = numpy.repeat(numpy.arange(rate.shape[0]), numpy.diff(rate.indptr))
        diagonal = rate.indices == rows + ops.geometry.cell_start  # D has every diagonal entry
        volume = numpy.where(diagonal, ops.volumes[rows], 0.0)
        rate = component_blocks(rate, dim, self.comm.tompi4py().allgather(n))
        volume = numpy.tile(volume, dim)
        matrix = scipy.sparse.csr_matrix((volume + rate.data, rate.indices, rate.indptr), shape=rate.shape)
        if ops.xp is not numpy:  # as the other operators: a device matrix type takes it from the GPU
            matrix = sparse_module(ops.xp).csr_matrix(matrix)
        mat = self._mat(matrix, dim * n, "Omega + dt/2 D (momentum, every component)", prefix="momentum_")
        target = value_target(mat)
        self._momentum_values = [target]
        for values in (volume, rate.data):
            stored = numpy.zeros(target.buffer.size)
            stored[target.slots] = values
            self._momentum_values.append(self.xp.asarray(stored))
        return mat

    def set_momentum_dt(self, dt):
        target, volume, rate = self._momentum_values
        self.xp.add(volume, dt * rate, out=target.buffer)
        target.commit()

    def destroy(self):
        self.vecs.destroy()
        for mat in (self.poisson, self.momentum, *self.mats.made()):
            if mat is not None:
                mat.destroy()


def component_blocks(matrix, dim, counts):
    """diag(matrix, ..., matrix), ``dim`` blocks, for vectors laid out as the
    velocity is: each rank's cells component by component. ``matrix``: this
    rank's rows (scipy CSR, global cell columns); ``counts``: every rank's
    cells. Component d of cell c of rank q is column dim s_q + d n_q + (c - s_q)
    (s_q the rank's first cell), which keeps each row's columns in order."""
    starts = numpy.concatenate([[0], numpy.cumsum(counts)])
    counts = numpy.asarray(counts)
    owner = numpy.searchsorted(starts, matrix.indices, side="right") - 1
    first = dim * starts[owner] + (matrix.indices - starts[owner])
    blocks = [scipy.sparse.csr_matrix((matrix.data, first + d * counts[owner], matrix.indptr),
                                      shape=(matrix.shape[0], dim * starts[-1])) for d in range(dim)]
    return scipy.sparse.vstack(blocks, format="csr")


class _LoopMatrices(Mapping):
    """The PETSc matrices of the loop's operators, by name (Ms, Gamma, Gs, G,
    K, flux_rate, C, E, ...). With ``sell_operators`` each operator is a
    gpusell.SellOperator on the GPU and its Mat is made only when asked for
    (a host AIJ copy sharing the operator's SELL copy: at 256^3 the loop's
    matrices hold some 13 GB that nothing on the host reads); otherwise every
    Mat is made at once and is the operator."""

    def __init__(self, matrices, loop, sell_operators):
        self._matrices, self._specs, self._made, self._operators = matrices, {}, {}, {}
        self._settings = gpusell.read_settings(matrices.comm) if sell_operators else None
        for name, spec in loop.items():
            self.add(name, spec)

    def add(self, name, spec):
        self._specs[name] = spec
        if self._settings is None:
            self._made[name] = self._operators[name] = self._matrices._mat(*spec)
        else:
            matrix, columns, _ = spec
            self._operators[name] = gpusell.SellOperator(matrix.indptr, matrix.indices, matrix.data,
                                                         (matrix.shape[0], columns), self._settings,
                                                         self._matrices.xp)

    def operator(self, name):
        """What the loop multiplies: the Mat, or the SellOperator."""
        return self._operators[name]

    def __getitem__(self, name):
        if name not in self._made:
            self._made[name] = self._matrices._mat(*self._specs[name], operator=self._operators[name])
        return self._made[name]

    def __contains__(self, name):  # without making the Mat, as Mapping's would
        return name in self._specs

    def __iter__(self):
        return iter(self._specs)

    def __len__(self):
        return len(self._specs)

    def made(self):
        """The Mats made so far."""
        return list(self._made.values())
