"""First-use compile time of each kernel family's module (CUPY_CACHE_DIR empty)."""
import time, sys
sys.path.insert(0, ".")
import cupy
cupy.zeros(1).sum()  # context
from gpu_mats.kernels.sell import cuda as sell
from gpu_mats.kernels.csr import cuda as csr
from gpu_mats.kernels.stencil import cuda as stencil
from gpu_mats.kernels.krylov import cuda as krylov
for name, fn in (("sell double", lambda: sell._module("double", 2).get_function("sell_diagonal<double>")),
                 ("sell float", lambda: sell._module("float", 2).get_function("sell_diagonal<float>")),
                 ("csr", lambda: csr._module().get_function("csr_spmv<double,4>")),
                 ("stencil", lambda: stencil._module().get_function("stencil_spmv<double,double>")),
                 ("krylov", lambda: krylov._module().get_function("chebyshev_step<double>"))):
    t = time.perf_counter(); fn(); cupy.cuda.Device().synchronize()
    print(f"{name}: {time.perf_counter() - t:.2f} s", flush=True)
x = cupy.ones(10)
for label, fn in (("abs", lambda: cupy.abs(x)), ("multiply out", lambda: cupy.multiply(x, 2.0, out=x)),
                  ("max", lambda: x.max()), ("where", lambda: cupy.where(x > 0, x, 0.0))):
    t = time.perf_counter(); fn(); cupy.cuda.Device().synchronize()
    print(f"cupy {label}: {time.perf_counter() - t:.3f} s", flush=True)
