"""Communicator helpers: the world communicator (or a serial stand-in), abort-on-error, device choice.

- `world()`: `mpi4py.MPI.COMM_WORLD`, or a `SerialComm` (size 1) when mpi4py is not installed or
  `MESHOPS_NO_MPI=1` is set, so one process without mpiexec (and without mpi4py) runs the same code.
- `abort_on_error(comm)`: a context manager that prints the rank and traceback of an exception to
  stderr and calls `comm.Abort(1)`, so one failing rank ends the whole job instead of leaving the
  others blocked in a collective. `install_excepthook(comm)` does the same for uncaught exceptions.
- Without any opt-in, importing this module (every use of `meshops.parallel` does) installs
  `default_excepthook`: an uncaught exception on a rank of a job whose MPI is initialised with
  more than one rank prints the rank and traceback and aborts the whole job (otherwise the other
  ranks would wait forever in `Waitall` or a collective). It never imports or initialises MPI
  itself; one process, or a job without mpi4py, keeps Python's usual behaviour.
  `python -m mpi4py script.py` gives the same guarantee for any script.
- `allreduce_sum(comm)`: a float -> float sum over ranks (for global inner products).
- `select_device(comm)`: one GPU per rank, chosen by the node-local rank (ranks share a GPU when a
  node runs more ranks than it has GPUs).
- `device_identity()`, `gather_device_identities(comm)`, `shared_devices(identities)`: which ranks
  drive the same GPU (NCCL refuses two ranks on one device; `meshops.parallel.transport` asks).
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback


class SerialComm:
    """A one-rank stand-in for an mpi4py communicator (the calls this package uses)."""

    rank = 0
    size = 1

    def Get_rank(self) -> int:
        return 0

    def Get_size(self) -> int:
        return 1

    def barrier(self) -> None:
        pass

    Barrier = barrier

    def bcast(self, obj, root: int = 0):
        return obj

    def allreduce(self, obj, op=None):
        return obj

    def gather(self, obj, root: int = 0):
        return [obj]

    def allgather(self, obj):
        return [obj]

    def alltoall(self, objs):
        if len(objs) != 1:
            raise ValueError(f"SerialComm.alltoall: expected 1 item (one rank), got {len(objs)}")
        return list(objs)

    def Abort(self, errorcode: int = 1):
        sys.stderr.flush()
        os._exit(errorcode)

    def __repr__(self) -> str:
        return "SerialComm(size=1)"


def mpi_module():
    """`mpi4py.MPI`, or None when mpi4py is missing or `MESHOPS_NO_MPI=1`."""
    if os.environ.get("MESHOPS_NO_MPI", "0") == "1":
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI


def world():
    """The world communicator: mpi4py's COMM_WORLD, or a SerialComm without mpi4py."""
    MPI = mpi_module()
    return SerialComm() if MPI is None else MPI.COMM_WORLD


def is_serial(comm) -> bool:
    """True on one process (a SerialComm or a communicator of size 1): no messages to send."""
    return isinstance(comm, SerialComm) or comm.Get_size() == 1


def allreduce_sum(comm):
    """A function float -> float that sums over the ranks of `comm`."""
    if isinstance(comm, SerialComm):
        return lambda value: float(value)
    MPI = mpi_module()
    return lambda value: float(comm.allreduce(float(value), op=MPI.SUM))


def report_exception(comm, exc_type, exc, tb) -> None:
    rank = comm.Get_rank()
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    sys.stderr.write(f"[rank {rank} of {comm.Get_size()}] aborting the job on an error:\n{text}")
    sys.stderr.flush()
    sys.stdout.flush()


#: Seconds an aborting rank waits after writing its message, so the launcher (mpiexec) forwards it
#: before MPI_Abort tears the job down (without it, a loaded machine can lose the message).
ABORT_GRACE_S = 1.0


def abort(comm, code: int = 1) -> None:
    """comm.Abort(code), and never return (some MPI libraries return from MPI_Abort on the
    caller)."""
    try:
        time.sleep(ABORT_GRACE_S)
        comm.Abort(code)
    finally:
        os._exit(code)


@contextlib.contextmanager
def abort_on_error(comm=None):
    """Run a block; on any exception print the rank and traceback and call comm.Abort(1).

    With one rank the exception propagates normally (nothing can hang).
    """
    comm = world() if comm is None else comm
    try:
        yield comm
    except BaseException as exc:  # noqa: B902 - every error must end the job
        if comm.Get_size() == 1:
            raise
        report_exception(comm, type(exc), exc, exc.__traceback__)
        abort(comm)


def install_excepthook(comm=None) -> None:
    """Make an uncaught exception on any rank abort the whole job with its message."""
    comm = world() if comm is None else comm
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        if comm.Get_size() == 1:
            previous(exc_type, exc, tb)
            return
        report_exception(comm, exc_type, exc, tb)
        abort(comm)

    sys.excepthook = hook


def _running_world():
    """COMM_WORLD when mpi4py's MPI is already imported, initialised, not finalised and has more
    than one rank; else None. Never imports mpi4py or initialises MPI."""
    MPI = sys.modules.get("mpi4py.MPI")
    if MPI is None:
        return None
    try:
        if not MPI.Is_initialized() or MPI.Is_finalized():
            return None
        comm = MPI.COMM_WORLD
        return comm if comm.Get_size() > 1 else None
    except Exception:  # noqa: BLE001 - a broken MPI state must not hide the user's error
        return None


def default_excepthook(exc_type, exc, tb) -> None:
    """sys.excepthook installed on import: in a multi-rank job, report the rank and traceback and
    abort the job; otherwise hand over to the hook that was there before."""
    comm = _running_world()
    if comm is None or issubclass(exc_type, SystemExit):
        _PREVIOUS_HOOK(exc_type, exc, tb)
        return
    report_exception(comm, exc_type, exc, tb)
    abort(comm)


_PREVIOUS_HOOK = sys.excepthook


def install_default_excepthook() -> None:
    """Chain `default_excepthook` in front of the current sys.excepthook (once)."""
    global _PREVIOUS_HOOK
    if sys.excepthook is not default_excepthook:
        _PREVIOUS_HOOK = sys.excepthook
        sys.excepthook = default_excepthook


if os.environ.get("MESHOPS_NO_ABORT_HOOK", "0") != "1":
    install_default_excepthook()


def node_local_rank(comm) -> int:
    """Rank of this process among the ranks on the same node."""
    if isinstance(comm, SerialComm):
        return 0
    MPI = mpi_module()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    try:
        return local.Get_rank()
    finally:
        local.Free()


def select_device(comm=None) -> int:
    """Make GPU (node-local rank mod device count) current for this rank and return its id."""
    import cupy

    comm = world() if comm is None else comm
    count = cupy.cuda.runtime.getDeviceCount()
    if count == 0:
        raise RuntimeError(f"rank {comm.Get_rank()}: select_device found no CUDA device")
    device = node_local_rank(comm) % count
    cupy.cuda.Device(device).use()
    return device


def host_name() -> str:
    """This process's host: MPI's processor name, else the socket host name."""
    MPI = mpi_module()
    if MPI is not None:
        return MPI.Get_processor_name()
    import socket

    return socket.gethostname()


def device_identity() -> tuple[str, str]:
    """(host name, PCI bus id) of this rank's current CUDA device: equal for two ranks exactly when
    they drive the same GPU. Device ordinals cannot tell (CUDA_VISIBLE_DEVICES renumbers the devices
    of each process); the device UUID stands in where the runtime gives no bus id."""
    import cupy

    rt = cupy.cuda.runtime
    device = rt.getDevice()
    try:
        gpu = rt.deviceGetPCIBusId(device)
    except Exception:  # noqa: BLE001 - a runtime without the call: the UUID is as unique
        uuid = rt.getDeviceProperties(device).get("uuid", b"")
        gpu = uuid.hex() if isinstance(uuid, bytes) else str(uuid)
    return host_name(), gpu


def gather_device_identities(comm, identity=None) -> list:
    """Every rank's device identity, indexed by rank (collective over `comm`: every rank gets the
    same list). `identity`: this rank's (hashable; default `device_identity()`; tests pass their
    own so that no GPU is needed)."""
    identity = device_identity() if identity is None else identity
    return list(comm.allgather(identity))


def shared_devices(identities) -> list[list[int]]:
    """Groups of ranks (each ascending, two or more ranks) whose device identities are equal, in
    order of their first rank; [] when every rank has a device of its own. `identities[r]` is rank
    r's (as `gather_device_identities` returns them: (host, bus id), or any hashable)."""
    groups: dict = {}
    for rank, identity in enumerate(identities):
        groups.setdefault(identity, []).append(rank)
    return [ranks for ranks in groups.values() if len(ranks) > 1]


def describe_shared(groups, identities) -> str:
    """For messages: "ranks 0 and 1 share GPU <bus id> on host <host>" for the first group of
    `shared_devices` (and how many more GPUs are shared)."""
    ranks = groups[0]
    names = ", ".join(map(str, ranks[:-1])) + f" and {ranks[-1]}"
    identity = identities[ranks[0]]
    where = (f"GPU {identity[1]} on host {identity[0]}" if isinstance(identity, tuple)
             and len(identity) == 2 else f"GPU {identity}")
    n = len(groups) - 1
    more = f" ({n} more shared GPU{'s' if n > 1 else ''})" if n else ""
    return f"ranks {names} share {where}{more}"
