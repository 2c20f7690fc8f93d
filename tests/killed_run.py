"""Runs a demo and kills it (SIGKILL, as ``kill -9`` would) at a chosen moment
of its checkpoint writes, counted rather than timed, so that the moment is
the same on a fast machine and a slow one.

    python tests/killed_run.py STEP CALL demos/cavity.py [options...]

The run dies in its checkpoint write of step STEP at the CALL-th function
call (Python or C: h5py's dataset writes, the fsync, the rename, ...) made
inside it; with CALL past the write's last call, just after the write
returns, before the next step. With STEP ``count`` the demo runs whole and
prints the most calls one write made.
"""

import os
import runpy
import signal
import sys

import petsc4py


def _kill():
    os.kill(os.getpid(), signal.SIGKILL)


class Calls:
    """Counts the function calls of each checkpoint write; kills the run at
    call ``call`` of step ``step``'s write, or after it (step None: never)."""

    def __init__(self, step=None, call=None):
        self.step, self.call, self.most = step, call, 0

    def wrap(self, save):
        def counted(path, comm, xp, state, operators, extra, arrays=None):
            doomed, count = state.step == self.step, 0

            def profile(frame, event, arg):
                nonlocal count
                if event in ("call", "c_call"):
                    count += 1
                    if doomed and count > self.call:
                        _kill()

            sys.setprofile(profile)
            try:
                save(path, comm, xp, state, operators, extra, arrays)
            finally:
                sys.setprofile(None)
            self.most = max(self.most, count)
            if doomed:
                _kill()

        return counted


def main():
    step, call, demo = sys.argv[1:4]
    sys.argv = [demo] + sys.argv[4:]
    petsc4py.init(sys.argv)  # before the plugin's modules import PETSc
    from plugin.flow import checkpoint

    calls = Calls() if step == "count" else Calls(int(step), int(call))
    checkpoint.save = calls.wrap(checkpoint.save)
    try:
        runpy.run_path(demo, run_name="__main__")
    finally:
        if step == "count":
            print(f"calls per checkpoint write: {calls.most}")


if __name__ == "__main__":
    main()
