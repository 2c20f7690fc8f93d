"""Scratch: boxfft's solve at 256^3 (walls; 1 x 1 x 2) on the GPU, and cupyx's dctn-based one."""
import numpy, cupy, cupyx.scipy.fft as cfft
from gpu_mats.stencil import StencilMatrix
from gpu_mats.spectral import SpectralBoxSolver, dct2, idct2
def ms(fn, repeats=10):
    fn(); cupy.cuda.Device().synchronize(); out = []
    for _ in range(repeats):
        a, b = cupy.cuda.Event(), cupy.cuda.Event(); a.record(); fn(); b.record(); b.synchronize()
        out.append(cupy.cuda.get_elapsed_time(a, b))
    return float(numpy.median(out))
n = 256
shape = (n, n, n); c = (1 / 128, 1 / 128, 1 / 512)
count = lambda m: numpy.r_[1.0, numpy.full(m - 2, 2.0), 1.0]
diag = (c[0] * count(n)[None, None, :] + c[1] * count(n)[None, :, None] + c[2] * count(n)[:, None, None]).ravel()
S = StencilMatrix(shape, (False,) * 3, c, cupy.asarray(diag))
solver = SpectralBoxSolver(S)
b = cupy.random.rand(n**3); b -= b.mean(); x = cupy.empty_like(b)
print("solve", ms(lambda: solver.solve(b, x)))
f = b.reshape(shape)
for axis in range(3):
    print("axis", axis, "dct2", ms(lambda: dct2(f, axis)), "idct2", ms(lambda: idct2(f, axis)))
y = cupy.empty_like(b); S.multiply(x, y)
print("residual", float(cupy.linalg.norm(y - b) / cupy.linalg.norm(b)))
