"""The run configuration: a YAML file checked against a pydantic schema before any work.

Every key has a type, a default where one makes sense, an allowed range and a description
(`python run_model.py --help-config` prints them). Unknown keys, wrong types and impossible values
stop the run with the key path, the value and what is allowed. `--set a.b=value` overrides a key
(the value read as YAML).

The schema is strict: a repeated key, a boolean or a float where an integer is expected, a quoted
number, `.inf` or `.nan`, an output that would overwrite an input or another output, and an output
whose directory is missing or read-only are all refused when the config is loaded.
"""
from __future__ import annotations

import math
import os
import pathlib
import re
import typing
from typing import Annotated, Literal, Optional

import yaml
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError,
                      field_validator, model_validator)

from meshops.modes import ADJOINT_MODES, DEFAULT_ADJOINT_MODE
from swm.constants import DAY, EARTH_RADIUS, GRAVITY
from swm.variables import DEFAULT_VARIABLES, OUTPUT_VARIABLES

#: Largest Courant number (|u| + sqrt(g h_edge)) dt / dcEdge of the run: RK4's imaginary-axis bound
#: 2 sqrt(2) over the TRiSK wave operator's largest frequency, about 2 (|u| + c) / dcEdge (Williamson
#: case 6, level 4: stable for 10 days at 1.41, unstable at 1.70).
CFL_LIMIT = 1.4
#: The smallest time step a run accepts (s): below it the config is almost surely wrong (a
#: unit-sphere mesh, or a typo), and the run would take millions of steps.
MIN_DT = 1e-3
#: A depth (m) below the deepest cell of every case's initial state on a sphere no larger than the
#: Earth (case 2: about 2600 m at the icosahedron's nodes, the others deeper): sqrt(g 1000 m) is a
#: floor of the fastest gravity wave, so a time.cfl's dt is known to be below cfl min(dcEdge) / it.
SHALLOWEST_DEEPEST_H = 1000.0
#: `output.mesh: auto` keeps the mesh inside files of at most this many cells (level 6, 40962 cells,
#: about 50 MB of mesh) and references a grid file above it (level 7, 163842 cells: 200 MB).
MESH_INSIDE_MAX_CELLS = 100_000


class Strict(BaseModel):
    """No unknown keys, no coercion (an int is not read from true, 2.0 or "2"; a float is not read
    from a string, an int is a float), finite floats only."""
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


#: A path: a string (from YAML) or a pathlib.Path.
FilePath = Annotated[pathlib.Path, Field(strict=False)]
#: Two floats: a YAML list [a, b] or a tuple.
FloatPair = Annotated[tuple[float, float],
                      BeforeValidator(lambda v: tuple(v) if isinstance(v, list) else v)]



def _snapshot_count(v):
    """A number of states (an integer >= 0) or "auto", else one error saying so."""
    if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
        return v
    raise ValueError(f"expected a number of states (an integer >= 0) or auto, got {v!r}")


def _once_each(names: list) -> list:
    """`names` when none is repeated, else one error naming the first repeated one."""
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated is not None:
        raise ValueError(f"{repeated!r} is given twice; expected each name once")
    return names


#: snapshots_in_ram: an integer >= 0 or "auto".
SnapshotCount = Annotated[int | Literal["auto"], BeforeValidator(_snapshot_count)]


class GeneratedMesh(Strict):
    level: int = Field(ge=0, le=11, description="icosahedral bisection level: 10*4^level+2 cells")
    lloyd: int = Field(0, ge=0, le=10000, description="spherical Lloyd iterations toward an SCVT")
    order: Literal["morton", "hilbert"] = Field("morton", description="cell order (space-filling curve)")


class MeshConfig(Strict):
    generate: Optional[GeneratedMesh] = Field(None, description="generate an icosahedral mesh")
    file: Optional[FilePath] = Field(None, description="an MPAS grid file instead")
    radius: float = Field(EARTH_RADIUS, gt=0, description="sphere radius (m); a generated mesh uses "
                          "it, a file's geometry is scaled to it")
    recompute_geometry: bool = Field(False, description="derive lengths, areas and weights from "
                                     "positions and connectivity instead of the file's")

    @model_validator(mode="after")
    def _one_source(self):
        if (self.generate is None) == (self.file is None):
            raise ValueError("give exactly one of mesh.generate (level, lloyd, order) and mesh.file")
        if self.file is not None and not self.file.is_file():
            raise ValueError(f"mesh.file = {str(self.file)!r}: no such file")
        return self


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


class PartitionConfig(Strict):
    method: Literal["metis", "sfc", "file"] = Field("metis", description="METIS, a Hilbert curve, "
                                                    "or an MPAS graph.info.part.N file")
    file: Optional[FilePath] = Field(None, description="partition file (method: file)")

    @model_validator(mode="after")
    def _file(self):
        if (self.method == "file") != (self.file is not None):
            raise ValueError("partition.file is needed with method 'file', and only then")
        if self.file is not None and not self.file.is_file():
            raise ValueError(f"partition.file = {str(self.file)!r}: no such file")
        return self


class OutputConfig(Strict):
    path: FilePath = Field(pathlib.Path("output.nc"), description="history file (netCDF)")
    interval_hours: float = Field(24.0, gt=0, le=87600, description="output interval (hours)")
    variables: Annotated[list[Literal[OUTPUT_VARIABLES]], AfterValidator(_once_each)] = Field(
        list(DEFAULT_VARIABLES), description="fields written at each output time (swm.variables)")
    mesh: Literal["auto", "inside", "reference"] = Field(
        "auto", description="the mesh in the history and gradient files (MPAS's mesh stream), or "
        "a reference to an MPAS grid file (the mesh cache's, mesh.file, or NAME.grid.nc beside "
        f"the file); auto: reference above {MESH_INSIDE_MAX_CELLS} cells (level 7 and up)")


class RestartConfig(Strict):
    path: FilePath = Field(pathlib.Path("restart.nc"), description="restart file")
    interval_hours: Optional[float] = Field(None, gt=0, le=87600,
                                            description="restart interval (hours); none: off")
    resume: bool = Field(False, description="start from the restart file")


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


class CostConfig(Strict):
    kind: Literal["mean", "energy", "misfit"] = Field(description="area-weighted mean or energy "
                                                      "(mean of x^2 / 2) of a field in a box, or the "
                                                      "squared misfit to observations")
    field: Literal["h", "vorticity"] = Field("h", description="mean, energy: the field")
    box: BoxConfig = Field(BoxConfig(), description="mean, energy: the region (default: the globe)")
    window_hours: Optional[FloatPair] = Field(
        None, description="mean, energy: average over the steps in [start, end] hours, within the "
                          "run; none: the final time")
    observations: Optional[FilePath] = Field(
        None, description="misfit: netCDF file of cell (1-based), time (s), h (m), error (m)")

    @model_validator(mode="after")
    def _consistent(self):
        if (self.kind == "misfit") != (self.observations is not None):
            raise ValueError("cost.observations is needed with kind 'misfit', and only then")
        if self.observations is not None and not self.observations.is_file():
            raise ValueError(f"observations = {str(self.observations)!r}: no such file")
        if self.window_hours is not None and not 0 <= self.window_hours[0] <= self.window_hours[1]:
            raise ValueError(f"window_hours = {list(self.window_hours)}: expected 0 <= start <= end")
        return self


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
    cost: CostConfig
    controls: Annotated[list[Literal["h", "u", "b"]], AfterValidator(_once_each)] = Field(
        ["h", "u", "b"], description="gradients written: initial h, initial u, topography b")
    adjoint_mode: Literal[ADJOINT_MODES] = Field(
        DEFAULT_ADJOINT_MODE, description="deterministic: bitwise reproducible gradients; atomic: "
                                     "scatter with atomics on the GPU")
    checkpointing: CheckpointConfig = CheckpointConfig()
    output: FilePath = Field(pathlib.Path("sensitivity.nc"), description="gradient file (netCDF)")
    plot: bool = Field(True, description="write PNG maps of the gradients beside the output")


class FourDVarConfig(Strict):
    observation_hours: list[float] = Field([6.0, 12.0, 18.0, 24.0], min_length=1, description=
                                           "times of the observations (hours, within the run)")
    observed_fraction: float = Field(0.25, gt=0, le=1, description="fraction of the cells observed "
                                     "(a random subset, the same at every time)")
    observation_error: float = Field(1.0, gt=0, description="observation error standard deviation "
                                     "(m); the noise added to the truth")
    first_guess_amplitude: float = Field(40.0, ge=0, description="amplitude (m) of the smooth h "
                                         "perturbation of the first guess")
    background_error_h: float = Field(100.0, gt=0, description="background error of h (m)")
    background_error_u: float = Field(5.0, gt=0, description="background error of u (m/s)")
    iterations: int = Field(50, ge=1, le=10000, description="L-BFGS-B iterations at most")
    seed: int = Field(1, ge=0, description="random seed of the observation subset and noise")
    output: FilePath = Field(pathlib.Path("fourdvar.nc"), description="analysis and convergence "
                             "history (netCDF); a PNG plot beside it")


class WatchdogConfig(Strict):
    interval_steps: int = Field(10, ge=1, le=100000, description="steps between checks of the state "
                                "(finite values and the Courant number) on the device; a failure "
                                "writes the last checked good state")
    cfl_limit: float = Field(CFL_LIMIT, gt=0, description="largest Courant number (|u| + sqrt(g h)) "
                             "dt / dcEdge a check allows; above it the run stops")


class Config(Strict):
    mesh: MeshConfig
    case: CaseConfig
    time: TimeConfig
    backend: Literal["numpy", "cupy"] = Field("numpy", description="NumPy on CPU ranks, CuPy: one GPU per rank")
    dtype: Literal["float64", "float32"] = Field("float64", description="floating type of the state")
    diffusion: DiffusionConfig = DiffusionConfig()
    partition: PartitionConfig = PartitionConfig()
    output: OutputConfig = OutputConfig()
    restart: RestartConfig = RestartConfig()
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log level")
    sensitivity: Optional[SensitivityConfig] = Field(None, description="an adjoint sensitivity run: "
                                                     "forward, cost, gradients of it")
    fourdvar: Optional[FourDVarConfig] = Field(None, description="a 4D-Var twin experiment")
    watchdog: WatchdogConfig = Field(WatchdogConfig(), description="checks of the state during a run")

    @model_validator(mode="after")
    def _one_kind(self):
        if self.sensitivity is not None and self.fourdvar is not None:
            raise ValueError("give at most one of sensitivity and fourdvar")
        if self.restart.resume and self.sensitivity is not None:
            raise ValueError("restart.resume: a sensitivity run starts from the case's initial state "
                             "(its gradient is dJ/dh0 of that state); remove restart.resume or the "
                             "sensitivity section")
        if self.restart.resume and self.fourdvar is not None:
            raise ValueError("restart.resume: a 4D-Var run starts from the case's initial state (its "
                             "truth and first guess are built from it); remove restart.resume or the "
                             "fourdvar section")
        if self.time.cfl is not None and self.time.cfl > self.watchdog.cfl_limit:
            raise ValueError(f"time.cfl = {self.time.cfl!r} is above watchdog.cfl_limit = "
                             f"{self.watchdog.cfl_limit!r}: the watchdog would stop the run; expected "
                             "time.cfl <= watchdog.cfl_limit")
        if self.time.dt is not None:
            fixed_steps(self)
        else:
            cfl_step_bound(self)
        return self

    @model_validator(mode="after")
    def _costs_within_the_run(self):
        """A cost's window, a 4D-Var observation time and a misfit file's observation times lie
        in [0, time.days] (a part past the run's end would be cut from the cost)."""
        hours = self.time.days * 24.0
        run = f"the run's length time.days = {self.time.days:g} ({hours:g} h)"
        cost = None if self.sensitivity is None else self.sensitivity.cost
        if cost is not None and cost.window_hours is not None and \
                cost.window_hours[1] * 3600.0 > hours * 3600.0 + 1e-6:
            raise ValueError(f"sensitivity.cost.window_hours = {list(cost.window_hours)}: ends after "
                             f"{run}; expected a window within [0, {hours:g}] h")
        if self.fourdvar is not None:
            for i, t in enumerate(self.fourdvar.observation_hours):
                if not -1e-6 <= t * 3600.0 <= hours * 3600.0 + 1e-6:
                    raise ValueError(f"fourdvar.observation_hours[{i}] = {t!r}: outside {run}; "
                                     f"expected times within [0, {hours:g}] h")
        if cost is not None and cost.observations is not None:
            late = _late_observation(cost.observations, hours * 3600.0)
            if late is not None:
                i, t = late
                raise ValueError(f"sensitivity.cost.observations = {str(cost.observations)!r}: "
                                 f"time[{i}] = {t:g} s is after the end of {run}; expected "
                                 f"observation times within [0, {hours * 3600.0:g}] s")
        return self


def _late_observation(path: pathlib.Path, seconds: float):
    """(index, time) of the first observation of file `path` after `seconds`, or None; a file or
    a `time` that cannot be read is `adjoint.costs.read_observations`'s to report."""
    import netCDF4
    import numpy as np

    try:
        with netCDF4.Dataset(path) as ds:
            time = np.ma.filled(ds.variables["time"][:].astype(np.float64), np.nan).ravel()
    except (OSError, KeyError, ValueError, TypeError):
        return None
    late = np.flatnonzero(time > seconds + 1e-6)
    return None if not late.size else (int(late[0]), float(time[late[0]]))


def fixed_steps(config: Config) -> tuple[float, int, int]:
    """(dt, steps per output, total steps) of a config with time.dt, checked (`step_counts`):
    time.dt must divide the output interval."""
    interval = config.output.interval_hours * 3600.0
    per_output = interval / config.time.dt
    if abs(per_output - round(per_output)) > 1e-9 * per_output or round(per_output) < 1:
        raise ConfigError(f"time.dt = {config.time.dt}: expected a divisor of "
                          f"output.interval_hours = {config.output.interval_hours} h ({interval} s)")
    return step_counts(config, int(round(per_output)), f"time.dt = {config.time.dt}")


def step_counts(config: Config, per_output: int, why: str) -> tuple[float, int, int]:
    """(dt, per_output, total steps) of `per_output` steps per output interval (`why`: the
    settings that make dt, for the messages). Refused: dt below MIN_DT, time.days shorter than one
    step or not a multiple of dt, more than time.max_steps steps."""
    interval = config.output.interval_hours * 3600.0
    dt = interval / per_output
    if dt < MIN_DT:
        raise ConfigError(f"{why} gives dt = {dt:.3g} s: expected dt >= {MIN_DT} s (is the mesh "
                          "on a unit sphere? set mesh.radius)")
    total = config.time.days * DAY / dt
    if total < 1 - 1e-9:
        raise ConfigError(f"time.days = {config.time.days} is shorter than one time step dt = "
                          f"{dt:.6g} s ({why}): expected at least one step (time.days >= "
                          f"{dt / DAY:.6g})")
    if abs(total - round(total)) > 1e-9 * max(total, 1):
        raise ConfigError(f"time.days = {config.time.days}: expected a multiple of the time step "
                          f"{dt} s (output.interval_hours = {config.output.interval_hours})")
    total = int(round(total))
    if total > config.time.max_steps:
        raise ConfigError(f"time.days = {config.time.days} with dt = {dt:.6g} s ({why}) is "
                          f"{total} steps: expected at most time.max_steps = {config.time.max_steps}")
    return dt, per_output, total


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


class ConfigError(ValueError):
    """A config that cannot run: the message names the file, the key path, the value and what is
    allowed."""


class _DuplicateKey(Exception):
    """A key repeated in one YAML mapping: args (key path, line, line of the first)."""


class _Loader(yaml.SafeLoader):
    """YAML's safe loader with the YAML 1.2 core schema's plain scalars: null, true/false,
    decimal (and 0x, 0o) integers, floats with an optional exponent (1e5 too), .inf and .nan;
    anything else is a string. So 1:30 is not 90 (YAML 1.1's base 60), 010 is 10 (not octal 8),
    yes/no/on/off are strings (not booleans), and the schema refuses them where a number or a
    boolean is expected. A key repeated in a mapping is an error (not: the last one wins), and a
    number too large for a float (1e400) is an error naming its key, not infinity."""

    yaml_implicit_resolvers = {}

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        self._paths = {}
        self._record(node, ())
        return self.construct_document(node)

    def _record(self, node, path):
        """Remember the key path of every node below `node` (the first, where one is aliased)."""
        if id(node) in self._paths:
            return
        self._paths[id(node)] = path
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
                self._record(value_node, path + (key,))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._record(item, path + (i,))

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in first:
                        path = self._paths.get(id(node), ()) + (key,)
                        raise _DuplicateKey(".".join(map(str, path)), line, first[key])
                    first[key] = line
                except TypeError:                  # unhashable: the constructor's own error
                    continue
        return super().construct_mapping(node, deep=deep)

    def construct_core_int(self, node):
        text = node.value
        sign = -1 if text[0] == "-" else 1
        digits = text.lstrip("+-")
        if digits[:2] in ("0x", "0o"):
            return int(digits, 0)
        return sign * int(digits, 10)

    def construct_core_float(self, node):
        text = node.value
        if text.lower().lstrip("+-") in (".inf", ".nan"):
            return float(text.lower().replace(".", ""))
        value = float(text)
        if math.isinf(value):
            raise _Overflow(self._paths.get(id(node), ()), text, node.start_mark.line + 1)
        return value


class _Overflow(Exception):
    """A number too large for a float: args (key path, its text, line)."""


#: The YAML 1.2 core schema's plain scalars (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
for _tag, _pattern, _first in (
        ("merge", r"<<", ["<"]),
        ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
        ("bool", r"true|True|TRUE|false|False|FALSE", list("tTfF")),
        ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", list("-+0123456789")),
        ("float", r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                  r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)", list("-+.0123456789"))):
    _Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(f"^(?:{_pattern})$"), _first)
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_core_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_core_float)


def _read_yaml(text: str, where: str, prefix: tuple = ()):
    """The data of YAML `text`; ConfigError naming `where` for bad YAML, a repeated key or a number
    too large for a float (their key paths below `prefix`)."""
    try:
        return yaml.load(text, Loader=_Loader)
    except _DuplicateKey as exc:
        key, line, first = exc.args
        key = ".".join(map(str, prefix + (key,)))
        raise ConfigError(f"{where}: line {line}: duplicate key {key} (first at line {first}); "
                          "expected each key once") from None
    except _Overflow as exc:
        path, value, line = exc.args
        key = ".".join(map(str, prefix + path)) or "(top level)"
        at = "" if prefix else f" line {line}:"                 # --set: one line anyway
        raise ConfigError(f"{where}:{at} {key} = {value}: too large for a float; expected "
                          f"{_expected_number(prefix + path)}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {exc}") from None


def _set(tree: dict, path: str, value) -> None:
    keys = path.split(".")
    node = tree
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {path}: {k!r} is not a section")
    node[keys[-1]] = value


def shipped_configs() -> dict[str, pathlib.Path]:
    """The configs that ship with the package, by name (``williamson5`` -> its YAML file): in a
    wheel they sit in ``swm/configs/``, in a source checkout in the top-level ``configs/``."""
    here = pathlib.Path(__file__).resolve().parent
    for folder in (here / "configs", here.parent / "configs"):
        if folder.is_dir():
            return {p.stem: p for p in sorted(folder.glob("*.yaml"))}
    return {}


def find_config(name) -> pathlib.Path:
    """The config file `name`: a path when one exists there, else the shipped config of that name
    (``williamson5`` or ``williamson5.yaml``)."""
    path = pathlib.Path(name)
    if path.exists() or len(path.parts) > 1:
        return path
    shipped = shipped_configs()
    stem = path.stem if path.suffix in (".yaml", ".yml") else path.name
    if stem in shipped:
        return shipped[stem]
    raise ConfigError(f"{name}: no such config file, and no config of that name ships with the package "
                      f"(expected a path or one of: {', '.join(shipped) or 'none found'})")


def load_config(path, overrides=()) -> Config:
    """The config of YAML file `path` (or of the shipped config of that name, see `find_config`)
    with `overrides` ("a.b=value") applied, validated."""
    path = find_config(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read the config: not text ({exc.reason})") from None
    tree = _read_yaml(text, str(path)) or {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top, got {type(tree).__name__}")
    return validate_tree(tree, overrides, source=str(path), config_file=path)


def with_overrides(config: Config, overrides=()) -> Config:
    """`config` with `overrides` ("a.b=value") applied, validated again."""
    return validate_tree(config.model_dump(mode="json", exclude_unset=True), overrides, source="config")


#: The other models a config names with its `model` key (default shallow_water: `Config`), each
#: with the module whose `validate_tree(tree, source=, config_file=)` checks its config.
MODELS = {"hydrostatic": "hydrostatic.config"}


def validate_tree(tree: dict, overrides=(), *, source: str, config_file=None) -> Config:
    """The Config of a tree of sections with `overrides` applied; errors name `source`."""
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY.PATH=VALUE")
        _set(tree, key.strip(), _read_yaml(text, f"--set {item!r}", tuple(key.strip().split("."))))
    model = tree.pop("model", "shallow_water")
    if model != "shallow_water":                     # another model's schema (MODELS)
        if model not in MODELS:
            raise ConfigError(f"{source}: model = {model!r}: expected one of shallow_water, "
                              f"{', '.join(MODELS)}")
        import importlib

        return importlib.import_module(MODELS[model]).validate_tree(
            {"model": model, **tree}, source=source, config_file=config_file)
    try:
        config = Config.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_describe(source, exc)) from None
    problems = _path_problems(config_file, config)
    if problems:
        raise ConfigError("\n".join([f"{source}: {len(problems)} invalid setting(s):"]
                                    + [f"  {p}" for p in problems]))
    return config


def _outputs(config: Config) -> list[tuple[str, pathlib.Path]]:
    """(key, path) of every file the run writes."""
    found = [("output.path", config.output.path), ("restart.path", config.restart.path)]
    if config.sensitivity is not None:
        found.append(("sensitivity.output", config.sensitivity.output))
    if config.fourdvar is not None:
        found.append(("fourdvar.output", config.fourdvar.output))
    return found


def _inputs(path: pathlib.Path, config: Config) -> list[tuple[str, pathlib.Path]]:
    """(what, path) of every file the run reads (besides a restart file)."""
    found = [("the config file itself", path)] if path is not None else []
    if config.mesh.file is not None:
        found.append(("the mesh file (mesh.file)", config.mesh.file))
    if config.partition.file is not None:
        found.append(("the partition file (partition.file)", config.partition.file))
    if config.sensitivity is not None and config.sensitivity.cost.observations is not None:
        found.append(("the observations file (sensitivity.cost.observations)",
                      config.sensitivity.cost.observations))
    return found


def _same_file(a: pathlib.Path, b: pathlib.Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except OSError:
        return False


def directory_problem(path: pathlib.Path) -> Optional[str]:
    """Why a file cannot be written at `path` (its directory missing, not one, read-only), or None."""
    if path.is_dir():
        return "is a directory; expected a file path"
    folder = path.parent
    if not folder.exists():
        return f"directory {str(folder)!r} does not exist"
    if not folder.is_dir():
        return f"{str(folder)!r} is not a directory"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"directory {str(folder)!r} is not writable"
    if path.exists() and not os.access(path, os.W_OK):
        return "exists and is not writable"
    return None


def _path_problems(path: pathlib.Path, config: Config) -> list[str]:
    """Lines naming each output whose directory cannot take it, and each output that is an input or
    another output."""
    problems = []
    outputs = _outputs(config)
    for key, target in outputs:
        why = directory_problem(target)
        if why is not None:
            problems.append(f"{key} = {str(target)!r}: {why}")
    for i, (key, target) in enumerate(outputs):
        for what, source in _inputs(path, config):
            if _same_file(target, source):
                problems.append(f"{key} = {str(target)!r} is {what}: a run never overwrites its "
                                "inputs; expected another path")
        for other, earlier in outputs[:i]:
            if _same_file(target, earlier):
                problems.append(f"{key} = {str(target)!r} is the same file as {other} = "
                                f"{str(earlier)!r}: one would overwrite the other; expected another path")
    return problems


_KINDS = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "a list",
          dict: "a mapping", type(None): "null"}


def _describe(path, exc: ValidationError) -> str:
    lines = [f"{path}: {exc.error_count()} invalid setting(s):"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            allowed = _keys_of(err["loc"][:-1])
            lines.append(f"  {key}: unknown key (value {value!r})"
                         + (f"; expected one of: {', '.join(allowed)}" if allowed else ""))
        elif err["type"] == "missing":
            lines.append(f"  {key}: missing (required)")
        elif not err["loc"] and err["type"] == "value_error":   # the message names its keys
            lines.append(f"  {err['msg'].removeprefix('Value error, ')}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "finite_number":
                msg += f" (not .inf or .nan); expected {_expected_number(err['loc'])}"
            elif err["type"].endswith("_type") and type(value) in _KINDS:
                msg += f", got {_KINDS[type(value)]}"
                if isinstance(value, str) and err["type"] in ("int_type", "float_type"):
                    msg += " (write the number without quotes)" if _is_number(value) else \
                        f"; expected {_expected_number(err['loc'], _NUMBER[err['type']])}" + \
                        (" (YAML 1.2 has no base-60 numbers: write 1:30 as 1.5)" if ":" in value else "")
                elif isinstance(value, str) and err["type"] == "bool_type":
                    msg += "; expected true or false (YAML 1.2: yes, no, on, off are strings)"
            shown = value if not isinstance(value, dict) else "{...}"
            lines.append(f"  {key} = {shown!r}: {msg}")
    return "\n".join(lines)


_NUMBER = {"int_type": "an integer", "float_type": "a finite number"}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _section(annotation):
    """The section (a model class) a field of that annotation holds, or None."""
    return next((a for a in getattr(annotation, "__args__", (annotation,))
                 if isinstance(a, type) and issubclass(a, BaseModel)), None)


def _field_at(loc):
    """The field (a pydantic FieldInfo) at `loc` (a path of keys from the top), or None."""
    model, field = Config, None
    for part in loc:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return None
        field = model.model_fields[part]
        model = _section(field.annotation)
    return field


def _expected_number(loc, kind: str = "a finite number") -> str:
    """'a finite number > 0 and <= 3650' for the key at `loc` (its bounds, where it has any)."""
    field = _field_at(loc)
    bounds = [] if field is None else [
        f"{symbol} {getattr(m, attr)}" for m in field.metadata
        for attr, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
        if getattr(m, attr, None) is not None]
    return kind + (f" {' and '.join(bounds)}" if bounds else "")


def _keys_of(loc) -> list[str]:
    """The keys of the section at `loc` (a path of keys from the top), [] where none is found."""
    model = Config
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        model = _section(field.annotation) if field is not None else None
        if model is None:
            return []
    return list(model.model_fields)


def _type_name(annotation) -> str:
    """'one of a, b', 'float or none', 'list of ...', or the type's name."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is tuple:
        return "list of " + ", ".join(map(_type_name, args))
    if origin is typing.Literal:
        return "one of " + ", ".join(map(str, args))
    if origin is typing.Union:
        return " or ".join("none" if a is type(None) else _type_name(a) for a in args)
    if origin is list:
        return "list of " + _type_name(args[0])
    return "path" if annotation is pathlib.Path else getattr(annotation, "__name__", str(annotation))


def describe_schema(model=Config, prefix: str = "") -> list[str]:
    """One line per key: path, type, default and description."""
    lines = []
    for name, field in model.model_fields.items():
        key = prefix + name
        sub = _section(field.annotation)
        if sub is not None:
            lines.append(f"{key}: section" + (f" -- {field.description}" if field.description else ""))
            lines += describe_schema(sub, key + ".")
            continue
        default = "required" if field.is_required() else f"default {_plain(field.default)}"
        bounds = [f"{symbol} {getattr(m, attr)}" for m in field.metadata
                  for attr, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
                  if getattr(m, attr, None) is not None]
        lines.append(f"{key}: {_type_name(field.annotation)}, "
                     f"{default}{'; ' + ' '.join(bounds) if bounds else ''} -- {field.description}")
    return lines


def _plain(value):
    return str(value) if isinstance(value, pathlib.Path) else repr(value)


def dump(config: Config) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
