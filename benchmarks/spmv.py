"""SpMV on the GPU: gpusell against PETSc's aijcusparse and sellcuda, cuSPARSE
CSR through CuPy, and the device-to-device copy bandwidth, in one run.

    python benchmarks/spmv.py --sizes 64 128 256 --mesh .bench-data/sphere.xdmf --json spmv.json

Matrices: the 7-point Laplacian on n^3 grids, the 27-point one on 128^3, and
the two-point-flux Laplacian of a tetrahedral sphere mesh. Minimal traffic
counts each value and column index once and x and y once:
nnz * (value bytes + 4) + 8 * (rows + cols). Every gpusell and PETSc number is
a whole MatMult through petsc4py on CUDA vectors (wall clock); "kernel" is the
SELL kernel alone (CUDA events); their difference is the Python overhead.
"""

import argparse
import cProfile
import ctypes
import io
import pstats
import sys

import petsc4py

petsc4py.init(sys.argv[:1])

import cupy  # noqa: E402
import cupyx.cusparse  # noqa: E402
import cupyx.scipy.sparse  # noqa: E402
import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

import harness  # noqa: E402
import plugin  # noqa: E402,F401
from gpu_mats import SellMatrix, spmv  # noqa: E402
from gpu_mats.kernels import cuda_graphs  # noqa: E402
from gpu_mats.kernels.sell import cuda as cuda_kernels  # noqa: E402
from stencils import laplacian  # noqa: E402
from petsc_ext import gpusell, libpetsc  # noqa: E402
from petsc_ext.arrays import get_array, restore_array  # noqa: E402
from petsc_ext.matrices import aij_from_csr  # noqa: E402

SELF = PETSc.COMM_SELF


def test_matrices(args):
    for n in args.sizes:
        yield f"7-point {n}^3", laplacian(n, 7)
    if args.stencil27:
        yield f"27-point {args.stencil27}^3", laplacian(args.stencil27, 27)
    if args.mesh:
        yield f"tet sphere ({args.mesh.rsplit('/', 1)[-1]})", harness.mesh_laplacian(args.mesh)


def sellcuda(csr, n):
    """PETSc's sellcuda assembled directly with exact preallocation (converting from AIJ is far slower)."""
    indptr, indices, data = csr
    mat = PETSc.Mat().create(comm=SELF)
    mat.setSizes((n, n))
    mat.setType("sellcuda")
    lengths = numpy.diff(indptr).astype(PETSc.IntType)
    prealloc = libpetsc.lib.MatSeqSELLSetPreallocation
    prealloc.argtypes = [libpetsc.c_ptr, libpetsc.c_petscint, ctypes.c_void_p]
    libpetsc.check(prealloc(mat.handle, 0, lengths.ctypes.data))
    mat.setValuesCSR(indptr.astype(PETSc.IntType), indices.astype(PETSc.IntType), data)
    mat.assemble()
    return mat


def time_petsc(mat):
    x, y = mat.createVecs()
    x.setRandom()
    us = harness.wall_us(lambda: mat.mult(x, y))
    return us, y


def run_matrix(name, csr, args, bandwidth):
    indptr, indices, data = csr
    n = indptr.size - 1
    nnz = int(indptr[-1])
    traffic = {64: nnz * 12 + 16 * n, 32: nnz * 8 + 16 * n}
    results, reference = {}, None
    start = PETSc.Log.getTime()
    aij = aij_from_csr(*csr, (n, n), comm=SELF, mat_type="aijcusparse")
    results["aijcusparse"], reference = time_petsc(aij)
    ref = reference.getArray(readonly=True).copy()
    aij.destroy()

    for label, bits, prefix in (("gpusell f64", 64, "f64_"), ("gpusell f32", 32, "f32_")):
        B = aij_from_csr(*csr, (n, n), comm=SELF, mat_type="gpusell", prefix=prefix)
        results[label], y = time_petsc(B)
        err = numpy.abs(y.getArray(readonly=True) - ref).max() / numpy.abs(ref).max()
        ctx = gpusell.context(B)
        x = B.createVecRight()
        x.setRandom()
        xa, ya = get_array(x, "r"), get_array(y, "w")
        results[f"{label} kernel"] = harness.event_us(lambda: spmv(ctx.local, xa, ya))
        restore_array(x, "r"), restore_array(y, "w")
        results[f"{label} error"] = err
        results[f"{label} padding"] = ctx.local.padding_ratio
        results[f"{label} bits"] = bits
        B.destroy()

    if n <= args.sellcuda_max_rows:
        t0 = PETSc.Log.getTime()
        S = sellcuda(csr, n)
        results["sellcuda assembly s"] = PETSc.Log.getTime() - t0
        results["sellcuda"], _ = time_petsc(S)
        S.destroy()

    A = cupyx.scipy.sparse.csr_matrix((cupy.asarray(data), cupy.asarray(indices), cupy.asarray(indptr)), shape=(n, n))
    xc, yc = cupy.random.standard_normal(n), cupy.empty(n)
    results["cuSPARSE CSR"] = harness.event_us(lambda: cupyx.cusparse.spmv(A, xc, y=yc))

    rows = []
    for label in ("gpusell f64", "gpusell f32", "aijcusparse", "sellcuda", "cuSPARSE CSR"):
        if label not in results:
            continue
        us = results[label]
        bytes_ = traffic[32 if label == "gpusell f32" else 64]
        rows.append({"matrix": name, "contender": label, "us": us, "GFs": 2 * nnz / us / 1e3,
                     "GBs": bytes_ / us / 1e3, "pct_copy": 100 * bytes_ / us / 1e3 / bandwidth,
                     "vs_aijcusparse": results["aijcusparse"] / us,
                     "kernel_us": results.get(f"{label} kernel"),
                     "overhead_us": us - results[f"{label} kernel"] if f"{label} kernel" in results else None})
    print(f"{name}: {n} rows, {nnz} nonzeros, built and timed in {PETSc.Log.getTime() - start:.1f} s; "
          f"gpusell padding {results['gpusell f64 padding']:.4f}, max rel. difference to aijcusparse "
          f"{results['gpusell f64 error']:.1e} (f64) {results['gpusell f32 error']:.1e} (f32)")
    return {"matrix": name, "rows": n, "nnz": nnz, "min_bytes_f64": traffic[64], "min_bytes_f32": traffic[32],
            "results": results}, rows


def layout_sweep(name, csr, heights=(32, 64), sigmas=(1, 32, 1024)):
    """Kernel time of gpusell float64 for each slice height C and sort window sigma."""
    indptr, indices, data = csr
    n = indptr.size - 1
    x, y = cupy.random.standard_normal(n), cupy.empty(n)
    rows = []
    for C in heights:
        for sigma in sigmas:
            A = SellMatrix.from_csr(indptr, indices, data, (n, n), slice_height=C, sigma=sigma, xp=cupy)
            rows.append({"matrix": name, "C": C, "sigma": sigma, "padding": A.padding_ratio,
                         "kernel_us": harness.event_us(lambda: spmv(A, x, y))})
    return rows


def tuning_sweep(name, csr, rows_per_thread=(1, 2, 4), blocks=(128, 256, 512)):
    """Kernel time for each rows-per-thread and block size, per value type (fills cuda.TUNING)."""
    indptr, indices, data = csr
    n = indptr.size - 1
    x, y = cupy.random.standard_normal(n), cupy.empty(n)
    rows = []
    for dtype in (numpy.float64, numpy.float32):
        A = SellMatrix.from_csr(indptr, indices, data, (n, n), value_dtype=dtype, xp=cupy)
        chosen = dict(cuda_kernels.TUNING[A.vals.dtype])
        for r in rows_per_thread:
            for block in blocks:
                cuda_kernels.TUNING[A.vals.dtype].update(rows_per_thread=r, block=block)
                cuda_kernels.forget(A)
                rows.append({"matrix": name, "values": A.vals.dtype.name, "rows_per_thread": r, "block": block,
                             "kernel_us": harness.event_us(lambda: spmv(A, x, y))})
        cuda_kernels.TUNING[A.vals.dtype].update(chosen)
        cuda_kernels.forget(A)
    return rows


def host_us(fn, calls=2000):
    """Host time per call of a launch-bound function: many calls, one synchronize."""
    fn()
    harness.sync()
    start = PETSc.Log.getTime()
    for _ in range(calls):
        fn()
    harness.sync()
    return (PETSc.Log.getTime() - start) / calls * 1e6


def overhead(n, profile=False):
    """Where the time of one MatMult goes when the GPU has almost nothing to do
    (with ``profile``, a cProfile of the gpusell MatMult path follows)."""
    csr = laplacian(n)
    rows = n**3
    B = aij_from_csr(*csr, (rows, rows), comm=SELF, mat_type="gpusell")
    A = aij_from_csr(*csr, (rows, rows), comm=SELF, mat_type="aijcusparse")
    ctx = gpusell.context(B)
    x, y = B.createVecs()
    x.setRandom()
    B.mult(x, y)
    xa, ya = get_array(x, "r"), get_array(y, "w")
    launch = cuda_kernels._launch(ctx.local)
    kernels = launch.kernels(xa)
    driver, context = ctypes.CDLL("libcuda.so.1"), ctypes.c_void_p()
    graph = cuda_graphs.capture(lambda: spmv(ctx.local, xa, ya))
    args = launch.args + (xa, numpy.int64(0), ya, ya, numpy.int64(0), numpy.float64(1), numpy.float64(0))
    out = {"matrix": f"7-point {n}^3",
           "kernel (GPU time)": harness.event_us(lambda: spmv(ctx.local, xa, ya)),
           "CuPy RawKernel launch (host)": host_us(lambda: kernels.spmv[0](launch.grid, launch.block, args)),
           "ctypes call of cuCtxGetCurrent (host)": host_us(lambda: driver.cuCtxGetCurrent(ctypes.byref(context))),
           "cuLaunchKernel, prebuilt C arguments (host)": host_us(
               lambda: kernels.vector_product.launch(xa.data.ptr, ya.data.ptr, ya.data.ptr, 1.0, 0.0)),
           "CUDA graph replay of the product (host)": host_us(lambda: cuda_graphs.replay(graph)),
           "the SELL family's product (host)": host_us(lambda: kernels.vector_product(xa, ya, ya, 1.0, 0.0)),
           "gpu_mats.spmv (host)": host_us(lambda: spmv(ctx.local, xa, ya))}
    restore_array(x, "r"), restore_array(y, "w")
    out["GpuSellMat.mult (host)"] = host_us(lambda: ctx.mult(x.handle, y.handle))
    out["gpusell MatMult (wall)"] = harness.wall_us(lambda: B.mult(x, y), batch=200)
    xc, yc = A.createVecs()
    xc.setRandom()
    out["aijcusparse MatMult (wall)"] = harness.wall_us(lambda: A.mult(xc, yc), batch=200)
    out["gpusell Python overhead"] = out["gpusell MatMult (wall)"] - out["kernel (GPU time)"]
    out["gpusell / aijcusparse (wall)"] = out["gpusell MatMult (wall)"] / out["aijcusparse MatMult (wall)"]
    if profile:
        calls = cProfile.Profile()
        calls.runcall(lambda: [B.mult(x, y) for _ in range(5000)])
        text = io.StringIO()
        pstats.Stats(calls, stream=text).sort_stats("tottime").print_stats(15)
        print(f"cProfile of 5000 gpusell MatMult calls, 7-point {n}^3:\n{text.getvalue()}")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[64, 128, 256])
    parser.add_argument("--stencil27", type=int, default=128, help="grid of the 27-point matrix (0: none)")
    parser.add_argument("--mesh", help="tetrahedral sphere mesh (benchmarks/sphere_mesh.py)")
    parser.add_argument("--sellcuda-max-rows", type=int, default=20_000_000)
    parser.add_argument("--sweep", action="store_true", help="also sweep slice height and sort window")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of gpusell's MatMult at 16^3")
    parser.add_argument("--json")
    parser.add_argument("--commit")
    args = parser.parse_args()
    PETSc.Options().setValue("f32_mat_gpusell_value_type", "float32")

    meta = harness.metadata(args.commit)
    bandwidth = harness.copy_bandwidth_GBs()
    print(f"{meta['device']}, {meta['date']}, commit {meta['commit']}: copy bandwidth {bandwidth:.0f} GB/s")
    matrices, table, sweep, tuning = [], [], [], []
    for name, csr in test_matrices(args):
        record, rows = run_matrix(name, csr, args, bandwidth)
        matrices.append(record)
        table += rows
        if args.sweep and (name.startswith("tet") or name == f"7-point {max(args.sizes)}^3"):
            sweep += layout_sweep(name, csr)
            tuning += tuning_sweep(name, csr)
    overheads = [overhead(n, args.profile and n == 16) for n in (16, 64)]

    print()
    harness.print_table(table, [("matrix", "matrix", "{}"), ("contender", "contender", "{}"), ("us", "time us", "{:.1f}"),
                                ("GFs", "GF/s", "{:.1f}"), ("GBs", "GB/s", "{:.0f}"), ("pct_copy", "% copy", "{:.1f}"),
                                ("vs_aijcusparse", "x aijcusparse", "{:.2f}"), ("kernel_us", "kernel us", "{:.1f}"),
                                ("overhead_us", "overhead us", "{:.1f}")])
    if sweep:
        print()
        harness.print_table(sweep, [("matrix", "matrix", "{}"), ("C", "C", "{}"), ("sigma", "sigma", "{}"),
                                    ("padding", "padding", "{:.4f}"), ("kernel_us", "kernel us", "{:.1f}")])
    if tuning:
        print()
        harness.print_table(tuning, [("matrix", "matrix", "{}"), ("values", "values", "{}"),
                                     ("rows_per_thread", "rows/thread", "{}"), ("block", "block", "{}"),
                                     ("kernel_us", "kernel us", "{:.1f}")])
    print()
    print("Time per MatMult when the GPU is nearly idle (us):")
    harness.print_table([{"what": k, **{o["matrix"]: o[k] for o in overheads}} for k in overheads[0] if k != "matrix"],
                        [("what", "", "{}")] + [(o["matrix"], o["matrix"], "{:.1f}") for o in overheads])
    harness.write_json(args.json, {**meta, "copy_bandwidth_GBs": bandwidth, "matrices": matrices, "table": table,
                                   "layout_sweep": sweep, "tuning_sweep": tuning, "overhead": overheads})


if __name__ == "__main__":
    main()
