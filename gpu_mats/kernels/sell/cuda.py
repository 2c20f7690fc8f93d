"""The SELL family on the GPU: launchers for ``sell.cu``, compiled once per
process with ``cupy.RawModule``.

Kernels run on CuPy's current stream; ``petsc_ext`` makes that PETSc's stream.
``TUNING`` holds the launch choices measured by benchmarks/spmv.py.
"""

import ctypes
import functools
import pathlib
import weakref

import cupy
import numpy

from ..cuda_graphs import capture

MAX_VECTORS = 4  # widest generalized SpMV compiled; more vectors go in chunks
_TYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}  # values' and vectors'
_NULL = numpy.uint64(0)

# Rows per thread and threads per block, per value type (BENCHMARKS.md,
# "kernel tuning"). float32: 4 rows (16-byte value loads) were 5% faster for
# y = A x alone at 256^3, but 2 rows 13-27% faster in gpuamg's cycle, whose
# products also read z or update r, d and x (benchmarks/amg_cycles.py).
TUNING = {
    numpy.dtype(numpy.float64): {"rows_per_thread": 2, "block": 256},
    numpy.dtype(numpy.float32): {"rows_per_thread": 2, "block": 256},
}


def _spmv_name(value_type, vector_type, nvec, rows):
    return f"sell_spmv<{value_type},{vector_type},{nvec},{rows}>"


@functools.cache
def _module(value_type, vector_type, rows):
    """The kernels of one value type, vector type and row grouping, compiled on first use."""
    source = pathlib.Path(__file__).with_name("sell.cu").read_text()
    names = [_spmv_name(value_type, vector_type, n, rows) for n in range(1, MAX_VECTORS + 1)] + [
        f"sell_diagonal<{value_type}>", f"sell_chebyshev<{value_type},{vector_type},{rows}>",
        f"sell_chebyshev_first<{value_type},{vector_type},{rows}>"]
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=names)


class _VectorProduct:
    """The single-vector product of one matrix, replayed as a CUDA graph per
    set of vectors and scalars.

    A kernel launch costs more host time (cuLaunchKernel alone, with its
    arguments prebuilt as C values; CuPy's launch, which converts all
    thirteen arguments at every call, more) than a small matrix's kernel
    takes on the GPU, while the replay of a one-kernel graph costs less
    (BENCHMARKS.md, "The cost of a call"). Solvers
    call the product on a few vectors over and over, so the graphs of the
    last ``GRAPHS_KEPT`` (x, y, z, alpha, beta) are kept. While a stream is
    being captured (a caller's own graph) the kernel is launched directly.
    """

    GRAPHS_KEPT = 16

    def __init__(self, kernel, grid, block, leading):
        slice_ptr, cols, vals, row_of, nrows, C = leading
        self.x, self.y, self.z = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        self.alpha, self.beta = ctypes.c_double(), ctypes.c_double()
        self.values = (ctypes.c_void_p(slice_ptr.data.ptr), ctypes.c_void_p(cols.data.ptr),
                       ctypes.c_void_p(vals.data.ptr), ctypes.c_void_p(0 if row_of is _NULL else row_of.data.ptr),
                       ctypes.c_int(int(nrows)), ctypes.c_int(int(C)), self.x, ctypes.c_longlong(0), self.y, self.z,
                       ctypes.c_longlong(0), self.alpha, self.beta)
        params = (ctypes.c_void_p * len(self.values))(*(ctypes.addressof(v) for v in self.values))
        self.stream = ctypes.c_void_p()
        # cuLaunchKernel(function, grid x y z, block x y z, shared bytes, stream, params, extra), every
        # argument a ctypes object already, so that the call converts nothing
        self.arguments = (ctypes.c_void_p(kernel.kernel.ptr), *(ctypes.c_uint(v) for v in (grid[0], 1, 1)),
                          *(ctypes.c_uint(v) for v in (block[0], 1, 1)), ctypes.c_uint(0), self.stream, params,
                          ctypes.c_void_p())
        self.launch_kernel = _cuda_driver().cuLaunchKernel
        self.graphs = {}

    def __call__(self, x, y, z, alpha, beta):
        stream = cupy.cuda.get_current_stream()
        key = (x.data.ptr, y.data.ptr, z.data.ptr, alpha, beta)
        if stream.is_capturing():
            self.launch(*key)
            return
        graph = self.graphs.get(key) or self._capture(key)
        graph.launch(stream)

    def _capture(self, key):
        if len(self.graphs) >= self.GRAPHS_KEPT:
            self.graphs.pop(next(iter(self.graphs)))  # the oldest
        graph = self.graphs[key] = capture(lambda: self.launch(*key))
        return graph

    def launch(self, x, y, z, alpha, beta):
        """The kernel on the current stream (addresses x, y, z)."""
        self.x.value, self.y.value, self.z.value = x, y, z
        self.alpha.value, self.beta.value = alpha, beta
        self.stream.value = cupy.cuda.get_current_stream().ptr
        status = self.launch_kernel(*self.arguments)
        if status:
            name = ctypes.c_char_p()
            _cuda_driver().cuGetErrorName(status, ctypes.byref(name))
            raise RuntimeError(f"cuLaunchKernel of the SELL product failed: {name.value.decode()} ({status})")


@functools.cache
def _cuda_driver():
    return ctypes.CDLL("libcuda.so.1")


class _Launch:
    """What one matrix's launches share: grid, leading arguments, and its
    kernels per vector type (``kernels``)."""

    def __init__(self, A):
        tuning = TUNING[A.vals.dtype]
        self.rows = tuning["rows_per_thread"] if A.slice_height % tuning["rows_per_thread"] == 0 else 1
        self.value_type = _TYPES[A.vals.dtype]
        self.diagonal = _module(self.value_type, "double", self.rows).get_function(f"sell_diagonal<{self.value_type}>")
        block = tuning["block"]
        self.block = (block,)
        self.grid = (-(-A.shape[0] // (self.rows * block)),)
        self.diagonal_grid = (-(-A.shape[0] // block),)
        row_of = A.row_of if A.row_of is not None else _NULL
        self.args = (A.slice_ptr, A.cols, A.vals, row_of, numpy.int32(A.shape[0]), numpy.int32(A.slice_height))
        self._kernels = {}

    def kernels(self, vectors):
        """The products and smoothing step for vectors of the array ``vectors``' type."""
        kernels = self._kernels.get(vectors.dtype)
        if kernels is None:
            kernels = self._kernels[vectors.dtype] = _VectorKernels(self, _TYPES[vectors.dtype])
        return kernels


class _VectorKernels:
    """One matrix's kernels for one vector type: the products of 1 to
    MAX_VECTORS vectors, the single vector's replayed (_VectorProduct), and
    the smoothing steps."""

    def __init__(self, launch, vector_type):
        module = _module(launch.value_type, vector_type, launch.rows)
        self.spmv = [module.get_function(_spmv_name(launch.value_type, vector_type, n, launch.rows))
                     for n in range(1, MAX_VECTORS + 1)]
        self.chebyshev = module.get_function(f"sell_chebyshev<{launch.value_type},{vector_type},{launch.rows}>")
        self.chebyshev_first = module.get_function(
            f"sell_chebyshev_first<{launch.value_type},{vector_type},{launch.rows}>")
        self.vector_product = _VectorProduct(self.spmv[0], launch.grid, launch.block, launch.args)


# id(A) -> its _Launch, dropped when A goes (a plain dict: a WeakKeyDictionary
# makes a weak reference at every lookup, one per product)
_launches = {}


def _launch(A):
    launch = _launches.get(id(A))
    if launch is None:
        launch = _launches[id(A)] = _Launch(A)
        weakref.finalize(A, _launches.pop, id(A), None)
    return launch


def spmv(A, x, y, z, alpha, beta):
    """Y = alpha A X + beta Z; 1-D vectors, or 2-D (k, n) blocks of k vectors."""
    if A.shape[0] == 0:
        return
    launch = _launch(A)
    kernels = launch.kernels(x)
    if x.ndim == 1:
        kernels.vector_product(x, y, z, alpha, beta)
        return
    scalars = (numpy.float64(alpha), numpy.float64(beta))
    ldx, ldy = numpy.int64(x.strides[0] // x.itemsize), numpy.int64(y.strides[0] // y.itemsize)
    for j in range(0, x.shape[0], MAX_VECTORS):
        nvec = min(MAX_VECTORS, x.shape[0] - j)
        kernels.spmv[nvec - 1](launch.grid, launch.block, launch.args + (x[j], ldx, y[j], z[j], ldy) + scalars)


def chebyshev_step(A, d, d_next, r, z, scaling, x, a, c):
    """r = z - A d; d_next = a d + c scaling r; x += d_next (sell.cu's sell_chebyshev)."""
    if A.shape[0] == 0:
        return
    launch = _launch(A)
    launch.kernels(d).chebyshev(launch.grid, launch.block, launch.args + (d, d_next, r, z, scaling, x,
                                                                          numpy.float64(a), numpy.float64(c)))


def chebyshev_first(A, b, scaling, d_next, r, x, c0, a, c):
    """The first two smoothing steps from x = 0 (sell.cu's sell_chebyshev_first)."""
    if A.shape[0] == 0:
        return
    launch = _launch(A)
    launch.kernels(b).chebyshev_first(launch.grid, launch.block, launch.args + (
        b, scaling, d_next, r, x, numpy.float64(c0), numpy.float64(a), numpy.float64(c)))


def diagonal(A, d):
    if A.shape[0] == 0:
        return
    launch = _launch(A)
    launch.diagonal(launch.diagonal_grid, launch.block, launch.args + (numpy.int32(min(A.shape)), d))


def forget(A):
    """Drop cached launches of A (after TUNING changed, or A's arrays were replaced)."""
    _launches.pop(id(A), None)
