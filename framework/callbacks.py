"""The callbacks and writers every model's `framework.simulation.Simulation` fires: the watchdog
(a model names its fields and its check: `Watchdog`), the progress bar, what every history
callback shares (`HistoryCallback`), the restarts and the run's files. Each has a `schedule`;
`start(sim)` and `finish(sim, outcome)` are optional (see `framework.simulation`).

A model's callbacks are one registry, `CALLBACKS` of its own module (`swm.callbacks`,
`hydrostatic.callbacks`): name -> the function that builds it from the config and the run's pieces
(`Run`). The run's files (`Files`) are not among them: the Simulation finishes them after every
callback (`Simulation.files`). A callback of one's own can also be added to a built
`sim.callbacks`.
"""
from __future__ import annotations

import queue
from dataclasses import dataclass

import numpy as np

from meshops.device.backend import array_module, to_host
from framework.constants import DAY
from framework.dates import START
from framework.errors import WatchdogError
from framework.restart import write_restart
from framework.schedules import IterationInterval


def host(a):
    """A NumPy array of `a` (a CuPy array is copied to the host)."""
    return to_host(a)


class Watchdog:
    """Checks the model's state (its `fields`) every `schedule` with `check` and keeps the last
    state that passed (references: steps make new arrays). On a failure the model is set back to
    that state and WatchdogError names the step, field, entity and place, then `advice`. With
    `check_first` the state the run starts from is checked too. A model's watchdog is a subclass
    naming its `fields` and how its `check` is called (`inspect`)."""

    fields: tuple
    check_first = False
    advice = ""

    def __init__(self, check, schedule):
        self.check, self.schedule = check, schedule
        self.good = None

    def inspect(self, model, step: int) -> None:
        """Raise WatchdogError when the model's state is out of range."""
        raise NotImplementedError

    def start(self, sim) -> None:
        if self.check_first:
            try:
                self.inspect(sim.model, sim.step)
            except WatchdogError as exc:
                which = "the restart's state" if sim.step else "the initial state"
                raise WatchdogError(f"{exc}: {which} is out of range; expected a case within the "
                                    "watchdog section's limits") from None
        self.good = self._state(sim)

    def __call__(self, sim) -> None:
        model = sim.model
        if self.good is not None and self.good[-1] == sim.step:
            return
        try:
            self.inspect(model, sim.step)
        except WatchdogError as exc:
            for name, value in zip(self.fields + ("step_count",), self.good):
                setattr(model, name, value)
            raise WatchdogError(f"{exc}; the last checked state (step {model.step_count}, day "
                                f"{model.time / DAY:.4f}) is kept{self.advice}") from None
        self.good = self._state(sim)

    def _state(self, sim) -> tuple:
        return tuple(getattr(sim.model, name) for name in self.fields) + (sim.step,)


class Progress:
    """A tqdm bar on rank 0, updated every `schedule`."""

    def __init__(self, total: int, start: int, enabled: bool, schedule=IterationInterval(10)):
        import tqdm

        self.schedule, self.shown = schedule, start
        self.bar = tqdm.tqdm(total=total, initial=start, disable=not enabled, unit="step",
                             dynamic_ncols=True)

    def __call__(self, sim) -> None:
        self.bar.update(sim.step - self.shown)
        self.shown = sim.step
        self.bar.set_postfix_str(f"day {sim.time / DAY:.2f}", refresh=False)

    def finish(self, sim, outcome) -> None:
        self(sim)
        self.bar.close()


class HostCopies:
    """Device fields copied to pinned host buffers on a copy stream, so that the step after an
    output does not wait for the copy; `depth` sets of buffers, each free again once the writer
    has written it. On NumPy the arrays are handed over as they are (steps make new arrays)."""

    def __init__(self, depth: int = 2):
        self.depth = depth
        self._free = None           # the free sets of buffers; the writer puts them back

    def copy(self, arrays: dict):
        """({name: host array}, wait, release): `wait()` before reading the host arrays,
        `release()` once they are written."""
        first = next(iter(arrays.values()))
        xp = array_module(first)
        if xp is np:
            return arrays, lambda: None, lambda: None
        import cupy
        import cupyx

        if self._free is None:
            self._stream = cupy.cuda.Stream(non_blocking=True)
            self._free = queue.SimpleQueue()
            for _ in range(self.depth):
                self._free.put({})
        buffers = self._free.get()  # waits while the writer holds every set
        ready = cupy.cuda.Event()
        ready.record()
        self._stream.wait_event(ready)
        out = {}
        for name, a in arrays.items():
            buf = buffers.get(name)
            if buf is None or buf.shape != a.shape or buf.dtype != a.dtype:
                buf = buffers[name] = cupyx.empty_pinned(a.shape, a.dtype)
            a.get(stream=self._stream, out=buf, blocking=False)
            out[name] = buf
        done = cupy.cuda.Event()
        done.record(self._stream)
        keep = [arrays]             # the device arrays live until the copy is done

        def wait():
            done.synchronize()
            keep.clear()
        return out, wait, lambda: self._free.put(buffers)


class HistoryCallback:
    """What every model's history callback shares: the record index k = time / interval of a
    time (a final state off that grid: the next record), and at the end the final state's record
    (unless written already) and the history closed: under its final name when the run finished
    or the watchdog stopped it (holding the last good state), a partial file when a signal or an
    error stopped it, removed when the run did not start. A subclass sets `history` (rank 0; None
    elsewhere), `interval` and `written_step`, and writes a record in `__call__(sim)`."""

    checked = True

    def record(self, time: float) -> int:
        k = time / self.interval
        return int(round(k)) if abs(k - round(k)) < 1e-9 * max(k, 1.0) else int(k) + 1

    def finish(self, sim, outcome) -> None:
        try:
            if outcome not in ("error", "not started") and self.written_step != sim.step:
                self(sim)
        finally:
            if self.history is not None:
                self.history.close(finished=outcome in ("finished", "watchdog"),
                                   discard=outcome == "not started")


class Files:
    """The run's writer thread and output files: `finish` waits for every queued write and
    releases the files' locks. Last in the callbacks (the writers before it queue their last
    records in their own `finish`)."""

    def __init__(self, writer, targets):
        self.writer, self.targets = writer, list(targets)
        self.schedule = _Never()

    def finish(self, sim, outcome) -> None:
        try:
            if self.writer is not None:
                self.writer.close()
        finally:
            for target in self.targets:
                target.close()


class RestartOutput:
    """Restart files every `schedule` (None: only when a run stops early, and at its end when
    `at_end`), written atomically on rank 0 from the gathered state by the writer thread.
    `state`: (name, location, variable attributes) of each field of the model's `state`.
    `saved_step`: the step the restart file holds already (a resumed run's first), not written
    again."""

    checked = True

    def __init__(self, path, distribution, fingerprint: dict, writer, schedule=None, *,
                 at_end=False, attributes: dict | None = None, saved_step: int | None = None,
                 state, start_date: str = START):
        self.path, self.distribution, self.fingerprint = path, distribution, fingerprint
        self.start_date = start_date        # the run's start date (framework.dates)
        self.writer, self.attributes, self.state = writer, attributes, tuple(state)
        self.schedule = schedule if schedule is not None else _Never()
        self.at_end = at_end
        self.saved_step = saved_step

    def __call__(self, sim) -> None:
        dist, model = self.distribution, sim.model
        fields = {name: (dist.gather(location, host(value)), location, attributes)
                  for (name, location, attributes), value in zip(self.state, model.state)}
        if dist.comm.Get_rank() == 0:
            step, dt = sim.step, model.dt
            self.writer.submit(lambda: self._write(fields, step, dt))
        self.saved_step = sim.step

    def _write(self, fields, step: int, dt: float) -> None:
        """Write the restart of `step` (on the writer thread), unless a write before it failed: the
        restart kept is then one the history holds the records up to."""
        if not self.writer.failed:
            write_restart(self.path, fields, step, dt, self.fingerprint, self.attributes,
                          self.start_date)

    def finish(self, sim, outcome) -> None:
        wanted = outcome in ("watchdog", "interrupted") or (outcome == "finished" and self.at_end)
        if wanted and self.saved_step != sim.step:
            self(sim)


class _Never:
    def due(self, step, time, dt) -> bool:
        return False


# -- what a model's callbacks are built from ----------------------------------------------------

@dataclass
class Run:
    """What a callback is built from besides the config: the run's setup (`framework.run.Setup`,
    or the model's own), its history (rank 0; None elsewhere), writer thread (rank 0), diagnostics
    (the shallow-water model's: `swm.diagnostics`), the files' global attributes, and whether a
    progress bar is wanted."""
    setup: object
    history: object
    writer: object
    diagnostics: object
    attributes: dict
    progress: bool
