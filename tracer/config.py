"""The tracer model's config (`model: tracer`), checked by the strict loader with one-line errors
naming the key (`meshrun.config`):

    model: tracer
    mesh: {generate: {level: 6}}
    case: {name: cosine_bell, alpha: 0.0, revolution_days: 12}
    time: {days: 12, dt: 900}
    output: {path: tracer_bell.nc, interval_hours: 24}
"""
from __future__ import annotations

import math
import pathlib
from typing import Literal

from pydantic import Field, model_validator

from tracer.shared import (Backend, Dtype, FilePath, LogLevel, MeshConfig, PartitionConfig, Strict,
                           Written, fixed_steps, mesh_inputs, partial_path)


class CaseConfig(Strict):
    name: Literal["cosine_bell"] = Field("cosine_bell", description="Williamson et al. 1992 test 1: "
                                         "a cosine bell in solid-body rotation")
    alpha: float = Field(0.0, ge=-math.pi, le=math.pi, description="angle (rad) between the "
                         "rotation axis and the pole")
    revolution_days: float = Field(12.0, gt=0, description="days per revolution (u0 = 2 pi a / T)")


class TimeConfig(Strict):
    days: float = Field(gt=0, le=3650, description="run length (days)")
    dt: float = Field(gt=0, description="time step (s), a divisor of output.interval_hours")
    max_steps: int = Field(1_000_000, ge=1, description="the most time steps a run may take")


class OutputConfig(Strict):
    path: FilePath = Field(pathlib.Path("tracer.nc"), description="history file (netCDF)")
    interval_hours: float = Field(24.0, gt=0, le=87600, description="output interval (hours)")
    clobber: Literal["never_modify", "overwrite"] = Field(
        "never_modify", description="a file already at output.path: refused, or replaced once the "
        "run has finished")


class TracerConfig(Strict):
    model: Literal["tracer"] = Field(description="the model the config runs: tracer, this one")
    mesh: MeshConfig
    case: CaseConfig = CaseConfig()
    time: TimeConfig
    backend: Backend = "numpy"
    dtype: Dtype = "float64"
    partition: PartitionConfig = PartitionConfig()
    output: OutputConfig = OutputConfig()
    max_courant: float = Field(1.0, gt=0, le=2.8, description="largest |u| dt / dcEdge a run "
                               "accepts (RK4 with centred fluxes is stable to 2.8)")
    log_level: LogLevel = "info"

    @model_validator(mode="after")
    def _steps(self):
        fixed_steps(self)
        return self

    def inputs(self) -> list[tuple[str, pathlib.Path]]:
        """(what, path) of the files the run reads besides the config."""
        return mesh_inputs(self.mesh, self.partition)

    def written_files(self) -> list:
        """The history and the partial file it is written to before its rename."""
        out = self.output.path
        return [Written("output.path", out, out),
                Written("output.path", out, partial_path(out), "the partial file")]
