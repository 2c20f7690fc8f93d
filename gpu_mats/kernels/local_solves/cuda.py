"""The local dense solves on the GPU: one thread per task (``local_solves.cu``)."""

import functools
import pathlib

import cupy
import numpy

LOCAL_SIZES = (8, 16, 32, 64)  # compiled bounds on a task's pattern length


@functools.cache
def _local_kernel(bound):
    """The local-solve kernel for patterns of up to ``bound`` entries, compiled on first use."""
    source = pathlib.Path(__file__).with_name("local_solves.cu").read_text()
    name = f"local_cholesky_solve<{bound}>"
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=[name]).get_function(name)


def local_cholesky_solve(pattern_ptr, pattern_cols, b_ptr, b_cols, b_vals, rhs):
    """Per task, Cholesky-solve B[P, P] x = rhs on P (local_solves.cu)."""
    ntasks = pattern_ptr.size - 1
    x = cupy.zeros(pattern_cols.size)
    info = cupy.zeros(ntasks, dtype=cupy.int32)
    if ntasks == 0:
        return x, info
    longest = int((pattern_ptr[1:] - pattern_ptr[:-1]).max())
    bound = next(m for m in LOCAL_SIZES if m >= longest)
    block = 128
    _local_kernel(bound)(
        (-(-ntasks // block),), (block,),
        (numpy.int32(ntasks), pattern_ptr, pattern_cols, b_ptr, b_cols, b_vals, rhs, x, info))
    return x, info
