"""SIGTERM and SIGINT stop a run the same way in every phase: one `Interrupted`, cleanup in the
`finally` blocks on its way up, one line from the command line (`meshrun.cli.report`), exit status
128 + the signal's number.

The command line installs one process-wide handler at its start (`install`). The first signal:

- inside a `deferred` block (the stepping loop and the callbacks' finish, the sweeps of a
  gradient, the claiming and releasing of output files) is only recorded: the block asks
  `requested(comm)` / `check(comm)` at safe points (after every step: a MAX allreduce, so every
  rank stops at the same step, together) and, when the outermost block ends with the signal
  still unreported, `Interrupted` is raised there;
- anywhere else (start-up, mesh generation, the work of rank 0 between the sweeps, the final
  writes) raises `Interrupted` at once, as KeyboardInterrupt does, on one process or on rank 0 of
  several (mpiexec forwards the signal to every rank; the other ranks only record it). Output
  files are written atomically and claims released in `finally` blocks, so nothing is left; under
  mpiexec the command line then ends the job with MPI_Abort (the other ranks may wait in a
  collective operation for rank 0).

A second signal while the first is handled is recorded only: cleanup is never cut short and the
first signal is reported. `Interrupted` derives from BaseException, as KeyboardInterrupt does, so
that `except Exception` blocks do not swallow it. Without `install` (the model used as a library)
a `deferred` block installs the handler for its duration only.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from meshops.parallel.comm import is_serial

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(BaseException):
    """The run was stopped by a signal; `signum` is its number. `collective`: raised on every
    rank together (else on rank 0 only: the command line ends the job); `resume`: a restart was
    written to resume from."""

    def __init__(self, message: str, signum: int, *, collective: bool = False,
                 resume: bool = False):
        super().__init__(message)
        self.signum, self.collective, self.resume = signum, collective, resume


class _State:
    signum = 0          # the first signal received (0: none)
    depth = 0           # nesting of deferred blocks
    leader = True       # raises at once outside deferred blocks: one process, or rank 0
    installed = False


_state = _State()


def name(signum: int) -> str:
    return signal.Signals(signum).name


def interrupted(signum: int, where: str = "", **kwargs) -> Interrupted:
    return Interrupted(f"stopped by {name(signum)}{where}", signum, **kwargs)


def _handler(signum, frame):
    if _state.signum:              # a second signal: the first is being handled
        return
    _state.signum = signum
    if _state.depth == 0 and _state.leader:
        raise interrupted(signum)


def _launcher_rank() -> int:
    """This process's rank as the MPI launcher says (before MPI starts; 0 without one)."""
    for key in ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"):
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return 0


def install(comm=None) -> None:
    """The process-wide handler of SIGTERM and SIGINT (main thread only); rank 0 of `comm` (or
    of the launcher, before MPI starts) is the one that raises outside deferred blocks."""
    if threading.current_thread() is not threading.main_thread():
        return
    _state.leader = (_launcher_rank() if comm is None else comm.Get_rank()) == 0
    if not _state.installed:
        for s in SIGNALS:
            signal.signal(s, _handler)
        _state.installed = True


def leader() -> bool:
    """True on the process that raises at once and reports: one process, or rank 0."""
    return _state.leader


def hold() -> None:
    """From now on SIGTERM and SIGINT are ignored: the run has ended and is being reported, and
    the interpreter's shutdown (which would restore their default actions) is not cut short."""
    _state.depth += 1
    if _state.installed and threading.current_thread() is threading.main_thread():
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)


def received() -> int:
    """The first signal this process received (0: none)."""
    return _state.signum


@contextlib.contextmanager
def deferred():
    """Signals inside the block are only recorded (`requested`, `check`); one recorded when the
    outermost block ends normally raises `Interrupted` there (on the leader; not while an
    Interrupted is being handled: cleanup goes on)."""
    restore = None
    if not _state.installed and threading.current_thread() is threading.main_thread():
        restore = {s: signal.signal(s, _handler) for s in SIGNALS}
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1
        signum = _state.signum if _state.depth == 0 and _state.leader else 0
        if restore is not None:
            for s, h in restore.items():
                signal.signal(s, h)
            _state.signum = 0
    if signum and not isinstance(sys.exc_info()[1], Interrupted):  # not while one is handled
        raise interrupted(signum)


def requested(comm) -> int:
    """The signal that stops the run (0: none), the same on every rank of `comm` (collective)."""
    if comm is None or is_serial(comm):
        return _state.signum
    from mpi4py import MPI

    return comm.allreduce(_state.signum, op=MPI.MAX)


def check(comm, where: str = "") -> None:
    """Raise `Interrupted` on every rank of `comm` (collective) when any rank received a signal;
    `where` ends its message (" at step 12"). `comm` None: this process's signal only."""
    signum = requested(comm)
    if signum:
        raise interrupted(signum, where, collective=comm is not None)
