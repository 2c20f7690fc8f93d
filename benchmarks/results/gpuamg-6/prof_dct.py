"""Scratch: time cupyx.scipy.fft's DCTs at 256^3 (the box's Neumann Poisson solve: DCT, divide, inverse DCT)."""
import numpy, cupy, cupyx.scipy.fft as cfft

def ms(fn, repeats=10):
    fn(); cupy.cuda.Device().synchronize()
    out = []
    for _ in range(repeats):
        a, b = cupy.cuda.Event(), cupy.cuda.Event(); a.record(); fn(); b.record(); b.synchronize()
        out.append(cupy.cuda.get_elapsed_time(a, b))
    return float(numpy.median(out))

for dtype in (numpy.float64, numpy.float32):
    x = cupy.random.rand(256, 256, 256).astype(dtype)
    lam = cupy.random.rand(256, 256, 256).astype(dtype) + 1
    print(dtype.__name__, "dctn", ms(lambda: cfft.dctn(x, type=2, norm="ortho")),
          "solve", ms(lambda: cfft.idctn(cfft.dctn(x, type=2, norm="ortho") / lam, type=2, norm="ortho")),
          "per-axis dct", ms(lambda: [cfft.dct(x, type=2, axis=a, norm="ortho") for a in range(3)]),
          "rfftn", ms(lambda: cfft.rfftn(x)), "rfftn+irfftn", ms(lambda: cfft.irfftn(cfft.rfftn(x), s=x.shape)), flush=True)
    y = cfft.idctn(cfft.dctn(x, type=2, norm="ortho"), type=2, norm="ortho")
    print("roundtrip err", float(abs(y - x).max()))
