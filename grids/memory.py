"""The memory an icosahedral mesh needs, checked against what the machine has before any work.

Model: peak resident memory = fixed + per_cell * nCells (nCells = 10 * 4**level + 2), fitted to
the peak RSS (ru_maxrss) of fresh processes on 2 cores (2026-12-04, decision 0017):

    generate  write_icosahedral (python -m grids generate, a cache miss)   L8 0.89 GB, L9 1.92 GB
    load      read_trusted_mesh (a cache hit; the Mesh itself is 1176 B/cell) L8 1.00 GB, L9 3.47 GB
    validate  validate_mesh of the loaded mesh (a cache miss), per cell on top of the load

The per-cell slope is taken at levels 8-10 (527 B/cell from level 8 to 9, 575 from 9 to 10 with
level 10's 6.0 GiB of benchmarks/RESULTS.md; 600 used, a margin of 5 %): at levels 5-7 the
per-block temporaries (blocks of 2^17 entities, `grids.geometry.blocks`) still grow with the mesh,
so a fit there (1.75 kB/cell to generate, 1.49 kB/cell to load) overstates large meshes threefold.
The model gives level 10 6.3 GiB to generate (6.0 GiB measured) and level 11 23.9 GiB: the
level-11 generation that ended in MemoryError on a 24 GiB machine is refused before it starts,
as is a run of it (loading the level-11 mesh needs 49 GiB).

Available: MemAvailable of /proc/meminfo, or less where an address-space limit (ulimit -v,
RLIMIT_AS) leaves less room to this process; no check where /proc/meminfo does not exist (not
Linux).
"""
from __future__ import annotations

import resource

#: (fixed bytes, bytes per cell) of each kind of work (module docstring).
MEMORY_MODEL = {"generate": (450e6, 600), "load": (180e6, 1260), "validate": (0, 150)}
GIB = 2**30


class InsufficientMemory(ValueError):
    """The mesh asked for needs more memory than the machine has available (one line: the key,
    the level, the memory needed and available, what to do)."""


def cells(level: int) -> int:
    return 10 * 4**level + 2


def memory_needed(level: int, *, generate: bool = True, load: bool = False,
                  validate: bool = False) -> int:
    """Bytes of peak resident memory to generate the level's mesh into a file (`generate`), load
    it as a whole Mesh (`load`) and validate it after the load (`validate`): the largest peak of
    the steps, which run one after the other (nothing of the generation is left at the load)."""
    n = cells(level)
    peaks = []
    if generate:
        peaks.append(MEMORY_MODEL["generate"][0] + MEMORY_MODEL["generate"][1] * n)
    if load:
        fixed, per_cell = MEMORY_MODEL["load"]
        per_cell += MEMORY_MODEL["validate"][1] if validate else 0
        peaks.append(fixed + per_cell * n)
    return int(max(peaks, default=0))


def available_memory() -> tuple[int, str] | None:
    """(bytes this process can still allocate, where the figure comes from), None off Linux:
    MemAvailable of /proc/meminfo, or RLIMIT_AS minus the process's VmSize where that is less."""
    try:
        with open("/proc/meminfo") as fh:
            meminfo = {line.split(":")[0]: line.split()[1:] for line in fh}
        found = (int(meminfo["MemAvailable"][0]) * 1024, "MemAvailable in /proc/meminfo")
    except (OSError, KeyError, ValueError, IndexError):
        return None
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/status") as fh:
                size = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
        except (OSError, StopIteration, ValueError):
            size = 0
        if limit - size < found[0]:
            found = (max(limit - size, 0), "the address-space limit of this process, ulimit -v")
    return found


def check_memory(level: int, *, key: str, generate: bool = True, load: bool = False,
                 validate: bool = False) -> None:
    """InsufficientMemory naming `key` (the setting that chose `level`) when the work on the mesh
    (`memory_needed`) needs more than `available_memory()`; nothing is allocated first. No check
    where the available memory is unknown."""
    found = available_memory()
    if found is None:
        return
    available, source = found
    need = memory_needed(level, generate=generate, load=load, validate=validate)
    if need <= available:
        return
    work = " and ".join(w for w, on in (("generating", generate), ("loading", load)) if on)
    fits = [lv for lv in range(level - 1, -1, -1)
            if memory_needed(lv, generate=generate, load=load, validate=validate) <= available]
    smaller = (f"{key} {fits[0]} or less (level {fits[0]}: about "
               f"{memory_needed(fits[0], generate=generate, load=load, validate=validate) / GIB:.1f}"
               " GiB)") if fits else f"a smaller {key}"
    setting = f"{key} {level}" if key.startswith("-") else f"{key} = {level}"   # flag or key
    raise InsufficientMemory(
        f"{setting}: {work} the mesh ({cells(level)} cells) needs about {need / GIB:.1f} GiB "
        f"of memory, {available / GIB:.1f} GiB available ({source}); expected {smaller}, or a "
        "machine with more memory")
