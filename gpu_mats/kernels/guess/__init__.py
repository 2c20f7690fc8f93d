"""Fischer's initial guess for a run of solves with one matrix (Fischer,
"Projection techniques for iterative solution of Ax = b with successive
right-hand sides", Comput. Methods Appl. Mech. Engrg. 163, 1998; PETSc's
KSPGUESSFISCHER, model 2): a basis X of earlier solutions' increments,
orthonormal in the matrix's energy inner product, whose projection of a new
right-hand side is the guess (gpu_mats.previous_solutions). The basis holds
``rows`` vectors, the first COUNT of them in use; its scalars stay in device
memory (``state``), so that a CUDA graph replays a solve's guess and update
whatever the count. Each dot product is summed in two fixed passes, as the
pcg family's, so that a replay gives the same bits.
"""

COUNT, RESTART = range(2)  # slots of the state array: the vectors in use, and whether this update starts anew
SLOTS = 2


def basis_partials(partials, X, state, v):
    """partials (rows, the pcg family's partial_count(n)): row i the partial
    sums of X[i] . v for i below COUNT, zeros beyond, in a fixed order."""


def sum_rows(sums, partials):
    """sums (rows,) = each row of partials summed, in a fixed order."""


def combine(out, X, coeffs, state, v, sign):
    """out = v + sign sum_{i < COUNT} coeffs[i] X[i] (v None: 0); out may be v."""


def begin_update(state, rows):
    """RESTART = 1 and COUNT = 0 where the basis is full (COUNT at ``rows``), else RESTART = 0."""


def new_direction(w, x, guess, state):
    """w = x where RESTART (the basis starts anew from the solution), else x - guess (what the guess missed)."""


def append(X, w, norm_squared, state):
    """X[COUNT] = w / sqrt(norm_squared[0]) where norm_squared[0] is positive (w . A w: w's energy norm)."""


def count_up(state, norm_squared):
    """COUNT += 1 where norm_squared[0] is positive (append wrote a vector)."""


def keep(saved_row, saved_state, X, state):
    """saved_state = state and saved_row = the row of X the next update may
    write (COUNT's, or 0 where the basis is full and starts anew): all an
    update changes, so that copying them back undoes it."""
