"""The keys and checks of the adjoint applications that every model shares: a `sensitivity`
section (gradients of a cost, with its `checkpointing`) and a `fourdvar` twin, beside the code
that runs them (`adjoint.sensitivity`, `adjoint.fourdvar`).

Each model's applications module (`swm.applications`, `hydrostatic.applications`) subclasses
`SensitivityConfig` and `TwinConfig` with its costs, controls and observations and composes the
sections with its config into the schema of a run, with the checks and files here
(`one_application`, `cost_within_run`, `sensitivity_files`, ...), so the model's own config knows
nothing of the applications on top of it.
"""
from __future__ import annotations

import math
import pathlib
from typing import Annotated, Literal, Optional

from pydantic import BeforeValidator, Field, model_validator

from meshops.modes import ADJOINT_MODES, DEFAULT_ADJOINT_MODE
from framework.config import FilePath, FloatPair, Strict
from framework.files import (Written, beside_grid_path, convergence_plot, lock_path, may_reference,
                             observations_path)


def _snapshot_count(v):
    """A number of states (an integer >= 0) or "auto", else one error saying so."""
    if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
        return v
    raise ValueError(f"expected a number of states (an integer >= 0) or auto, got {v!r}")


#: snapshots_in_ram: an integer >= 0 or "auto".
SnapshotCount = Annotated[int | Literal["auto"], BeforeValidator(_snapshot_count)]


class BoxConfig(Strict):
    lat: FloatPair = Field((-90.0, 90.0), description="latitude range (degrees), south to north")
    lon: FloatPair = Field((0.0, 360.0), description="longitude range (degrees east); west > east "
                           "wraps through 0")

    @model_validator(mode="after")
    def _ordered(self):
        lat0, lat1 = self.lat
        if not -90.0 <= lat0 <= lat1 <= 90.0:
            raise ValueError(f"lat = {list(self.lat)}: expected -90 <= south <= north <= 90")
        if not all(math.isfinite(x) for x in self.lon):
            raise ValueError(f"lon = {list(self.lon)}: expected finite longitudes")
        return self


def consistent_cost(cost):
    """The checks of a cost section of any model (`kind`, `window_hours`, `observations`): a
    misfit has an observations file that exists, and only a misfit; a window starts at 0 or
    later and ends after it starts."""
    if (cost.kind == "misfit") != (cost.observations is not None):
        raise ValueError("cost.observations is needed with kind 'misfit', and only then")
    if cost.observations is not None and not cost.observations.is_file():
        raise ValueError(f"observations = {str(cost.observations)!r}: no such file")
    if cost.window_hours is not None and not 0 <= cost.window_hours[0] <= cost.window_hours[1]:
        raise ValueError(f"window_hours = {list(cost.window_hours)}: expected 0 <= start <= end")
    return cost


class CheckpointConfig(Strict):
    schedule: Literal["none", "revolve", "multistage", "two_level"] = Field(
        "none", description="none: every state kept in memory; revolve: snapshots_in_ram "
                            "(its schedule is slow to build beyond a few thousand steps); "
                            "multistage: binomial, in RAM and on disk; two_level: a disk snapshot every period "
                            "steps, revolve with snapshots_in_ram between them")
    snapshots_in_ram: SnapshotCount = Field(
        0, description="states kept in memory (GPU memory on CuPy); auto: as many as fit beside the "
                       "run (adjoint.snapshot_memory), the schedule none when every state fits")
    snapshots_on_disk: int = Field(0, ge=0, description="multistage: states kept on disk")
    period: int = Field(1, ge=1, description="two_level: steps between disk snapshots")
    directory: Optional[FilePath] = Field(None, description="folder for disk snapshots (none: "
                                          "the system's temporary folder)")

    @model_validator(mode="after")
    def _enough(self):
        auto = self.snapshots_in_ram == "auto"
        if auto and self.schedule == "none":
            raise ValueError("snapshots_in_ram = 'auto': schedule 'none' keeps every state; "
                             "expected schedule revolve, multistage or two_level with auto")
        if auto:
            return self
        if self.schedule in ("revolve", "two_level") and self.snapshots_in_ram < 1:
            raise ValueError(f"snapshots_in_ram = {self.snapshots_in_ram}: schedule "
                             f"{self.schedule!r} needs at least 1")
        if self.schedule == "multistage" and self.snapshots_in_ram + self.snapshots_on_disk < 1:
            raise ValueError("multistage needs snapshots_in_ram + snapshots_on_disk >= 1")
        return self


class SensitivityConfig(Strict):
    """The keys of a sensitivity run of any model (`adjoint.sensitivity`); each model's section
    narrows `cost` (its cost's keys) and `controls` (the names of its gradients)."""
    cost: Strict
    controls: list[str]
    adjoint_mode: Literal[ADJOINT_MODES] = Field(
        DEFAULT_ADJOINT_MODE, description="deterministic: bitwise reproducible gradients; atomic: "
                                     "scatter with atomics on the GPU")
    checkpointing: CheckpointConfig = CheckpointConfig()
    output: FilePath = Field(pathlib.Path("sensitivity.nc"), description="gradient file (netCDF)")
    plot: bool = Field(True, description="write PNG maps of the gradients beside the output")


class TwinConfig(Strict):
    """The keys of a 4D-Var twin of any model (`adjoint.fourdvar`); each model's section adds its
    observation errors, first-guess perturbation and background errors."""
    observation_hours: list[float] = Field([6.0, 12.0, 18.0, 24.0], min_length=1, description=
                                           "times of the observations (hours, within the run)")
    observed_fraction: float = Field(0.25, gt=0, le=1, description="fraction of the cells observed "
                                     "(a random subset, the same at every time)")
    iterations: int = Field(50, ge=1, le=10000, description="L-BFGS-B iterations at most")
    seed: int = Field(1, ge=0, description="random seed of the observation subset, the noise and "
                      "the first guess's perturbation")
    output: FilePath = Field(pathlib.Path("fourdvar.nc"), description="analysis and convergence "
                             "history (netCDF); a PNG plot beside it")


def one_application(config):
    """At most one of a run's `sensitivity` and `fourdvar` sections, and neither with
    restart.resume (the run would start at the restart's time, so a sensitivity's cost and
    gradients, or a twin's observations, would be of another time than the config says):
    ValueError saying which otherwise; `config` itself."""
    if config.sensitivity is not None and config.fourdvar is not None:
        raise ValueError("give at most one of sensitivity and fourdvar")
    if config.restart.resume and config.sensitivity is not None:
        control = config.sensitivity.controls[0]
        raise ValueError("restart.resume: a sensitivity run starts from the case's initial state "
                         f"(its gradient is dJ/d{control}0 of that state); remove restart.resume "
                         "or the sensitivity section")
    if config.restart.resume and config.fourdvar is not None:
        raise ValueError("restart.resume: a 4D-Var run starts from the case's initial state (its "
                         "truth and first guess are built from it); remove restart.resume or the "
                         "fourdvar section")
    return config


def observations_within_run(fourdvar, days: float) -> None:
    """Every fourdvar.observation_hours in [0, days] days: ValueError naming the key, the value
    and the run's length otherwise."""
    hours = days * 24.0
    for i, t in enumerate(fourdvar.observation_hours):
        if not -1e-6 <= t * 3600.0 <= hours * 3600.0 + 1e-6:
            raise ValueError(f"fourdvar.observation_hours[{i}] = {t!r}: outside the run's length "
                             f"time.days = {days:g} ({hours:g} h); expected times within "
                             f"[0, {hours:g}] h")


def fourdvar_files(fourdvar) -> list[Written]:
    """The files a 4D-Var twin writes under fourdvar.output: the analysis, the observations, their
    locks and the PNG plot."""
    owner, observations = fourdvar.output, observations_path(fourdvar.output)
    return [Written("fourdvar.output", owner, owner)] + [
        Written("fourdvar.output", owner, path, what) for what, path in (
            ("the lock file", lock_path(owner)), ("the observations file", observations),
            ("the lock file", lock_path(observations)),
            ("the PNG plot", convergence_plot(owner)))]


def cost_within_run(cost, days: float, time_variables=("time",)) -> None:
    """A cost's window and its observation file's times (`time_variables` of the file) lie in
    [0, days] (a part past the run's end would be cut from the cost): ValueError naming
    sensitivity.cost's key, the value and the run's length otherwise."""
    hours = days * 24.0
    run = f"the run's length time.days = {days:g} ({hours:g} h)"
    if cost.window_hours is not None and cost.window_hours[1] * 3600.0 > hours * 3600.0 + 1e-6:
        raise ValueError(f"sensitivity.cost.window_hours = {list(cost.window_hours)}: ends after "
                         f"{run}; expected a window within [0, {hours:g}] h")
    if cost.observations is None:
        return
    for name in time_variables:
        late = _late_observation(cost.observations, hours * 3600.0, name)
        if late is not None:
            i, t = late
            raise ValueError(f"sensitivity.cost.observations = {str(cost.observations)!r}: "
                             f"{name}[{i}] = {t:g} s is after the end of {run}; expected "
                             f"observation times within [0, {hours * 3600.0:g}] s")


def sensitivity_inputs(sensitivity) -> list[tuple[str, pathlib.Path]]:
    """(what, path) of the file a `sensitivity` section (None: no section) reads: its cost's
    observations, where it names them."""
    if sensitivity is None or sensitivity.cost.observations is None:
        return []
    return [("the observations file (sensitivity.cost.observations)",
             sensitivity.cost.observations)]


def sensitivity_files(config, maps) -> list[Written]:
    """The files a sensitivity run of `config` writes under sensitivity.output: the gradient
    file, its lock, the grid file beside it (where the output may reference one) and the PNG
    `maps` (with sensitivity.plot)."""
    owner = config.sensitivity.output
    out = [Written("sensitivity.output", owner, owner),
           Written("sensitivity.output", owner, lock_path(owner), "the lock file")]
    if may_reference(config):
        out.append(Written("sensitivity.output", owner, beside_grid_path(owner), "the grid file"))
    if config.sensitivity.plot:
        out += [Written("sensitivity.output", owner, png, "the map") for png in maps]
    return out


def _late_observation(path: pathlib.Path, seconds: float, name: str = "time"):
    """(index, time) of the first observation of file `path` after `seconds` (variable `name`),
    or None; a file or a variable that cannot be read is the cost's reader's to report
    (`adjoint.costs.read_observation_table`)."""
    import netCDF4
    import numpy as np

    try:
        with netCDF4.Dataset(path) as ds:
            time = np.ma.filled(ds.variables[name][:].astype(np.float64), np.nan).ravel()
    except (OSError, KeyError, ValueError, TypeError):
        return None
    late = np.flatnonzero(time > seconds + 1e-6)
    return None if not late.size else (int(late[0]), float(time[late[0]]))


