"""What the copy and the fill take, checked alike by both twins."""

import numpy


def copy_words(w, x):
    """The 4-byte words of a copy from x to w, where both are contiguous, of one dtype and size."""
    if w.dtype != x.dtype or w.size != x.size or not (w.flags.c_contiguous and x.flags.c_contiguous) or w.nbytes % 4:
        raise ValueError(f"copy takes contiguous arrays of one dtype and size in 4-byte words, not {x.dtype} "
                         f"{x.shape} into {w.dtype} {w.shape}")
    return w.nbytes // 4


def check_fill(w):
    if w.dtype != numpy.float64 or not w.flags.c_contiguous:
        raise TypeError(f"fill takes a contiguous float64 array, not {w.dtype} of shape {w.shape}")
