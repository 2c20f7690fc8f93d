"""Many small dense SPD solves at once: the setup of the sparse approximate inverses.

For each task t with index set P_t (a row of a CSR pattern), solve
B[P_t, P_t] x_t = rhs_t by Cholesky. One CUDA thread per task on the GPU, the
same algorithm vectorised across tasks with NumPy on the host.
"""

from .kernels import family

MAX_PATTERN = 64  # longest index set per task (the CUDA kernel's largest local array)


class LocalSystemError(ValueError):
    """A task's local system is not positive definite."""

    def __init__(self, task, pivot):
        self.task, self.pivot = task, pivot
        super().__init__(f"local system {task} is not positive definite (pivot {pivot})")


def solve_local_systems(B, pattern, rhs, xp):
    """x with x[P_t] = B[P_t, P_t]^{-1} rhs[P_t] for every row t of ``pattern``.

    B = (indptr, indices, data) with ascending columns per row; pattern =
    (indptr, indices), ascending per row; rhs aligned with pattern's indices.
    Raises LocalSystemError naming the first task whose system is not SPD.
    """
    b_ptr, b_cols, b_vals = (xp.asarray(a) for a in B)
    p_ptr, p_cols = xp.asarray(pattern[0], dtype=xp.int64), xp.asarray(pattern[1], dtype=xp.int32)
    lengths = p_ptr[1:] - p_ptr[:-1]
    longest = int(lengths.max()) if lengths.size else 0
    if longest > MAX_PATTERN:
        task = int(xp.argmax(lengths))
        raise ValueError(f"task {task} has an index set of {longest} entries; at most {MAX_PATTERN} are supported")
    x, info = family("local_solves", xp).local_cholesky_solve(
        p_ptr, p_cols, b_ptr.astype(xp.int64), b_cols.astype(xp.int32), b_vals.astype(xp.float64),
        xp.asarray(rhs, dtype=xp.float64))
    failed = xp.flatnonzero(info)
    if failed.size:
        task = int(failed[0])
        raise LocalSystemError(task, int(info[task]))
    return x
