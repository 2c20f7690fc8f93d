"""cuSPARSE's block ILU(0) (bsrilu02 + two bsrsv2 solves) through ctypes, the
peer of wbilu in benchmarks/bilu.py. CuPy binds bsrilu02 but not bsrsv2, so
both come from the libcusparse CuPy has loaded; a library without them (they
are legacy, deprecated in CUDA 12) raises OSError."""

import ctypes

import cupy
import numpy

ROW, NON_TRANSPOSE, USE_LEVEL = 0, 0, 1
LOWER, UPPER, UNIT, NON_UNIT = 0, 1, 1, 0
_p, _i = ctypes.c_void_p, ctypes.c_int


def _library():
    import cupyx.cusparse  # noqa: F401  (loads libcusparse into the process)

    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libcusparse" in line}
    if not paths:
        raise OSError("libcusparse is not loaded")
    return ctypes.CDLL(sorted(paths)[0])


class CusparseBlockILU:
    """bsrilu02 factors of (indptr, indices, blocks) on the GPU, applied by two bsrsv2 solves."""

    def __init__(self, indptr, indices, blocks):
        lib = self.lib = _library()
        for name in ("cusparseDbsrilu02", "cusparseDbsrsv2_solve"):
            if not hasattr(lib, name):
                raise OSError(f"{name} is not in this libcusparse")
        self.mb, self.nnzb, self.bs = indptr.size - 1, indices.size, blocks.shape[1]
        self.ptr = cupy.asarray(indptr, dtype=numpy.int32)
        self.cols = cupy.asarray(indices, dtype=numpy.int32)
        self.vals = cupy.asarray(blocks, dtype=numpy.float64).copy()
        self.handle = _p()
        self._check(lib.cusparseCreate(ctypes.byref(self.handle)))
        self._check(lib.cusparseSetStream(self.handle, _p(cupy.cuda.get_current_stream().ptr)))
        self.descr = {}
        for key, fill, diag in (("M", None, None), ("L", LOWER, UNIT), ("U", UPPER, NON_UNIT)):
            d = _p()
            self._check(lib.cusparseCreateMatDescr(ctypes.byref(d)))
            if fill is not None:
                self._check(lib.cusparseSetMatFillMode(d, _i(fill)))
                self._check(lib.cusparseSetMatDiagType(d, _i(diag)))
            self.descr[key] = d
        self.info_m, self.info_l, self.info_u = _p(), _p(), _p()
        self._check(lib.cusparseCreateBsrilu02Info(ctypes.byref(self.info_m)))
        self._check(lib.cusparseCreateBsrsv2Info(ctypes.byref(self.info_l)))
        self._check(lib.cusparseCreateBsrsv2Info(ctypes.byref(self.info_u)))
        sizes = []
        size = _i()
        self._check(lib.cusparseDbsrilu02_bufferSize(self.handle, _i(ROW), *self._matrix("M"), self.info_m,
                                                     ctypes.byref(size)))
        sizes.append(size.value)
        for key, info in (("L", self.info_l), ("U", self.info_u)):
            self._check(lib.cusparseDbsrsv2_bufferSize(self.handle, _i(ROW), _i(NON_TRANSPOSE), *self._matrix(key),
                                                       info, ctypes.byref(size)))
            sizes.append(size.value)
        self.buffer = cupy.empty(max(sizes), dtype=numpy.uint8)
        self.work = cupy.empty(self.mb * self.bs)

    def _matrix(self, key):
        return (_i(self.mb), _i(self.nnzb), self.descr[key], _p(self.vals.data.ptr), _p(self.ptr.data.ptr),
                _p(self.cols.data.ptr), _i(self.bs))

    def _check(self, status):
        if status != 0:
            raise RuntimeError(f"cuSPARSE call failed with status {status}")

    def factor(self):
        """Analysis and numeric factorization (in place on the values)."""
        lib, buf = self.lib, _p(self.buffer.data.ptr)
        self._check(lib.cusparseDbsrilu02_analysis(self.handle, _i(ROW), *self._matrix("M"), self.info_m,
                                                   _i(USE_LEVEL), buf))
        self._check(lib.cusparseDbsrilu02(self.handle, _i(ROW), *self._matrix("M"), self.info_m, _i(USE_LEVEL), buf))
        for key, info in (("L", self.info_l), ("U", self.info_u)):
            self._check(lib.cusparseDbsrsv2_analysis(self.handle, _i(ROW), _i(NON_TRANSPOSE), *self._matrix(key),
                                                     info, _i(USE_LEVEL), buf))

    def apply(self, b, x):
        one = ctypes.c_double(1.0)
        buf = _p(self.buffer.data.ptr)
        for key, info, src, dst in (("L", self.info_l, b, self.work), ("U", self.info_u, self.work, x)):
            m, nnzb, descr, vals, ptr, cols, bs = self._matrix(key)
            self._check(self.lib.cusparseDbsrsv2_solve(self.handle, _i(ROW), _i(NON_TRANSPOSE), m, nnzb,
                                                       ctypes.byref(one), descr, vals, ptr, cols, bs, info,
                                                       _p(src.data.ptr), _p(dst.data.ptr), _i(USE_LEVEL), buf))
