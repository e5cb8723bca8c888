"""Work whose outcome every rank shares: done on rank 0 with its result broadcast (`on_root`), or
on every rank with a config error of any raised on all (`on_every_rank`); errors are raised on
every rank together (so nothing waits in a collective for a rank that failed)."""
from __future__ import annotations

from meshops.parallel.comm import is_serial

from framework.errors import ConfigError


def on_root(comm, fn):
    """fn() on rank 0, its result broadcast; an exception on rank 0 is raised on every rank (a
    ConfigError as itself, a bad input (ValueError, OSError) as a ValueError, anything else as a
    RuntimeError, with rank 0's message), marked `collective` (every rank raises it)."""
    outcome = None
    if comm.Get_rank() == 0:
        try:
            outcome = ("ok", fn())
        except Exception as exc:  # noqa: BLE001 - re-raised on every rank below
            exc.collective = True
            if is_serial(comm):
                raise
            outcome = ("error", exc)
    if not is_serial(comm):
        if outcome is not None and outcome[0] == "error":
            exc = outcome[1]
            kind = ConfigError if isinstance(exc, ConfigError) else \
                ValueError if isinstance(exc, (ValueError, OSError)) else RuntimeError
            outcome = ("error", (str(exc), kind.__name__))
        outcome = comm.bcast(outcome, root=0)
    if outcome[0] == "ok":
        return outcome[1]
    message, kind = outcome[1]
    error = {"ConfigError": ConfigError, "ValueError": ValueError}.get(kind, RuntimeError)(message)
    error.collective = True
    raise error


def on_every_rank(fn, comm):
    """fn() on every rank; a ConfigError on any rank is raised on every rank."""
    error = None
    try:
        result = fn()
    except ConfigError as exc:
        error, result = str(exc), None
    errors = [error] if is_serial(comm) else comm.allgather(error)
    found = [e for e in errors if e]
    if found:
        raise ConfigError(found[0])
    return result
