"""The ``gpusell`` matrix type: PETSc AIJ for assembly, SELL-C-sigma for products.

A gpusell matrix is a PETSc AIJ matrix, of type ``seqaijgpusell`` or
``mpiaijgpusell``: everything PETSc does with AIJ (preallocation,
MatSetValues, DMDA and DMPlex matrices, ILU, MatConvert) keeps working, and
``-mat_type gpusell`` picks the sequential or parallel one like ``aij`` does.
Its MatMult, MatMultAdd, MatMultTranspose(Add) and MatGetDiagonal are replaced
by the SELL kernels of gpu_mats, on the GPU with CUDA vectors or with NumPy on
host vectors. The SELL copy follows the AIJ values lazily: the first product
after they changed refreshes the values in place when the nonzero pattern is
the same, and rebuilds the copy otherwise. On one rank, a matrix told the box
its rows are the cells of (``set_grid``) multiplies a constant-coefficient
7-point operator from the grid instead (gpu_mats.stencil), while its values
are one.

In parallel each rank keeps the MPIAIJ split (Oyarzún 2015, section 1.4):
y = A_d x + A_o x_halo, the halo gathered by gpu_mats.exchange (NCCL between
GPUs on a stream of its own, or MPI through host memory) while the A_d
product is computed.

The SELL side of a matrix lives in a PetscContainer composed on the Mat
object, made on first use, and belongs to the object's insides: PETSc
operations that swap or rebuild them (MatHeaderReplace in an in-place
MatConvert, MatHeaderMerge in an in-place MatTranspose or a MatAXPY with
another pattern) give the handle a new object id, and a SELL copy made for
another id is made again. Values follow the object states of the matrix (and,
in parallel, of its two SeqAIJ blocks, which PETSc's own code sometimes writes
directly). Nothing of it outlives the matrix, and no Python runs when PETSc
destroys a matrix after the interpreter has exited.
"""

import ctypes
import functools
import weakref

import numpy
from petsc4py import PETSc

from gpu_mats import DEFAULT_SIGMA, DEFAULT_SLICE_HEIGHT, VALUE_DTYPES, SellMatrix, check_product, diagonal, forget
from gpu_mats.kernels import family
from gpu_mats.exchange import TRANSPORTS, NcclTransport, halo_plan, transport
from gpu_mats.halo import split_rows
from gpu_mats.sell import INT32_MAX
from gpu_mats.stencil import StencilMatrix

from . import libpetsc as lp
from .arrays import get_array, restore_array
from .callbacks import petsc_callback
from .device import choose_backend
from .options import Option, read_options

TYPE, SEQ_TYPE, MPI_TYPE = "gpusell", "seqaijgpusell", "mpiaijgpusell"
_AIJ_OF = {SEQ_TYPE: "seqaij", MPI_TYPE: "mpiaij"}
MAT_REUSE_MATRIX, MAT_INPLACE_MATRIX = 1, 3  # MatReuse (petscmat.h)
_CONTAINER = "GpuSellMat"  # name under which the SELL side is composed on its Mat

_EVENTS = {name: PETSc.Log.Event(f"GPUSELL{name}") for name in ("Build", "Mult", "MultTr", "Halo", "MultAIJ")}
_found = {}  # Mat handle -> weak reference to the GpuSellMat last found there, checked by object id
_aij_operations = {}  # "seqaij"/"mpiaij" -> {MatOperation: AIJ's own function}, read once per type
OPTIONS = (
    Option("mat_gpusell_slice_height", "slice_height", DEFAULT_SLICE_HEIGHT, "rows per slice C", low=1, high=1024),
    Option("mat_gpusell_sigma", "sigma", DEFAULT_SIGMA, "sort rows by length within windows of sigma rows (1 keeps "
           "the natural order, the fastest measured)", low=1, high=INT32_MAX),
    Option("mat_gpusell_value_type", "value_type", "float64", "precision of the stored values (vectors stay "
           "float64)", choices=tuple(VALUE_DTYPES)),
    Option("mat_gpusell_stencil", "stencil", True, "on one rank, where the application gives the box the rows "
           "are the cells of (set_grid: the flow driver on a DMDA box), multiply a constant-coefficient 7-point "
           "matrix from the grid, reading no matrix"),
    Option("mat_gpusell_halo", "halo_transport", "auto", "in parallel, the halo exchange: nccl between GPUs on a "
           "stream of its own, overlapped with the owned-column product; mpi through host memory; auto: NCCL for "
           "GPU data when CuPy has it (else MPI, with a notice)", choices=TRANSPORTS),
)

_ConvertFn = ctypes.CFUNCTYPE(ctypes.c_int, lp.c_ptr, lp.c_str, ctypes.c_int, lp.c_ptr)
_DuplicateFn = ctypes.CFUNCTYPE(ctypes.c_int, lp.c_ptr, ctypes.c_int, lp.c_ptr)


class NonconformingSizes(ValueError):
    petsc_code = lp.PETSC_ERR_ARG_SIZ


class GpuSellMat:
    """The SELL side of one gpusell matrix: its blocks, options and halo exchange."""

    def __init__(self, mat):
        self.handle, self.object_id = mat.handle, mat.getId()
        self.parallel = mat.getType() == MPI_TYPE
        self.xp = choose_backend()
        self.on_gpu = self.xp is not numpy
        self._kernels = family("sell", self.xp)
        self._array_class = self.xp.ndarray
        for option in OPTIONS:
            setattr(self, option.attr, option.default)
        self._state = self._nonzero_state = None
        self._values_in_place = False  # value_buffer written: the AIJ copy is behind
        self.local = self.offd = None  # SellMatrix blocks: own columns, halo columns
        self._transposes = None
        self._split = self._exchange = self._halo = None
        self.grid = None  # (shape, periodic) of the box whose cells are the rows, where given (set_grid)
        self._stencil_of = self._stencil_matrix = None  # (SELL copy, state) the stencil was found in, and it

    # --- keeping the SELL copy current -------------------------------------

    def states(self):
        """The object states the SELL values derive from: the matrix's, and in
        parallel also those of its diagonal and off-diagonal SeqAIJ blocks."""
        if not self.parallel:
            return lp.object_state(self.handle)
        diag, offd = lp.mpiaij_blocks(self.handle)
        return lp.object_state(self.handle), lp.object_state(diag), lp.object_state(offd)

    def _nonzero_states(self):
        if not self.parallel:
            return lp.nonzero_state(self.handle)
        return (lp.nonzero_state(self.handle),) + tuple(lp.nonzero_state(b) for b in lp.mpiaij_blocks(self.handle))

    def update(self):
        state = self.states()
        if state == self._state:
            return
        _EVENTS["Build"].begin()
        try:
            mat = lp.mat_from_handle(self.handle)
            indptr, indices, data = mat.getValuesCSR()
            nonzero_state = self._nonzero_states()
            if nonzero_state == self._nonzero_state:
                self._refresh(data)
            else:
                self._build(mat, indptr, indices, data)
            self._state, self._nonzero_state = state, nonzero_state
            self._flops = 2.0 * self.nnz
        finally:
            _EVENTS["Build"].end()

    def adopt(self, indptr, indices, data):
        """The SELL copy built from CSR arrays equal to the AIJ matrix's own,
        held where the backend computes (the GPU, where they were assembled),
        instead of reading them back from PETSc and copying them over. One
        rank only; in parallel it is update()."""
        if self.parallel:
            self.update()
            return
        _EVENTS["Build"].begin()
        try:
            self._transposes = None
            self.local = self._sell((indptr, indices, data), lp.mat_from_handle(self.handle).getLocalSize())
            self._state, self._nonzero_state = self.states(), self._nonzero_states()
            self._flops = 2.0 * self.nnz
        finally:
            _EVENTS["Build"].end()

    def adopt_operator(self, operator):
        """Share the SELL copy of a SellOperator of the same matrix, values
        written in place by its solver included (the AIJ copy is then behind,
        as after value_buffer). One rank only."""
        if self.parallel:
            raise ValueError("a SellOperator is a one-rank operator: a parallel gpusell matrix cannot share it")
        for attr, value in operator.settings.items():
            setattr(self, attr, value)
        self._transposes = None
        self.local = operator.sell
        self._state, self._nonzero_state = self.states(), self._nonzero_states()
        self._flops = 2.0 * self.nnz
        self._values_in_place = operator.values_in_place
        operator.adopters.add(self)

    def _sell(self, csr, shape):
        return SellMatrix.from_csr(*csr, shape, slice_height=self.slice_height, sigma=self.sigma,
                                   value_dtype=VALUE_DTYPES[self.value_type], xp=self.xp)

    def _build(self, mat, indptr, indices, data):
        m, n = mat.getLocalSize()
        self._transposes = None
        if not self.parallel:
            self.local = self._sell((indptr, indices, data), (m, n))
            return
        cstart, cend = mat.getOwnershipRangeColumn()
        self._split = split = split_rows(indptr, indices, data, cstart, cend)
        self.local = self._sell(split.diag, (m, n))
        self.offd = self._sell(split.offd, (m, split.halo.size))
        comm = mat.getComm().tompi4py()
        plan = halo_plan(split.halo, mat.getOwnershipRangesColumn(), comm)
        self._exchange = transport(plan, comm, self.xp, self.halo_transport, notify=PETSc.Sys.Print)
        self._halo = self.xp.empty(split.halo.size)

    def _refresh(self, data):
        if self.parallel:
            own, halo = self._split.split_values(data)
            self.local.refresh_values(own)
            self.offd.refresh_values(halo)
        else:
            self.local.refresh_values(data)
        self._transposes = None

    def transposes(self):
        if self._transposes is None:
            self._transposes = tuple(b.transpose() if b is not None else None for b in (self.local, self.offd))
        return self._transposes

    @property
    def nnz(self):
        return self.local.nnz + (self.offd.nnz if self.offd is not None else 0)

    def set_grid(self, shape, periodic):
        """The rows are the cells of a box of ``shape`` cells, numbered x
        fastest, ``periodic`` per axis (a DMDA box on one rank): while the
        values are a constant-coefficient stencil on it (StencilMatrix), the
        products read x and the diagonal only (-mat_gpusell_stencil)."""
        self.grid = (tuple(int(n) for n in shape), tuple(bool(p) for p in periodic))
        self._stencil_of = None

    def stencil_matrix(self):
        """The StencilMatrix the products use, or None: no grid given, the
        option off, several ranks, or values that are not a stencil on the
        grid. Found again after every change of the values (the caller has
        brought the SELL copy up to date)."""
        if self.grid is None or not self.stencil or self.parallel or self.local is None:
            return None
        if self._stencil_of is None or self._stencil_of[0] is not self.local or self._stencil_of[1] != self._state:
            indptr, indices, data = self.local.to_csr()
            self._stencil_matrix = StencilMatrix.from_csr(indptr, indices, data, *self.grid,
                                                          value_dtype=self.local.value_dtype)
            self._stencil_of = (self.local, self._state)
        return self._stencil_matrix

    # --- products -------------------------------------------------------------

    def mult(self, x, y, z=None, transpose=False):
        """y = A x + z (z None: y = A x); the vectors are PETSc handles. Every
        MatMult comes here, so it is kept lean (BENCHMARKS.md, "The cost of
        a call")."""
        if self.states() != self._state:
            self.update()
        rows, cols = self.local.shape[::-1] if transpose else self.local.shape
        taken = []
        try:
            xa = self._array(x, "r", cols, taken)
            if z is None:
                ya, beta, za = self._array(y, "w", rows, taken), 0.0, None
            elif z == y:
                ya, beta, za = self._array(y, "rw", rows, taken), 1.0, None
            else:
                za = self._array(z, "r", rows, taken)
                ya, beta = self._array(y, "w", rows, taken), 1.0
            here = xa.__class__ is ya.__class__ is self._array_class and (
                za is None or za.__class__ is self._array_class)
            if here:
                self._product(xa, ya, beta, za, transpose)
        finally:
            for vec, mode in reversed(taken):
                restore_array(vec, mode)
        if not here:
            self._aij_product(x, y, z, transpose)

    def _array(self, vec, mode, length, taken):
        """The array of ``vec`` (recorded in ``taken`` for its restore)."""
        array = get_array(vec, mode, length)
        taken.append((vec, mode))
        return array

    def _aij_product(self, x, y, z, transpose):
        """The product with a vector in the other memory (PETSc's multigrid
        hands host vectors of its coarse grids to a GPU matrix's restriction):
        AIJ's own product on the AIJ copy, PETSc moving the vector data as for
        any host operation; counted as GPUSELLMultAIJ in -log_view."""
        if self._values_in_place:
            where, wanted = ("on the GPU", "cuda") if self.on_gpu else ("in host memory", "standard")
            raise TypeError(f"the gpusell matrix keeps its values {where} only (written in place), but a vector "
                            f"is in the other memory; use vectors from MatCreateVecs(), or -vec_type {wanted} "
                            f"(-dm_vec_type {wanted} for a DM)")
        op, fntype = _AIJ_PRODUCTS[transpose, z is not None]
        _EVENTS["MultAIJ"].begin()
        try:
            _call(op, fntype, self.handle, *((x, y) if z is None else (x, z, y)))
        finally:
            _EVENTS["MultAIJ"].end()

    def multiply_arrays(self, x, y, z=None):
        """y = A x (+ z) on arrays in the matrix's memory, for solvers that keep
        their vectors as arrays (no PETSc dispatch, no array views to take).
        In serial x, y, z may be (k, n) blocks: one pass over the matrix."""
        self.update()
        check_product(self.local, x, y, y if z is None else z)
        self._product(x, y, 0.0 if z is None else 1.0, z)

    def value_buffer(self):
        """(buffer, slots): one array holding the stored values of the product's
        blocks, and where in it each entry of the rank's rows lies, in the
        order of MatGetValuesCSR. Values written there are the matrix's from
        the next product on (call ``values_changed`` after writing), without a
        round trip through the AIJ copy, which keeps its old values: meant
        for a matrix whose values a solver recomputes on the device each step,
        as the convective operator's by one SpMV (Oyarzún 2015, eq. 2.10)."""
        self.update()
        if self.value_type != "float64":
            raise TypeError("values written in place need a gpusell matrix with float64 values")
        if not self.parallel:
            return self.local.vals, self.local.val_map
        xp, split = self.xp, self._split
        first = self.local.vals.size
        buffer = xp.concatenate((self.local.vals, self.offd.vals))
        self.local.vals, self.offd.vals = buffer[:first], buffer[first:]
        for block in (self.local, self.offd):
            forget(block)
        slots = xp.empty(split.owned.size, dtype=xp.int64)
        owned = xp.asarray(split.owned)
        slots[owned] = self.local.val_map
        slots[~owned] = first + self.offd.val_map
        return buffer, slots

    def values_changed(self):
        """The stored values were written in place (value_buffer): drop what
        derives from them and raise the Mat's state, which KSPs watch to set
        their preconditioners up again, without a rebuild from the AIJ copy."""
        self._transposes = None
        self._values_in_place = True
        lp.mat_from_handle(self.handle).stateIncrease()
        self._state = self.states()

    def graph_key(self):
        """What a CUDA graph of multiply_arrays reads, None when it cannot be
        captured (host arrays, or a halo exchanged through the host)."""
        if not self.on_gpu or (self.parallel and not isinstance(self._exchange, NcclTransport)):
            return None
        return self.local, self.offd, self._exchange

    def _product(self, x, y, beta=0.0, z=None, transpose=False):
        """y = A x + beta z (A^T with transpose) on checked arrays; in parallel
        the halo exchange runs while the product with the owned columns is
        computed."""
        event = _EVENTS["MultTr" if transpose else "Mult"]
        event.begin()
        try:
            stencil = None if transpose or self.grid is None else self.stencil_matrix()
            if stencil is not None:
                stencil.multiply(x, y, 1.0, beta, z)
            elif not self.parallel:
                self._spmv(self.transposes()[0] if transpose else self.local, x, y, beta, z)
            elif transpose:
                local_t, offd_t = self.transposes()
                self._spmv(local_t, x, y, beta, z)
                self._spmv(offd_t, x, self._halo)
                _EVENTS["Halo"].begin()
                self._exchange.reverse(self._halo, y)
                _EVENTS["Halo"].end()
            else:
                _EVENTS["Halo"].begin()
                self._exchange.forward_begin(x, self._halo)
                _EVENTS["Halo"].end()
                self._spmv(self.local, x, y, beta, z)
                _EVENTS["Halo"].begin()
                self._exchange.forward_end()
                _EVENTS["Halo"].end()
                self._spmv(self.offd, self._halo, y, 1.0)
        finally:
            event.end()
        PETSc.Log.logFlops(self._flops)

    def product_parts(self, x, y):
        """The parts of y = A x on arrays as callables, to time the overlap of
        the halo exchange with the owned-column product (benchmarks/scaling.py,
        as Oyarzún 2015 measures it): "whole" (the product as MatMult runs it),
        "halo" (the exchange alone), "inner" (owned columns), "outer" (halo
        columns); and the halo's size in bytes. Parallel matrices only."""
        if not self.parallel:
            raise ValueError("a serial gpusell matrix exchanges no halo")
        self.update()

        def halo():
            self._exchange.forward_begin(x, self._halo)
            self._exchange.forward_end()

        return ({"whole": lambda: self._product(x, y), "halo": halo, "inner": lambda: self._spmv(self.local, x, y),
                 "outer": lambda: self._spmv(self.offd, self._halo, y, 1.0)}, 8 * int(self._halo.size))

    def _spmv(self, block, x, y, beta=0.0, z=None):
        """y = block x + beta z (z None: y) by the SELL family's kernel, no checks."""
        self._kernels.spmv(block, x, y, y if z is None else z, 1.0, beta)

    def get_diagonal(self, d):
        self.update()
        rows = self.local.shape[0]
        if lp.local_size(d) != rows:  # as AIJ's MatGetDiagonal: the kernel would write past a shorter vector
            raise NonconformingSizes(f"Nonconforming matrix and vector: the diagonal of this rank's {rows} rows "
                                     f"into a vector of local size {lp.local_size(d)}")
        array = get_array(d, "w", rows)
        try:
            if array.__class__ is self._array_class:
                diagonal(self.local, array)
        finally:
            restore_array(d, "w")
        if array.__class__ is not self._array_class:
            if self._values_in_place:
                raise TypeError("the diagonal of a gpusell matrix with values written in place goes into a vector "
                                "in the matrix's memory; use vectors from MatCreateVecs()")
            _call(lp.MATOP_GET_DIAGONAL, lp.MatPtrFn, self.handle, d)

    # --- options and viewing ----------------------------------------------------

    def set_from_options(self, mat):
        chosen = read_options(self, OPTIONS, mat.getOptionsPrefix(), "Matrix gpusell (SELL-C-sigma)", mat.getComm())
        if any(value != getattr(self, attr) for attr, value in chosen.items()):
            for attr, value in chosen.items():
                setattr(self, attr, value)
            self._state = self._nonzero_state = None

    def copy_options(self, other):
        for option in OPTIONS:
            setattr(self, option.attr, getattr(other, option.attr))

    def describe(self, comm):
        """Lines for -mat_view: the format and its memory, summed over the ranks."""
        blocks = [b for b in (self.local, self.offd) if b is not None]
        sums = numpy.array([[b.nslots, b.nnz, b.cols.nbytes, b.vals.nbytes, b.nbytes, b.nslices] for b in blocks]).sum(0)
        slots, nnz, col_bytes, val_bytes, total, slices = comm.tompi4py().allreduce(sums)
        where = "device" if self.on_gpu else "host"
        mb = 1.0 / 2**20
        return [
            f"gpusell: SELL-C-sigma, C = {self.slice_height}, sigma = {self.sigma}, values {self.value_type}, "
            f"backend {'cupy' if self.on_gpu else 'numpy'}",
            f"  {slices} slices, {slots} stored entries for {nnz} nonzeros: padding ratio {slots / max(nnz, 1):.4f}",
            f"  {total * mb:.2f} MiB on the {where} (values {val_bytes * mb:.2f}, columns {col_bytes * mb:.2f}, "
            f"slice offsets and row order {(total - val_bytes - col_bytes) * mb:.2f})",
        ] + ([f"  halo exchange: {type(self._exchange).__name__}, overlapped with the owned-column product"]
             if self._exchange is not None else []) + (
            [f"  products from the grid: a constant-coefficient stencil on {' x '.join(map(str, self.grid[0]))} "
             "cells"] if self.grid is not None and self.stencil_matrix() is not None else [])


class SellOperator:
    """A SELL matrix multiplied on arrays on one rank, with no PETSc matrix:
    for operators a solver only multiplies (the flow driver's explicit
    operators), whose PETSc matrix would hold a host AIJ copy that nothing
    reads. Products count as gpusell's (GPUSELLMult, flops). ``settings``:
    {attr: value} of OPTIONS, read once by ``read_settings`` for many
    operators. A gpusell matrix of the same operator made later can share
    this SELL copy (GpuSellMat.adopt_operator)."""

    def __init__(self, indptr, indices, data, shape, settings, xp):
        self.settings, self.xp = settings, xp
        self.sell = SellMatrix.from_csr(indptr, indices, data, shape, slice_height=settings["slice_height"],
                                        sigma=settings["sigma"], value_dtype=VALUE_DTYPES[settings["value_type"]],
                                        xp=xp)
        self._kernels = family("sell", xp)
        self._flops = 2.0 * self.sell.nnz
        self.values_in_place = False
        self.adopters = weakref.WeakSet()

    def multiply_arrays(self, x, y, z=None):
        """y = A x (+ z) on arrays in the operator's memory; x, y, z may be (k, n) blocks."""
        check_product(self.sell, x, y, y if z is None else z)
        _EVENTS["Mult"].begin()
        try:
            self._kernels.spmv(self.sell, x, y, y if z is None else z, 1.0, 0.0 if z is None else 1.0)
        finally:
            _EVENTS["Mult"].end()
        PETSc.Log.logFlops(self._flops)

    def graph_key(self):
        return (self.sell,) if self.xp is not numpy else None

    def value_buffer(self):
        """(buffer, slots), as GpuSellMat.value_buffer."""
        if self.settings["value_type"] != "float64":
            raise TypeError("values written in place need a gpusell matrix with float64 values")
        return self.sell.vals, self.sell.val_map

    def values_changed(self):
        self.values_in_place = True
        for ctx in self.adopters:
            ctx.values_changed()


def read_settings(comm):
    """The gpusell options without prefix (-mat_gpusell_*), read once for SellOperators."""
    defaults = type("Defaults", (), {option.attr: option.default for option in OPTIONS})
    return read_options(defaults, OPTIONS, None, "Matrix gpusell (SELL-C-sigma)", comm)


# --- finding the SELL side of a matrix -------------------------------------------

def _context(handle):
    """The GpuSellMat of the gpusell matrix at ``handle``, made on first use."""
    found = _found.get(handle)
    ctx = found() if found is not None else None
    if ctx is None or ctx.object_id != lp.object_id(handle):
        ctx = _attached(handle)
    return ctx


def _attached(handle):
    """The GpuSellMat composed on the Mat at ``handle``; a new one when there is
    none, or when the one there was made for insides this handle no longer
    holds (it keeps its options)."""
    mat = lp.mat_from_handle(handle)
    container = mat.query(_CONTAINER)
    ctx = container.getAttr("context") if container is not None else None
    if ctx is None or ctx.object_id != mat.getId():
        previous, ctx = ctx, GpuSellMat(mat)
        if previous is not None:
            ctx.copy_options(previous)
        container = lp.new_container()
        container.setAttr("context", ctx)
        mat.compose(_CONTAINER, container)
    ctx.handle = handle  # MatHeaderReplace may have moved these insides here
    _found[handle] = weakref.ref(ctx, functools.partial(_forget, handle))
    return ctx


def _forget(handle, ref):
    """A GpuSellMat went with its matrix: drop its entry, unless a newer one took the handle."""
    if _found.get(handle) is ref:
        del _found[handle]


# --- the C side: hooks in the Mat function table --------------------------------

def _aij_operation(handle, op):
    """AIJ's own function for ``op`` on the gpusell matrix at ``handle`` (0 if none)."""
    base = _AIJ_OF[lp.mat_from_handle(handle).getType()]
    if base not in _aij_operations:
        aij = PETSc.Mat().create(comm=PETSc.COMM_SELF)
        aij.setType(base)
        _aij_operations[base] = {op: lp.mat_operation(aij.handle, op) for op in _HOOKS}
        aij.destroy()
    return _aij_operations[base][op]


def _call(op, fntype, handle, *args):
    """Call AIJ's own implementation of ``op``, if it has one."""
    fn = _aij_operation(handle, op)
    if fn:
        lp.check(fntype(fn)(handle, *args))


@petsc_callback(lp.MatVecFn, "MatMult_GPUSELL")
def _mult(A, x, y):
    _context(A).mult(x, y)


@petsc_callback(lp.MatVecVecFn, "MatMultAdd_GPUSELL")
def _mult_add(A, x, z, y):
    _context(A).mult(x, y, z)


@petsc_callback(lp.MatVecFn, "MatMultTranspose_GPUSELL")
def _mult_transpose(A, x, y):
    _context(A).mult(x, y, transpose=True)


@petsc_callback(lp.MatVecVecFn, "MatMultTransposeAdd_GPUSELL")
def _mult_transpose_add(A, x, z, y):
    _context(A).mult(x, y, z, transpose=True)


@petsc_callback(lp.MatPtrFn, "MatGetDiagonal_GPUSELL")
def _get_diagonal(A, d):
    _context(A).get_diagonal(d)


@petsc_callback(lp.MatIntFn, "MatAssemblyEnd_GPUSELL")
def _assembly_end(A, kind):
    # No context here: a matrix being assembled may be the C of a
    # MatHeaderMerge, whose insides are about to move to another handle.
    _call(lp.MATOP_ASSEMBLY_END, lp.MatIntFn, A, kind)
    _install(A, _PRODUCT_HOOKS)  # AIJ's assembly may set its own (inode) products


@petsc_callback(lp.MatPtrFn, "MatSetFromOptions_GPUSELL")
def _set_from_options(A, items):
    _context(A).set_from_options(lp.mat_from_handle(A))
    _call(lp.MATOP_SET_FROM_OPTIONS, lp.MatPtrFn, A, items)


_SHOWN_FORMATS = (PETSc.Viewer.Format.DEFAULT, PETSc.Viewer.Format.ASCII_INFO, PETSc.Viewer.Format.ASCII_INFO_DETAIL)


@petsc_callback(lp.MatPtrFn, "MatView_GPUSELL")
def _view(A, viewer_handle):
    viewer, mat = lp.viewer_from_handle(viewer_handle), lp.mat_from_handle(A)
    if viewer.getType() == PETSc.Viewer.Type.ASCII and viewer.getFormat() in _SHOWN_FORMATS and mat.isAssembled():
        ctx = _context(A)
        ctx.update()
        for line in ctx.describe(mat.getComm()):
            viewer.printfASCII(line + "\n")
    _call(lp.MATOP_VIEW, lp.MatPtrFn, A, viewer_handle)


def _out(pointer):
    return ctypes.cast(pointer, ctypes.POINTER(lp.c_ptr)).contents.value


@petsc_callback(_DuplicateFn, "MatDuplicate_GPUSELL")
def _duplicate(A, option, out):
    _call(lp.MATOP_DUPLICATE, _DuplicateFn, A, option, out)
    _context(_out(out)).copy_options(_context(A))


@petsc_callback(_ConvertFn, "MatConvert_GPUSELL")
def _convert_from(A, newtype, reuse, out):
    """MatConvert(A, "gpusell"): through plain AIJ, then retyped in place."""
    source = lp.mat_from_handle(A)
    if reuse == MAT_REUSE_MATRIX:
        source.copy(lp.mat_from_handle(_out(out)), PETSc.Mat.Structure.DIFFERENT_NONZERO_PATTERN)
        return
    if reuse == MAT_INPLACE_MATRIX:
        if source.getType() not in _AIJ_OF.values():
            source.convert(PETSc.Mat.Type.AIJ, source)
        become_gpusell(source)
        return
    target = source.convert(PETSc.Mat.Type.AIJ, PETSc.Mat())
    become_gpusell(target)
    target.incRef()  # the reference handed to the caller through out
    ctypes.cast(out, ctypes.POINTER(lp.c_ptr))[0] = target.handle


_AIJ_PRODUCTS = {  # (transpose, with z) -> AIJ's own product
    (False, False): (lp.MATOP_MULT, lp.MatVecFn),
    (False, True): (lp.MATOP_MULT_ADD, lp.MatVecVecFn),
    (True, False): (lp.MATOP_MULT_TRANSPOSE, lp.MatVecFn),
    (True, True): (lp.MATOP_MULT_TRANSPOSE_ADD, lp.MatVecVecFn),
}
_PRODUCT_HOOKS = {
    lp.MATOP_MULT: _mult,
    lp.MATOP_MULT_ADD: _mult_add,
    lp.MATOP_MULT_TRANSPOSE: _mult_transpose,
    lp.MATOP_MULT_TRANSPOSE_ADD: _mult_transpose_add,
    lp.MATOP_GET_DIAGONAL: _get_diagonal,
}
_HOOKS = dict(_PRODUCT_HOOKS)
_HOOKS.update({
    lp.MATOP_ASSEMBLY_END: _assembly_end,
    lp.MATOP_VIEW: _view,
    lp.MATOP_SET_FROM_OPTIONS: _set_from_options,
    lp.MATOP_DUPLICATE: _duplicate,
    lp.MATOP_CONVERT_FROM: _convert_from,
})


def _install(handle, hooks):
    for op, fn in hooks.items():
        lp.check(lp.MatSetOperation(handle, op, ctypes.cast(fn, lp.c_ptr)))


def _retype(handle, type_name):
    lp.check(lp.PetscObjectChangeTypeName(handle, type_name.encode()))
    _install(handle, _HOOKS)
    if choose_backend() is not numpy:
        lp.mat_from_handle(handle).setVecType(PETSc.Vec.Type.CUDA)


def become_gpusell(mat):
    """Turn an assembled (seq or MPI) AIJ matrix into a gpusell matrix in place."""
    base = mat.getType()
    types = {aij: gpusell for gpusell, aij in _AIJ_OF.items()}
    if base not in types:
        raise TypeError(f"only seqaij and mpiaij matrices can become gpusell in place, not {base}")
    _retype(mat.handle, types[base])
    return mat


def from_aij(mat):
    """A new gpusell matrix with the values of an assembled matrix (MatConvert to gpusell)."""
    return mat.convert(TYPE, PETSc.Mat())


def _is_gpusell(mat):
    return mat.getType() in _AIJ_OF


def context(mat):
    """The GpuSellMat behind a gpusell petsc4py Mat (for inspection and benchmarks)."""
    if not _is_gpusell(mat):
        raise TypeError(f"matrix of type {mat.getType()} is not a gpusell matrix")
    return _context(mat.handle)


def local_block(mat, xp):
    """The rank's diagonal block (own rows, own columns) as a float64 SellMatrix in ``xp``.

    A gpusell matrix with float64 values in the same memory lends its own SELL
    copy; any other matrix is read with MatGetDiagonalBlock and MatGetValuesCSR.
    """
    if _is_gpusell(mat):
        ctx = _context(mat.handle)
        if ctx.xp is xp and ctx.value_type == "float64":
            ctx.update()
            return ctx.local
    return SellMatrix.from_csr(*mat.getDiagonalBlock().getValuesCSR(), mat.getLocalSize(), xp=xp)


def _create(handle, type_name):
    # The AIJ creator itself, not MatSetType: that would stop early when the
    # Mat still carries the AIJ type name from before.
    lp.check(lp.CreateFn(lp.registered_function("MatList", _AIJ_OF[type_name]))(handle))
    _retype(handle, type_name)


@petsc_callback(lp.CreateFn, "MatCreate_SeqAIJGPUSELL")
def _create_seq(handle):
    _create(handle, SEQ_TYPE)


@petsc_callback(lp.CreateFn, "MatCreate_MPIAIJGPUSELL")
def _create_mpi(handle):
    _create(handle, MPI_TYPE)


@petsc_callback(lp.CreateFn, "MatCreate_GPUSELL")
def _create_by_comm_size(handle):
    parallel = lp.mat_from_handle(handle).getComm().getSize() > 1
    _create(handle, MPI_TYPE if parallel else SEQ_TYPE)


def register():
    """Make gpusell known to PETSc (MatSetType, -mat_type, -dm_mat_type)."""
    for name, fn in ((SEQ_TYPE, _create_seq), (MPI_TYPE, _create_mpi), (TYPE, _create_by_comm_size)):
        lp.check(lp.MatRegister(name.encode(), ctypes.cast(fn, lp.c_ptr)))
    lp.check(lp.MatRegisterRootName(TYPE.encode(), SEQ_TYPE.encode(), MPI_TYPE.encode()))
