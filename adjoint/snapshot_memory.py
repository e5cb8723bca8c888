"""How many model states a gradient may keep in memory, and the check of a checkpointing setting
against it before any step runs.

A state x_k of a rank (shallow water: (h, u); hydrostatic: (mass, theta_mass, u)) takes
`state_bytes`, the sum of its fields' nbytes. Its snapshots live where its fields do: in GPU
memory on CuPy, in the host's on NumPy, shared with the other ranks on the same GPU (or host).
The room for snapshots on a rank is

    capacity = floor((HEADROOM x free / sharers - sweep_bytes) / state_bytes) - WORK_STATES

with `free` the memory that can be allocated now (CUDA's free memory once CuPy's pool has given
back its unused blocks, within the pool's limit when one is set; the host's MemAvailable), `sharers` the ranks on the same GPU (host),
and the minimum over ranks, so that every rank runs the same schedule. `sweep_bytes` is measured,
not guessed: the high-water mark of the memory a forward and an adjoint step allocate beyond what
was live before them (`step_bytes`, taken by `adjoint.gradient.prepare` once the model's tables,
kernels and scratch fields exist). WORK_STATES are the states a sweep holds between steps besides
its snapshots (the current state, the adjoint, a kept state, a snapshot's working copy); HEADROOM
leaves a little for the allocator's rounding and the CUDA context.
"""
from __future__ import annotations

import contextlib
import os
import tracemalloc

from meshops.parallel.comm import gather_device_identities, host_name, is_serial

HEADROOM = 0.97
WORK_STATES = 4
GIB = 2.0 ** 30


def free_bytes(xp) -> int:
    """Bytes that can be allocated now where `xp`'s arrays live: on the current GPU (CuPy), what
    CUDA has free once the memory pool has given back its unused allocations, within the pool's
    limit when one is set (the free pieces left inside allocations still partly in use are not
    counted: a slab of snapshots cannot use them); on the host (NumPy), MemAvailable, else the
    free pages."""
    if xp.__name__ == "cupy":
        pool = xp.get_default_memory_pool()
        xp.cuda.Device().synchronize()
        pool.free_all_blocks()
        free = int(xp.cuda.runtime.memGetInfo()[0])
        limit = int(pool.get_limit())
        return min(free, limit - int(pool.total_bytes())) if limit else free
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def step_bytes(xp):
    """Measure the high-water mark of the memory allocated inside the block beyond what was live
    at its start: yields a dict whose "peak" (bytes) is set when the block ends. CuPy: a memory
    hook on the pool's allocations and frees; NumPy: tracemalloc (NumPy reports its buffers)."""
    result = {"peak": 0}
    if xp.__name__ == "cupy":
        import cupy

        class Peak(cupy.cuda.MemoryHook):
            name = "SweepPeak"

            def __init__(self):
                self.live = self.peak = 0

            def malloc_postprocess(self, device_id, size, mem_size, mem_ptr, pmem_id):
                self.live += mem_size
                self.peak = max(self.peak, self.live)

            def free_postprocess(self, device_id, mem_size, mem_ptr, pmem_id):
                self.live -= mem_size

        hook = Peak()
        cupy.cuda.Device().synchronize()
        with hook:
            yield result
            cupy.cuda.Device().synchronize()
        result["peak"] = hook.peak
        return
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    start, _ = tracemalloc.get_traced_memory()
    try:
        yield result
    finally:
        _, peak = tracemalloc.get_traced_memory()
        if not tracing:
            tracemalloc.stop()
        result["peak"] = max(peak - start, 0)


def sharers(comm, xp) -> int:
    """Ranks of `comm` whose states live in the same memory as this rank's (this one included):
    the ranks on its GPU (CuPy) or on its host (NumPy). Collective."""
    if comm is None or is_serial(comm):
        return 1
    identities = (gather_device_identities(comm) if xp.__name__ == "cupy"
                  else comm.allgather(host_name()))
    return identities.count(identities[comm.Get_rank()])


def capacity(comm, xp, state_bytes: int, sweep_bytes: int = 0) -> tuple[int, dict]:
    """(states that fit beside the run on every rank, what it was computed from) (module doc).
    Collective on ranks."""
    free, shared = free_bytes(xp), sharers(comm, xp)
    fits = int((HEADROOM * free / shared - sweep_bytes) // max(state_bytes, 1)) - WORK_STATES
    if comm is not None and not is_serial(comm):
        fits = min(comm.allgather(fits))
    where = "the GPU" if xp.__name__ == "cupy" else "the host"
    return max(fits, 0), {"free": free, "sharers": shared, "where": where,
                          "state_bytes": state_bytes, "sweep_bytes": sweep_bytes}


def size(n: float) -> str:
    """n bytes in KiB, MiB or GiB."""
    for unit, scale in (("GiB", GIB), ("MiB", 2.0 ** 20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1024:.1f} KiB"


def describe(basis: dict) -> str:
    """"80.0 MiB a state, 131.2 GiB free on the GPU, shared by 3 ranks, a step's work 1.1 GiB"
    for messages and logs."""
    shared = f", shared by {basis['sharers']} ranks" if basis["sharers"] > 1 else ""
    return (f"{size(basis['state_bytes'])} a state, {size(basis['free'])} free on "
            f"{basis['where']}{shared}, a step's work {size(basis['sweep_bytes'])}")


def plan(checkpointing, n_steps: int, state_bytes: int, comm, xp, key: str = "checkpointing",
         sweep_bytes: int = 0):
    """(the checkpointing setting with `snapshots_in_ram: auto` replaced by the states that fit, or
    by the schedule `none` when all n_steps fit; a line saying what was chosen). Raises
    framework.errors.ConfigError naming `key`'s setting when its states do not fit: the schedule
    `none` keeps all n_steps states, the others `snapshots_in_ram`. `checkpointing`: a
    adjoint.config.CheckpointConfig; `sweep_bytes`: a step's measured work (`step_bytes`). Collective
    on ranks."""
    from framework.errors import ConfigError

    room, basis = capacity(comm, xp, state_bytes, sweep_bytes)
    auto = checkpointing.snapshots_in_ram == "auto"
    wanted = n_steps if checkpointing.schedule == "none" else (
        min(room, n_steps) if auto else checkpointing.snapshots_in_ram)
    what = (f"{key}.schedule = 'none' keeps all {n_steps} states" if checkpointing.schedule == "none"
            else f"{key}.snapshots_in_ram = {'auto' if auto else wanted}")
    if wanted > room or (auto and wanted < 1):
        raise ConfigError(
            f"{what} ({size(wanted * state_bytes)}) in memory, but {basis['where']} has room for "
            f"{room} beside the run ({describe(basis)}); expected "
            + ("schedule multistage with snapshots_in_ram: auto, or fewer steps"
               if checkpointing.schedule == "none" else
               f"at most {room} snapshots, or snapshots_on_disk / a two_level schedule for more"))
    chosen = ""
    if auto and wanted == n_steps:      # every state fits: keep them all, no schedule to follow
        checkpointing = checkpointing.model_copy(update={"schedule": "none", "snapshots_in_ram": 0})
        chosen = ": every state (schedule none)"
    elif auto:
        checkpointing = checkpointing.model_copy(update={"snapshots_in_ram": wanted})
        chosen = f": {wanted}"
    return checkpointing, f"{what}{chosen} (room for {room} states: {describe(basis)})"


__all__ = ["HEADROOM", "WORK_STATES", "capacity", "describe", "free_bytes", "plan", "sharers", "size",
           "step_bytes"]
