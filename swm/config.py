"""The shallow-water model's config: its sections (case, time, diffusion, output, watchdog) on
the shared ones of `framework.config` (mesh, partition, restart and the YAML loading), and
`load_config`, which reads a config of this model alone (what `swm.run` runs; the command line
adds the adjoint applications' sections: `meshrun.config`).
"""
from __future__ import annotations

import math
import pathlib
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, field_validator, model_validator

from framework import config as shared
from framework.config import (MESH_INSIDE_MAX_CELLS, MIN_DT, Backend, Clobber, Dtype, FilePath,
                              LogLevel, MeshConfig, PartitionConfig, RestartConfig, Strict,
                              fixed_steps, once_each)
from framework.constants import DAY, EARTH_RADIUS, GRAVITY
from framework.errors import ConfigError
from swm.files import written_files
from swm.variables import DEFAULT_VARIABLES, OUTPUT_VARIABLES

#: Largest Courant number (|u| + sqrt(g h_edge)) dt / dcEdge of the run: RK4's imaginary-axis bound
#: 2 sqrt(2) over the TRiSK wave operator's largest frequency, about 2 (|u| + c) / dcEdge (Williamson
#: case 6, level 4: stable for 10 days at 1.41, unstable at 1.70).
CFL_LIMIT = 1.4
#: A depth (m) below the deepest cell of every case's initial state on a sphere no larger than the
#: Earth (case 2: about 2600 m at the icosahedron's nodes, the others deeper): sqrt(g 1000 m) is a
#: floor of the fastest gravity wave, so a time.cfl's dt is known to be below cfl min(dcEdge) / it.
SHALLOWEST_DEEPEST_H = 1000.0


class CaseConfig(Strict):
    name: Literal["williamson2", "williamson5", "williamson6", "galewsky"] = Field(
        description="test case: Williamson et al. 1992 cases 2, 5, 6; Galewsky et al. 2004 jet")
    alpha: float = Field(0.0, ge=-3.1416, le=3.1416, description="williamson2: rotation angle (rad)")
    perturbed: bool = Field(True, description="galewsky: add the height perturbation")

    @field_validator("alpha", "perturbed")
    @classmethod
    def _used(cls, value, info):
        """A key of another case is refused where it is given (it would be ignored); a default
        is not validated, so this runs only for keys the config sets."""
        case = {"alpha": "williamson2", "perturbed": "galewsky"}[info.field_name]
        name = info.data.get("name")
        if name is not None and name != case:
            raise ValueError(f"only case {case} uses it, not {name}; expected no "
                             f"case.{info.field_name} with case.name = {name}")
        return value


class TimeConfig(Strict):
    days: float = Field(gt=0, le=3650, description="run length (days)")
    dt: Optional[float] = Field(None, gt=0, description="time step (s); or give cfl")
    cfl: Optional[float] = Field(None, gt=0, le=CFL_LIMIT,
                                 description=f"Courant number of the fastest gravity wave, <= {CFL_LIMIT}")
    max_steps: int = Field(1_000_000, ge=1, description="the most time steps a run may take; a run "
                           "needing more (days / dt) is refused before any work")

    @model_validator(mode="after")
    def _one_step(self):
        if (self.dt is None) == (self.cfl is None):
            raise ValueError("give exactly one of time.dt (s) and time.cfl")
        return self


class DiffusionConfig(Strict):
    visc2: float = Field(0.0, ge=0, description="del2 viscosity on u (m^2/s)")
    visc4: float = Field(0.0, ge=0, description="del4 hyperviscosity on u (m^4/s)")
    apvm: float = Field(0.0, ge=0, le=1, description="APVM upwinding factor of the PV (MPAS: 0.5)")




class OutputConfig(Strict):
    path: FilePath = Field(pathlib.Path("output.nc"), description="history file (netCDF)")
    interval_hours: float = Field(24.0, gt=0, le=87600, description="output interval (hours)")
    variables: Annotated[list[Literal[OUTPUT_VARIABLES]], AfterValidator(once_each)] = Field(
        list(DEFAULT_VARIABLES), description="fields written at each output time (swm.variables)")
    mesh: Literal["auto", "inside", "reference"] = Field(
        "auto", description="the mesh in the history and gradient files (MPAS's mesh stream), or "
        "a reference to an MPAS grid file (the mesh cache's, mesh.file, or NAME.grid.nc beside "
        f"the file); auto: reference above {MESH_INSIDE_MAX_CELLS} cells (level 7 and up)")
    clobber: Clobber = "never_modify"




class WatchdogConfig(Strict):
    interval_steps: int = Field(10, ge=1, le=100000, description="steps between checks of the state "
                                "(finite values and the Courant number) on the device; a failure "
                                "writes the last checked good state")
    cfl_limit: float = Field(CFL_LIMIT, gt=0, description="largest Courant number (|u| + sqrt(g h)) "
                             "dt / dcEdge a check allows; above it the run stops")


class Config(Strict):
    """The shallow-water model's config. The adjoint applications' sections (sensitivity,
    fourdvar) are composed onto it by the command line (`meshrun.config`); `inputs` and
    `written_files` name the files a run reads and writes (an application adds its own)."""
    model: Literal["shallow_water"] = Field(
        "shallow_water", description="the model the config runs: shallow_water, this model (the "
        "command line's registry meshrun.models names every model)")
    mesh: MeshConfig
    case: CaseConfig
    time: TimeConfig
    backend: Backend = "numpy"
    dtype: Dtype = "float64"
    diffusion: DiffusionConfig = DiffusionConfig()
    partition: PartitionConfig = PartitionConfig()
    output: OutputConfig = OutputConfig()
    restart: RestartConfig = RestartConfig()
    log_level: LogLevel = "info"
    watchdog: WatchdogConfig = Field(WatchdogConfig(), description="checks of the state during a run")

    @model_validator(mode="after")
    def _steps(self):
        if self.time.cfl is not None and self.time.cfl > self.watchdog.cfl_limit:
            raise ValueError(f"time.cfl = {self.time.cfl!r} is above watchdog.cfl_limit = "
                             f"{self.watchdog.cfl_limit!r}: the watchdog would stop the run; expected "
                             "time.cfl <= watchdog.cfl_limit")
        if self.time.dt is not None:
            fixed_steps(self)
        else:
            cfl_step_bound(self)
        return self

    def inputs(self) -> list[tuple[str, pathlib.Path]]:
        """(what, path) of the files the run reads besides the config and a restart file."""
        return shared.mesh_inputs(self.mesh, self.partition)

    def written_files(self) -> list:
        """Every file the run writes, per config key (`swm.files.written_files`)."""
        return written_files(self)




def cfl_step_bound(config: Config) -> None:
    """Before a mesh is generated: refuse a time.cfl run whose dt is surely below MIN_DT or whose
    steps surely exceed time.max_steps. A generated mesh of N cells has min(dcEdge) <= 2 R
    acos(1 - 2 / N) (a Voronoi cell holds the cap of half its nearest neighbour's distance, and the
    smallest cell is at most the mean area 4 pi R^2 / N); the fastest wave is at least
    sqrt(g SHALLOWEST_DEEPEST_H) on spheres up to the Earth's. A mesh.file is checked once read."""
    generate, radius = config.mesh.generate, config.mesh.radius
    if generate is None or radius > EARTH_RADIUS:
        return
    n_cells = 10 * 4 ** generate.level + 2
    dc_edge = 2.0 * radius * math.acos(1.0 - 2.0 / n_cells)
    dt = config.time.cfl * dc_edge / math.sqrt(GRAVITY * SHALLOWEST_DEEPEST_H)
    why = (f"time.cfl = {config.time.cfl} on a level-{generate.level} mesh (smallest dcEdge at most "
           f"{dc_edge:.4g} m, mesh.radius = {radius:.6g} m) gives dt <= {dt:.3g} s")
    if dt < MIN_DT:
        raise ConfigError(f"{why}: expected dt >= {MIN_DT} s (is the mesh on a unit sphere? set "
                          "mesh.radius)")
    steps = config.time.days * DAY / dt
    if steps > config.time.max_steps:
        raise ConfigError(f"time.days = {config.time.days}: {why}, so at least {math.ceil(steps)} "
                          f"steps: expected at most time.max_steps = {config.time.max_steps}")


def load_config(path, overrides=(), schema=None) -> Config:
    """The config of YAML file `path` (or of the shipped config of that name) with `overrides`
    ("a.b=value") applied, validated against `schema` (default: this model's `Config`;
    `framework.config.load_config`)."""
    return shared.load_config(path, overrides, schema or Config)
