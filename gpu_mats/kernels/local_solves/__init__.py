"""Many small dense SPD solves at once, by Cholesky: the set-up of the sparse
approximate inverses (gpu_mats.local_solves)."""


def local_cholesky_solve(pattern_ptr, pattern_cols, b_ptr, b_cols, b_vals, rhs):
    """Per task t (a row of the pattern), solve B[P_t, P_t] x = rhs[P_t];
    returns (x aligned with pattern_cols, info per task: 0, or 1 + the
    column of the first non-positive pivot)."""
