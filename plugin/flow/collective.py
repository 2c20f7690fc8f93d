"""Work whose outcome every rank must learn: a failure on rank 0 (a missing
gmsh, a malformed file), or on any rank in work every rank does (a cell
the operators refuse), becomes one error on every rank, never a rank
raising while the others wait for it in a collective call."""


class RankZeroError(RuntimeError):
    """What went wrong on rank 0, raised on every rank."""


def on_rank_zero(comm, work):
    """``work()`` run on rank 0 of ``comm`` (mpi4py), its result broadcast to
    every rank; an exception there is a RankZeroError on every rank. Collective."""
    result, problem = None, ""
    if comm.rank == 0:
        try:
            result = work()
        except Exception as exc:  # any failure must reach every rank, not leave them waiting
            problem = f"{type(exc).__name__}: {exc}"
    result, problem = comm.bcast((result, problem), root=0)
    if problem:
        raise RankZeroError(problem)
    return result


def exit_with(comm, message):
    """Leave the program on every rank with status 1, ``message`` printed once (by rank 0)."""
    raise SystemExit(message if comm.rank == 0 else 1)


def on_every_rank(comm, work, errors):
    """``work()`` on every rank of ``comm`` (mpi4py; work with no collective
    call inside); an exception of the types ``errors`` on any rank is raised
    on every rank, the lowest failing rank's. Collective."""
    result, problem = None, None
    try:
        result = work()
    except errors as exc:
        problem = (type(exc), str(exc))
    first = next((p for p in comm.allgather(problem) if p is not None), None)
    if first is not None:
        raise first[0](first[1])
    return result
