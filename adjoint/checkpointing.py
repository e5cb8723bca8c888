"""The reverse sweep of a time-stepping model driven by a `checkpoint_schedules` schedule.

A run of N steps x_{k+1} = M(x_k) with a cost J = sum_k J_k(x_k) has the adjoint recursion

    lambda_N = dJ_N/dx_N,    lambda_k = M'(x_k)^T lambda_{k+1} + dJ_k/dx_k   (k = N-1, ..., 0)

and dJ/dx_0 = lambda_0. M'(x_k)^T needs x_k, the state at the start of step k. Storing every x_k
costs N states; a schedule (Revolve, multistage, two-level with disk snapshots) stores a few and
recomputes the rest from them. The schedule's actions are carried out here:

    Forward(n0, n1, write_ics, write_adj_deps, storage)   advance n0 -> n1; keep x_n0 as a
        snapshot in `storage` (write_ics) and every x_k, n0 <= k < n1, for the reverse sweep
        (write_adj_deps)
    Reverse(n1, n0, clear)   lambda_n1 -> lambda_n0 from the kept x_k
    Copy / Move(n, from, to)   a snapshot to another storage (to WORK: restart the forward from it)
    EndForward / EndReverse

The forward recomputation is the same arithmetic on the same state, so a checkpointed gradient
is bitwise the stored-trajectory gradient. The adjoint of step k reads x_k only (it recomputes the
step's stages), so the step x_k -> x_{k+1} that a schedule runs just before reversing step k is
skipped. When the number of snapshots in memory is known, they are copied into slots of one slab
per field allocated before the first step (`_MemoryStore`): their memory is taken at once, fails
before any step if it is not there, and is never interleaved with a step's temporaries (no pool
fragmentation over thousands of snapshots). Disk snapshots are one `.npz` file per rank and step
(fields copied to the host and back), deleted when the sweep ends.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from checkpoint_schedules import (Copy, EndForward, EndReverse, Forward, Move,
                                  MultistageCheckpointSchedule, Reverse, Revolve,
                                  SingleMemoryStorageSchedule, StorageType,
                                  TwoLevelCheckpointSchedule)

from grids.atomic import atomic_path
from meshops.device.backend import array_module, to_host

SCHEDULES = ("none", "revolve", "multistage", "two_level")


def make_schedule(name: str, n_steps: int, *, snapshots_in_ram: int = 0,
                  snapshots_on_disk: int = 0, period: int = 0):
    """The checkpoint_schedules schedule `name` for an n_steps run:

    none        every state of the run kept in memory (no recomputation)
    revolve     Revolve with `snapshots_in_ram` snapshots (Griewank and Walther 2000)
    multistage  `snapshots_in_ram` in memory and `snapshots_on_disk` on disk (Stumm and Walther 2009)
    two_level   a disk snapshot every `period` steps, Revolve with `snapshots_in_ram` between them
    """
    if name == "none":
        return SingleMemoryStorageSchedule()
    if name == "revolve":
        return Revolve(n_steps, snapshots_in_ram)
    if name == "multistage":
        return MultistageCheckpointSchedule(n_steps, snapshots_in_ram, snapshots_on_disk)
    if name == "two_level":
        return TwoLevelCheckpointSchedule(period, snapshots_in_ram,
                                          binomial_storage=StorageType.RAM)
    raise ValueError(f"checkpoint schedule {name!r}: expected one of {', '.join(SCHEDULES)}")


@dataclass
class SweepStats:
    """What a gradient cost: forward steps taken (the first pass included), of which recomputed,
    and the most states held in memory at once (snapshots, kept states and the current state)
    and on disk; `memory`: what the checkpointing's memory plan chose (`adjoint.snapshot_memory`)."""
    n_steps: int
    forward_steps: int = 0
    max_states_in_memory: int = 0
    max_states_on_disk: int = 0
    memory: str = ""

    @property
    def recomputed(self) -> int:
        return self.forward_steps - self.n_steps


class _MemoryStore:
    """Snapshots in memory: copied into `slots` preallocated slots (one slab of shape
    (slots,) + field.shape per field, allocated by `reserve`), further ones into copies of their
    own."""

    def __init__(self, slots: int | None):
        self.slots, self.free, self.held, self.in_slot = slots, [], {}, set()

    def reserve(self, state: Sequence) -> None:
        if self.slots:
            slabs = [array_module(a).empty((self.slots,) + a.shape, a.dtype) for a in state]
            self.free = [[slab[i] for slab in slabs] for i in range(self.slots - 1, -1, -1)]

    def put(self, n: int, state: Sequence) -> None:
        if n in self.held:
            self.delete(n)
        if self.free:
            slot = self.held[n] = self.free.pop()
            self.in_slot.add(n)
            for target, a in zip(slot, state):
                target[...] = a
        else:
            self.held[n] = [a.copy() for a in state]

    def get(self, n: int) -> list:
        return [a.copy() for a in self.held[n]]

    def delete(self, n: int) -> None:
        slot = self.held.pop(n)
        if n in self.in_slot:
            self.in_slot.discard(n)
            self.free.append(slot)

    def __contains__(self, n: int) -> bool:
        return n in self.held

    def __len__(self) -> int:
        return len(self.held)


class SnapshotError(OSError):
    """A disk snapshot that could not be written: the message names the file, the config key of
    its folder, what went wrong and what was kept."""


class _DiskStore:
    """Snapshots as .npz files of one rank in `directory` (a fresh folder inside it), each written
    atomically (`grids.atomic`); `key`: the config key that chose `directory` (in errors)."""

    def __init__(self, directory, rank: int, key: str = "checkpointing.directory"):
        base = pathlib.Path(directory or tempfile.gettempdir())
        self.key, self.base, self.chosen = key, base, directory is not None
        base.mkdir(parents=True, exist_ok=True)
        self.folder = pathlib.Path(tempfile.mkdtemp(prefix=f"snapshots-rank{rank}-", dir=base))
        self.steps: set[int] = set()

    def put(self, n: int, state: Sequence) -> None:
        xp_names = [type(a).__module__.split(".")[0] for a in state]
        host = [to_host(a) for a in state]
        path = self.folder / f"{n}.npz"
        try:
            with atomic_path(path) as tmp, open(tmp, "wb") as file:
                np.savez(file, *host, modules=np.array(xp_names))
        except OSError as exc:
            raise self._error(path, n, exc, sum(a.nbytes for a in host)) from None
        self.steps.add(n)

    def _error(self, path, n: int, exc: OSError, size: int) -> SnapshotError:
        """The one-line error of the failed write of snapshot `path` (of step `n`, `size` bytes)."""
        from framework.output import space_problem

        problem = space_problem(exc, path) or exc.strerror or str(exc)
        given = repr(str(self.base)) if self.chosen else "unset (the system's temporary folder)"
        return SnapshotError(
            f"{self.key} = {given}: writing the disk snapshot {path} (the state of step {n}) "
            f"failed: {problem}; the sweep stops and its snapshots are removed (expected room "
            f"for {size} bytes a snapshot in {self.base}: free some space or choose another "
            f"{self.key})")

    def get(self, n: int) -> list:
        with np.load(self.folder / f"{n}.npz") as data:
            modules = list(data["modules"])
            arrays = [data[f"arr_{i}"] for i in range(len(modules))]
        if "cupy" in modules:
            import cupy

            arrays = [cupy.asarray(a) if m == "cupy" else a for a, m in zip(arrays, modules)]
        return arrays

    def delete(self, n: int) -> None:
        os.remove(self.folder / f"{n}.npz")
        self.steps.discard(n)

    def __contains__(self, n: int) -> bool:
        return n in self.steps

    def __len__(self) -> int:
        return len(self.steps)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def reverse_sweep(schedule, n_steps: int, state0: Sequence, *,
                  forward: Callable[[Sequence], Sequence],
                  adjoint: Callable[[Sequence, Sequence], Sequence],
                  cost_value: Callable[[int, Sequence], float],
                  cost_gradient: Callable[[int, Sequence], Sequence | None],
                  disk_directory=None, rank: int = 0, disk_key: str = "checkpointing.directory",
                  on_step: Callable[[str], None] | None = None, memory_slots: int | None = None):
    """(J, lambda_0, stats) of the run of `n_steps` steps from `state0` under `schedule`.

    `forward(x_k) -> x_{k+1}` (new arrays); `adjoint(x_k, lambda_{k+1}) -> lambda_k` without the
    cost term; `cost_value(k, x_k)` is J_k (0 where J has no term); `cost_gradient(k, x_k)` is
    dJ_k/dx_k as a list of arrays, or None where J has no term at step k. `on_step(kind)`, when
    given, is called after every step: kind "forward" (the first pass), "recompute" or "adjoint".
    `memory_slots`: the snapshots the schedule keeps in memory at most, reserved before the first
    step (None: copies made as they come). `disk_directory`: the folder of the disk snapshots
    (None: the system's temporary folder), chosen by config key `disk_key` (named when a snapshot
    cannot be written: `SnapshotError`).
    """
    copy = lambda state: [a.copy() for a in state]  # noqa: E731
    snapshots = {StorageType.RAM: _MemoryStore(memory_slots), StorageType.DISK: None}
    snapshots[StorageType.RAM].reserve(state0)
    kept: dict[int, list] = {}                       # x_k for the reverse sweep
    stats = SweepStats(n_steps)
    state, at = copy(state0), 0
    cost, lam, first_pass = 0.0, None, True

    def disk():
        if snapshots[StorageType.DISK] is None:
            snapshots[StorageType.DISK] = _DiskStore(disk_directory, rank, disk_key)
        return snapshots[StorageType.DISK]

    def store(storage, n, x):
        (disk() if storage == StorageType.DISK else snapshots[storage]).put(n, x)

    def load(storage, n):
        return (disk() if storage == StorageType.DISK else snapshots[storage]).get(n)

    def count():
        on_disk = len(snapshots[StorageType.DISK] or ())
        stats.max_states_in_memory = max(stats.max_states_in_memory,
                                         len(snapshots[StorageType.RAM]) + len(kept) + 1)
        stats.max_states_on_disk = max(stats.max_states_on_disk, on_disk)

    pending = False                   # True: `state` is x_{at-1}, x_at = forward(state) not yet run

    def current():
        nonlocal state, pending
        if pending:
            state, pending = forward(state), False
            stats.forward_steps += 1
            count()
            if on_step is not None:
                on_step("forward" if first_pass else "recompute")
        return state

    try:
        for action in schedule:
            if isinstance(action, Forward):
                if at != action.n0:
                    raise RuntimeError(f"checkpoint schedule: Forward from step {action.n0}, "
                                       f"the state is at step {at}")
                n1 = min(action.n1, n_steps)
                if action.write_ics:
                    store(action.storage, action.n0, current())
                for k in range(action.n0, n1):
                    current()
                    if action.write_adj_deps:
                        kept[k] = state
                    if first_pass:
                        cost += cost_value(k, state)
                    # x_{k+1} is computed when it is needed: not at all when the reverse sweep of
                    # step k follows, which reads x_k only.
                    pending = True
                at = n1
                if schedule.max_n is None and n1 == n_steps and first_pass:
                    schedule.finalize(n_steps)
            elif isinstance(action, EndForward):
                cost += cost_value(n_steps, current())
                lam = cost_gradient(n_steps, state)
                if lam is None:
                    lam = [a * 0 for a in state]
                first_pass = False
            elif isinstance(action, Reverse):
                for k in range(action.n1 - 1, action.n0 - 1, -1):
                    lam = list(adjoint(kept[k], lam))
                    extra = cost_gradient(k, kept[k])
                    if extra is not None:
                        lam = [a + b for a, b in zip(lam, extra)]
                    if on_step is not None:
                        on_step("adjoint")
                if action.clear_adj_deps:
                    kept.clear()
            elif isinstance(action, (Copy, Move)):
                x = load(action.from_storage, action.n)
                if action.to_storage == StorageType.WORK:
                    state, at, pending = x, action.n, False
                else:
                    store(action.to_storage, action.n, x)
                if isinstance(action, Move):
                    (disk() if action.from_storage == StorageType.DISK
                     else snapshots[action.from_storage]).delete(action.n)
                count()
            elif isinstance(action, EndReverse):
                break
            else:
                raise RuntimeError(f"checkpoint schedule: unexpected action {action}")
    finally:
        if snapshots[StorageType.DISK] is not None:
            snapshots[StorageType.DISK].close()
    return cost, lam, stats


__all__ = ["SCHEDULES", "make_schedule", "reverse_sweep", "SweepStats"]
