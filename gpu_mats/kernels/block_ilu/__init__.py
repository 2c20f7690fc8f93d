"""Block ILU(0) level by level (gpu_mats.block_ilu.BlockILU holds the
structure): the numeric factorization and the two triangular sweeps."""


def factor(f, vals, dinv):
    """Factor ``vals`` (the blocks in level order) in place and put the
    inverted diagonal blocks in ``dinv``; returns per row 0, or 1 + the
    column of its first pivot below tolerance."""


def solve(f, b, x, schedule):
    """x = U^-1 L^-1 b level by level; ``schedule`` (launch, graph,
    persistent) says how the GPU runs the levels."""


def forget(f):
    """Drop what was cached about f's arrays (its factors were replaced)."""
