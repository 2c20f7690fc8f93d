"""Vector and block products: the fused three-term vector update (the s-step
bases' recurrences, with a Jacobi scaling in the same pass, and the flow
driver's vector updates), the tall-skinny block products of cacg
(gpu_mats.krylov), and a copy and a fill as kernels (a CUDA graph's launch
costs the host more for each memcpy or memset node than for a kernel node:
benchmarks/graph_launch.py)."""

def three_term(w, a, x, b, y, c, z, d=None, scaled=None):
    """w = a x + b y + c z (terms with a zero coefficient not read), and
    scaled = d w when d is given; w may alias y or z."""


def ts_gram(X, Y, chunk=1024):
    """X Y^T of tall-skinny blocks (rows of length n), summed over chunks of
    columns (Ali et al. 2019, section IV.C)."""


def gemm_accumulate(C, alpha, A, B):
    """C += alpha A B in place, for row-major blocks with contiguous rows."""


def reduction_slots(n):
    """The scratch entries ``max_abs`` needs for vectors of n entries."""


def max_abs(out, x, y=None, partials=None):
    """out[0] = max |x - y| over the entries (|x| without y; 0 for none),
    NaN where any entry is NaN; ``partials`` (reduction_slots(x.size)) is
    the scratch the GPU needs, so that no temporary array is made."""


def copy(w, x):
    """w = x, contiguous arrays of one dtype and size (4-byte words, any
    dtype whose size they divide); a ValueError otherwise."""


def fill(w, value):
    """w = value everywhere, a contiguous float64 array; a TypeError otherwise."""
