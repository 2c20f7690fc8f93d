"""The flow operators as PETSc matrices, and the products the time loop runs.

Every operator of plugin.flow.operators becomes a distributed matrix of one
type (gpusell by default: SELL kernels on the GPU, overlapped halo updates).
The time loop multiplies arrays, not Vecs (petsc_ext.array_operators): a
gpusell matrix runs its kernels on them directly, any other type PETSc's
MatMult on vectors wrapped over them, so ``-dm_mat_type aij`` runs the same
loop with PETSc's own products (the CPU reference).

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
"""

import numpy
import scipy.sparse

from gpu_mats.backend import array_module, sparse_module
from petsc_ext import gpusell
from petsc_ext.array_operators import matrix_product
from petsc_ext.arrays import ArrayVecs, matrix_array_module
from petsc_ext.matrices import aij_from_rows
from petsc_ext.matrix_values import value_target

from .operators import host_matrix


class FlowMatrices:
    """The matrices of one FlowOperators on ``comm``, and their array products:
    ``Ms``, ``Gamma``, ``Gs``, ``G``, ``C``, ``K`` (the explicit part of
    diffusion: D, or D/2 with Crank-Nicolson), ``flux_rate`` and ``E``, each
    called as ``product(x, y)`` for y = A x or ``product(x, y, z)`` for A x + z."""

    def __init__(self, ops, comm, mat_type, implicit_diffusion=False, pressure_laplacian="compact",
                 nonorthogonal=False):
        g = ops.geometry
        self.ops, self.comm, self.mat_type = ops, comm, mat_type
        n, faces, dim = g.num_cells, ops.num_faces, g.dim
        if nonorthogonal and ops.tangential is None:
            raise ValueError("the non-orthogonal correction needs operators built with nonorthogonal=True")
        names = (("L", "Ms", "Gamma", "Gs", "G", "D", "flux_rate") + (("slip",) if ops.slip is not None else ())
                 + (("E_C",) if ops.xp is numpy else ())
                 + (("tangential",) if nonorthogonal else ()))
        host = self._host = {name: host_matrix(getattr(ops, name)) for name in names}  # PETSc takes host CSR

        def build(csr, local_columns, name, prefix=None, device=None):
            """The Mat of a host CSR; a gpusell one takes its SELL copy from
            ``device``, the same matrix where the operators were assembled on the GPU."""
            mat = aij_from_rows(csr.indptr, csr.indices, csr.data, local_columns, comm, mat_type, prefix)
            mat.setName(name)
            if device is not None and mat.getType() == gpusell.SEQ_TYPE and gpusell.context(mat).xp is ops.xp:
                gpusell.context(mat).adopt(device.indptr, device.indices, device.data)
            return mat

        on_device = (lambda name: getattr(ops, name)) if ops.xp is not numpy else (lambda name: None)

        if pressure_laplacian == "wide":
            laplacian, face_gradient = self._wide_laplacian(host, g, comm)
        else:
            laplacian, face_gradient = host["L"], host["Gs"]
        device_laplacian = None if pressure_laplacian == "wide" or on_device("L") is None else -ops.L
        self.poisson = build(-laplacian, n, "-L (pressure)", prefix="pressure_", device=device_laplacian)
        self.xp = matrix_array_module(self.poisson)
        self.vecs = ArrayVecs(comm)
        L, D, half = host["L"], host["D"], 0.5 if implicit_diffusion else 1.0
        self.mats = {
            "Ms": build(host["Ms"], faces, "Ms", device=on_device("Ms")),
            "Gamma": build(host["Gamma"], dim * n, "Gamma", device=on_device("Gamma")),
            "Gs": build(face_gradient, n, "Gs", device=None if pressure_laplacian == "wide" else on_device("Gs")),
            "G": build(host["G"], n, "G", device=on_device("G")),
            "K": build(D * half, n, "D/2" if implicit_diffusion else "D",
                       device=None if on_device("D") is None else ops.D * half),
            "flux_rate": build(host["flux_rate"], faces, "flux rate", device=on_device("flux_rate")),
            "C": build(scipy.sparse.csr_matrix((0.0 * L.data, L.indices, L.indptr), shape=L.shape), n, "C(u_s)",
                       device=None if on_device("L") is None else ops.L * 0.0),
        }
        if "slip" in host:
            self.mats["slip"] = build(host["slip"], dim * n, "slip (nu A / delta n n^T)", device=on_device("slip"))
        if nonorthogonal:
            self.mats["nonorthogonal"] = build(self._product(host["tangential"], host["G"], g, comm) * -ops.nu, n,
                                               "-nu T G (non-orthogonal correction)")
        self._values = value_target(self.mats["C"])
        E = self._storage_order(host["E_C"] if ops.xp is numpy else ops.E_C)
        self.mats["E"] = build(host_matrix(E), faces, "E_C (in C's storage order)",
                               device=None if ops.xp is numpy else E)
        for name, mat in self.mats.items():
            setattr(self, name, matrix_product(mat, self.xp, self.vecs))
        self.momentum = self._momentum() if implicit_diffusion else None
        self._outflow = self.xp.asarray(ops.open_faces)
        self._convected = self.xp.empty(faces) if len(ops.open_faces) else None
        self.outflow_pressure = self._outflow_pressure(pressure_laplacian)

    @staticmethod
    def _wide_laplacian(host, g, comm):
        """Ms Gamma G and Gamma G (the rank's rows, scipy CSR with global
        columns), multiplied by PETSc: their rows need other ranks' rows."""

        def aij(csr, local_columns):
            return aij_from_rows(csr.indptr, csr.indices, csr.data, local_columns, comm)

        Ms, Gamma, G = (aij(host["Ms"], host["Gamma"].shape[0]), aij(host["Gamma"], g.dim * g.num_cells),
                        aij(host["G"], g.num_cells))
        face_gradient = Gamma.matMult(G)
        laplacian = Ms.matMult(face_gradient)
        products = []
        for mat in (laplacian, face_gradient):
            indptr, indices, data = mat.getValuesCSR()
            products.append(scipy.sparse.csr_matrix((data, indices, indptr), shape=(mat.getLocalSize()[0],
                                                                                      mat.getSize()[1])))
        for mat in (Ms, Gamma, G, face_gradient, laplacian):
            mat.destroy()
        return products

    def _storage_order(self, E_C):
        """E: E_C (host or device) with each row moved to the slot where C stores that value, in E_C's module."""
        xp = array_module(E_C.data)
        entries = E_C.tocoo()
        slots = xp.asarray(self._values.slots)
        E = sparse_module(xp).coo_matrix((entries.data, (slots[entries.row], entries.col)),
                                         shape=(self._values.buffer.size, E_C.shape[1])).tocsr()
        E.sort_indices()
        return E

    @staticmethod
    def _product(A, B, g, comm):
        """A B of two operators (the rank's rows, scipy CSR with global columns; A's
        columns are B's rows, stacked cell vectors), multiplied by PETSc: the
        rows of B that A needs may be other ranks'."""
        left = aij_from_rows(A.indptr, A.indices, A.data, B.shape[0], comm)
        right = aij_from_rows(B.indptr, B.indices, B.data, g.num_cells, comm)
        product = left.matMult(right)
        indptr, indices, data = product.getValuesCSR()
        result = scipy.sparse.csr_matrix((data, indices, indptr), shape=(product.getLocalSize()[0], product.getSize()[1]))
        for mat in (left, right, product):
            mat.destroy()
        return result

    def refresh_convection(self, u_s):
        """C's values from the face velocities: Val(C) = E_C u_s (eq. 2.10), with
        max(u_s, 0) on outflow faces (backflow brings no momentum in)."""
        if self._convected is not None:
            self._convected[...] = u_s
            self._convected[self._outflow] = self.xp.maximum(u_s[self._outflow], 0.0)
            u_s = self._convected
        self.E(u_s, self._values.buffer)
        self._values.commit()

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
        """I + (dt / 2) Omega^-1 D (options prefix momentum_), assembled once:
        its values are linear in dt, so a new dt only rewrites them."""
        ops = self.ops
        rate = (scipy.sparse.diags(0.5 / ops.volumes) @ self._host["D"]).tocsr()
        rate.sort_indices()
        rows = numpy.repeat(numpy.arange(rate.shape[0]), numpy.diff(rate.indptr))
        identity = (rate.indices == rows + ops.geometry.cell_start).astype(float)  # D has every diagonal entry
        mat = aij_from_rows(rate.indptr, rate.indices, identity + rate.data, ops.geometry.num_cells, self.comm,
                            self.mat_type, prefix="momentum_")
        mat.setName("I + dt/2 Omega^-1 D (momentum)")
        target = value_target(mat)
        self._momentum_values = [target]
        for values in (identity, rate.data):
            stored = numpy.zeros(target.buffer.size)
            stored[target.slots] = values
            self._momentum_values.append(self.xp.asarray(stored))
        return mat

    def set_momentum_dt(self, dt):
        target, identity, rate = self._momentum_values
        self.xp.add(identity, dt * rate, out=target.buffer)
        target.commit()

    def destroy(self):
        self.vecs.destroy()
        for mat in (self.poisson, self.momentum, *self.mats.values()):
            if mat is not None:
                mat.destroy()
