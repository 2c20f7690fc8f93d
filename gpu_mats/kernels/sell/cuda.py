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

MAX_VECTORS = 4  # widest generalized SpMV compiled; more vectors go in chunks
_VALUE_TYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float"}
_NULL = numpy.uint64(0)

# Rows per thread (16-byte value loads) and threads per block, per value type
# (BENCHMARKS.md, "kernel tuning").
TUNING = {
    numpy.dtype(numpy.float64): {"rows_per_thread": 2, "block": 256},
    numpy.dtype(numpy.float32): {"rows_per_thread": 4, "block": 256},
}


def _spmv_name(value_type, nvec, rows):
    return f"sell_spmv<{value_type},{nvec},{rows}>"


@functools.cache
def _module(value_type, rows):
    """The kernels of one value type and row grouping, compiled on first use."""
    source = pathlib.Path(__file__).with_name("sell.cu").read_text()
    names = [_spmv_name(value_type, n, rows) for n in range(1, MAX_VECTORS + 1)] + [f"sell_diagonal<{value_type}>"]
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=names)


class _VectorProduct:
    """The single-vector product of one matrix launched through the CUDA
    driver (cuLaunchKernel) with every argument held as a C value: a call
    writes the three vector addresses, two scalars and the stream, and
    launches. CuPy's generic launch converts all thirteen kernel arguments
    anew at every call, which on small matrices (coarse multigrid levels, a
    GPU's share in strong scaling) costs more host time than the kernel
    takes (BENCHMARKS.md, "Python overhead per MatMult")."""

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
        self.launch = _cuda_driver().cuLaunchKernel

    def __call__(self, x, y, z, alpha, beta):
        self.x.value, self.y.value, self.z.value = x.data.ptr, y.data.ptr, z.data.ptr
        self.alpha.value, self.beta.value = alpha, beta
        self.stream.value = cupy.cuda.get_current_stream().ptr
        status = self.launch(*self.arguments)
        if status:
            name = ctypes.c_char_p()
            _cuda_driver().cuGetErrorName(status, ctypes.byref(name))
            raise RuntimeError(f"cuLaunchKernel of the SELL product failed: {name.value.decode()} ({status})")


@functools.cache
def _cuda_driver():
    return ctypes.CDLL("libcuda.so.1")


class _Launch:
    """What one matrix's launches share: kernels, grid, leading arguments."""

    def __init__(self, A):
        tuning = TUNING[A.vals.dtype]
        rows = tuning["rows_per_thread"] if A.slice_height % tuning["rows_per_thread"] == 0 else 1
        value_type = _VALUE_TYPES[A.vals.dtype]
        module = _module(value_type, rows)
        self.spmv = [module.get_function(_spmv_name(value_type, n, rows)) for n in range(1, MAX_VECTORS + 1)]
        self.diagonal = module.get_function(f"sell_diagonal<{value_type}>")
        block = tuning["block"]
        self.block = (block,)
        self.grid = (-(-A.shape[0] // (rows * block)),)
        self.diagonal_grid = (-(-A.shape[0] // block),)
        row_of = A.row_of if A.row_of is not None else _NULL
        self.args = (A.slice_ptr, A.cols, A.vals, row_of, numpy.int32(A.shape[0]), numpy.int32(A.slice_height))
        self.vector_product = _VectorProduct(self.spmv[0], self.grid, self.block, self.args)


_launches = weakref.WeakKeyDictionary()


def _launch(A):
    launch = _launches.get(A)
    if launch is None:
        launch = _launches[A] = _Launch(A)
    return launch


def spmv(A, x, y, z, alpha, beta):
    """Y = alpha A X + beta Z; 1-D vectors, or 2-D (k, n) blocks of k vectors."""
    if A.shape[0] == 0:
        return
    launch = _launch(A)
    if x.ndim == 1:
        launch.vector_product(x, y, z, alpha, beta)
        return
    scalars = (numpy.float64(alpha), numpy.float64(beta))
    ldx, ldy = numpy.int64(x.strides[0] // 8), numpy.int64(y.strides[0] // 8)
    for j in range(0, x.shape[0], MAX_VECTORS):
        nvec = min(MAX_VECTORS, x.shape[0] - j)
        launch.spmv[nvec - 1](launch.grid, launch.block, launch.args + (x[j], ldx, y[j], z[j], ldy) + scalars)


def diagonal(A, d):
    if A.shape[0] == 0:
        return
    launch = _launch(A)
    launch.diagonal(launch.diagonal_grid, launch.block, launch.args + (numpy.int32(min(A.shape)), d))


def forget(A):
    """Drop cached launches of A (after TUNING changed, or A's arrays were replaced)."""
    _launches.pop(A, None)
