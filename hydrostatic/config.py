"""The hydrostatic core's config (`model: hydrostatic`): a YAML tree checked against this schema by
`framework.config.validate_tree` for that model (`meshrun.models`). Sections as the shallow-water
model's where they mean the same (mesh, partition, restart; `framework.config`):

    model: hydrostatic
    mesh: {generate: {level: 5, lloyd: 100}}
    vertical: {levels: jw06_26, nVertLevels: 26}  # wrf_hybrid: any nVertLevels, top_pa
    case: {name: jw06_baroclinic}           # jw06_steady, jw06_baroclinic, held_suarez
    time: {days: 9, dt: 720}                # start: "2000-01-01_00:00:00" (default 0000-01-01)
    diffusion: {visc4: 5.0e15}
    output: {path: jw06.nc, interval_hours: 24, variables: [...]}
    restart: {path: jw06.restart.nc, interval_hours: 24, resume: false}
    watchdog: {interval_steps: 10, max_wind: 300, min_theta: 100, max_theta: 4000}
    backend: numpy                          # or cupy
    dtype: float64                          # or float32
"""
from __future__ import annotations

import pathlib
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from framework.dates import START, parse_start

from framework.config import (MESH_INSIDE_MAX_CELLS, Backend, Clobber, Dtype, FilePath, LogLevel,
                              MeshConfig, PartitionConfig, RestartConfig, Strict, fixed_steps,
                              mesh_inputs, once_each)

from hydrostatic.levels import JW06_TOP, LEVEL_SETS, P0, SCHEMES, coefficients
from hydrostatic.terms import KINETIC_ENERGIES
from hydrostatic.testcases import CASES
from hydrostatic.variables import DEFAULT_VARIABLES, OUTPUT_VARIABLES


class VerticalConfig(Strict):
    levels: Literal[SCHEMES] = Field("jw06_26", description="hybrid A, B coefficients: jw06_26, "
                                     "the CAM3 26-level set of JW06 (p_top = 219.4 Pa); "
                                     "wrf_hybrid, WRF version 4's hybrid coordinate generated for "
                                     "nVertLevels and top_pa (hydrostatic.levels)")
    nVertLevels: int = Field(26, ge=2, description="layers (a level set's own: jw06_26 has 26)")
    top_pa: Optional[float] = Field(None, gt=0, lt=P0, description="model top (Pa) of a generated "
                                    "scheme, below the surface pressure p0 = 1e5 Pa (unset: "
                                    "219.4, JW06's)")

    @model_validator(mode="after")
    def _matches(self):
        if self.levels not in LEVEL_SETS:
            return self
        n = LEVEL_SETS[self.levels][0]
        if self.nVertLevels != n:
            raise ValueError(f"vertical.nVertLevels = {self.nVertLevels}: levels {self.levels} has "
                             f"{n} layers; expected nVertLevels: {n} (or levels: wrf_hybrid)")
        if self.top_pa is not None:
            raise ValueError(f"vertical.top_pa = {self.top_pa}: levels {self.levels} has its own "
                             f"top ({JW06_TOP:.4g} Pa); expected top_pa unset (or levels: "
                             "wrf_hybrid)")
        return self

    def coefficients(self):
        """(A in Pa, B) of these levels (`hydrostatic.levels.coefficients`)."""
        return coefficients(self.levels, self.nVertLevels, self.top_pa)


class CaseConfig(Strict):
    name: Literal[CASES] = Field(description="jw06_steady, jw06_baroclinic (Jablonowski and "
                                 "Williamson 2006), held_suarez (the JW06 state, flat surface, "
                                 "Held-Suarez 1994 forcing)")
    rotation: float = Field(0.0, ge=0, le=90, description="the JW06 cases' frame tilted by this "
                            "many degrees (Lauritzen et al. 2010; its pole at 180 E, 90 - "
                            "rotation N), Coriolis parameter included")

    @model_validator(mode="after")
    def _rotated_jw06_only(self):
        if self.rotation and self.name == "held_suarez":
            raise ValueError(f"case.rotation = {self.rotation}: held_suarez is not rotated "
                             "(its forcing follows the model's latitude); expected 0")
        return self


class DynamicsConfig(Strict):
    kinetic_energy: Literal[KINETIC_ENERGIES] = Field(
        "trisk", description="the kinetic energy on cells in the momentum equation: trisk "
        "(ke_e2c), mpas (MPAS-Atmosphere's blend, 0.625 ke_e2c + 0.375 of the vertex kinetic "
        "energy), perot (half the square of the reconstructed velocity)")
    fused: bool | None = Field(
        None, description="the RK4 stages (forward, tangent-linear and adjoint) in the fused "
        "kernels of hydrostatic/cuda (backend cupy only), the forward bitwise the operator path's "
        "in float64; false: the operator path (the reference); null (default): fused on backend "
        "cupy, the operator path on numpy")


class TimeConfig(Strict):
    start: Annotated[str, BeforeValidator(parse_start)] = Field(
        START, description="start date, YYYY-MM-DD_hh:mm:ss (MPAS's config_start_time) on the "
        "noleap calendar: the history's xtime and Time units (days since it)")
    days: float = Field(gt=0, le=3650, description="run length (days)")
    dt: float = Field(gt=0, description="time step (s), a divisor of output.interval_hours")
    max_steps: int = Field(1_000_000, ge=1, description="the most time steps a run may take")


class DiffusionConfig(Strict):
    visc2: float = Field(0.0, ge=0, description="del2 viscosity on u (m^2/s)")
    visc4: float = Field(0.0, ge=0, description="del4 hyperviscosity on u (m^4/s)")
    visc2_theta: float = Field(0.0, ge=0, description="del2 diffusion of theta (m^2/s)")
    visc4_theta: float = Field(0.0, ge=0, description="del4 diffusion of theta (m^4/s)")


class OutputConfig(Strict):
    path: FilePath = Field(pathlib.Path("history.nc"), description="history file (netCDF)")
    interval_hours: float = Field(24.0, gt=0, le=87600, description="output interval (hours)")
    variables: Annotated[list[Literal[OUTPUT_VARIABLES]], AfterValidator(once_each)] = Field(
        list(DEFAULT_VARIABLES), description="fields written at each output time "
        "(hydrostatic.variables)")
    mesh: Literal["auto", "inside", "reference"] = Field(
        "auto", description="the mesh in the history, or a reference to an MPAS grid file; auto: "
        f"reference above {MESH_INSIDE_MAX_CELLS} cells")
    clobber: Clobber = "never_modify"


class WatchdogConfig(Strict):
    interval_steps: int = Field(10, ge=1, le=100000, description="steps between checks of the state "
                                "(hydrostatic.watchdog); a failure writes the last checked state")
    max_wind: float = Field(300.0, gt=0, description="largest |u| (m/s) a check allows")
    min_theta: float = Field(100.0, gt=0, description="smallest potential temperature (K) a check "
                             "allows")
    max_theta: float = Field(4000.0, gt=0, description="largest potential temperature (K) a check "
                             "allows")

    @model_validator(mode="after")
    def _range(self):
        if not self.min_theta < self.max_theta:
            raise ValueError(f"watchdog.min_theta = {self.min_theta}: expected below "
                             f"watchdog.max_theta = {self.max_theta}")
        return self


class HydrostaticConfig(Strict):
    model: Literal["hydrostatic"]
    mesh: MeshConfig
    vertical: VerticalConfig = VerticalConfig()
    case: CaseConfig
    time: TimeConfig
    backend: Backend = "numpy"
    dtype: Dtype = "float64"
    diffusion: DiffusionConfig = DiffusionConfig()
    dynamics: DynamicsConfig = DynamicsConfig()
    partition: PartitionConfig = PartitionConfig()
    output: OutputConfig = OutputConfig()
    restart: RestartConfig = Field(RestartConfig(), description="restart files (written every "
                                   "interval_hours, at the end, and when a signal or the watchdog "
                                   "stops the run) and resuming from one, as the shallow-water "
                                   "model's")
    watchdog: WatchdogConfig = WatchdogConfig()
    log_level: LogLevel = "info"

    @model_validator(mode="after")
    def _steps(self):
        fixed_steps(self)
        if self.dynamics.fused and self.backend != "cupy":
            raise ValueError(f"dynamics.fused = true with backend = {self.backend!r}: the fused "
                             "kernels run on the GPU; expected backend: cupy, or dynamics.fused: "
                             "false")
        return self

    def inputs(self) -> list[tuple[str, pathlib.Path]]:
        """(what, path) of the files the run reads besides the config."""
        return mesh_inputs(self.mesh, self.partition)

    def written_files(self) -> list:
        """Every file the run writes, per config key (`framework.files.Written`): the history, its
        partial and lock files and the grid file beside it (`framework.files.may_reference`), the
        restart file and its lock."""
        from framework.files import (Written, beside_grid_path, lock_path, may_reference,
                                     partial_path)

        out, restart = self.output.path, self.restart.path
        files = [Written("output.path", out, out), Written("restart.path", restart, restart),
                 Written("output.path", out, partial_path(out), "the partial file"),
                 Written("output.path", out, lock_path(out), "the lock file")]
        if may_reference(self):
            files.append(Written("output.path", out, beside_grid_path(out), "the grid file"))
        return files + [Written("restart.path", restart, lock_path(restart), "the lock file")]

