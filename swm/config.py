"""The run configuration: a YAML file checked against a pydantic schema before any work.

Every key has a type, a default where one makes sense, an allowed range and a description
(`python run_model.py --help-config` prints them). Unknown keys, wrong types and impossible values
stop the run with the key path, the value and what is allowed. `--set a.b=value` overrides a key
(the value read as YAML).
"""
from __future__ import annotations

import math
import pathlib
import typing
from typing import Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from swm.constants import EARTH_RADIUS

#: Largest Courant number (|u| + sqrt(g h_edge)) dt / dcEdge of the run: RK4's imaginary-axis bound
#: 2 sqrt(2) over the TRiSK wave operator's largest frequency, about 2 (|u| + c) / dcEdge (Williamson
#: case 6, level 4: stable for 10 days at 1.41, unstable at 1.70).
CFL_LIMIT = 1.4
#: Output variables the model writes (MPAS names).
OUTPUT_VARIABLES = ("h", "u", "vorticity", "divergence", "ke", "uReconstructZonal",
                    "uReconstructMeridional", "b")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GeneratedMesh(Strict):
    level: int = Field(ge=0, le=11, description="icosahedral bisection level: 10*4^level+2 cells")
    lloyd: int = Field(0, ge=0, le=10000, description="spherical Lloyd iterations toward an SCVT")
    order: Literal["morton", "hilbert"] = Field("morton", description="cell order (space-filling curve)")


class MeshConfig(Strict):
    generate: Optional[GeneratedMesh] = Field(None, description="generate an icosahedral mesh")
    file: Optional[pathlib.Path] = Field(None, description="an MPAS grid file instead")
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


class TimeConfig(Strict):
    days: float = Field(gt=0, le=3650, description="run length (days)")
    dt: Optional[float] = Field(None, gt=0, description="time step (s); or give cfl")
    cfl: Optional[float] = Field(None, gt=0, le=CFL_LIMIT,
                                 description=f"Courant number of the fastest gravity wave, <= {CFL_LIMIT}")

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
    file: Optional[pathlib.Path] = Field(None, description="partition file (method: file)")

    @model_validator(mode="after")
    def _file(self):
        if (self.method == "file") != (self.file is not None):
            raise ValueError("partition.file is needed with method 'file', and only then")
        if self.file is not None and not self.file.is_file():
            raise ValueError(f"partition.file = {str(self.file)!r}: no such file")
        return self


class OutputConfig(Strict):
    path: pathlib.Path = Field(pathlib.Path("output.nc"), description="history file (netCDF)")
    interval_hours: float = Field(24.0, gt=0, description="output interval (hours)")
    variables: list[Literal[OUTPUT_VARIABLES]] = Field(
        ["h", "u", "vorticity", "divergence", "ke", "uReconstructZonal", "uReconstructMeridional", "b"],
        description="fields written at each output time")


class RestartConfig(Strict):
    path: pathlib.Path = Field(pathlib.Path("restart.nc"), description="restart file")
    interval_hours: Optional[float] = Field(None, gt=0, description="restart interval (hours); none: off")
    resume: bool = Field(False, description="start from the restart file")


class BoxConfig(Strict):
    lat: tuple[float, float] = Field((-90.0, 90.0), description="latitude range (degrees), south "
                                     "to north")
    lon: tuple[float, float] = Field((0.0, 360.0), description="longitude range (degrees east); "
                                     "west > east wraps through 0")

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
    window_hours: Optional[tuple[float, float]] = Field(
        None, description="mean, energy: average over the steps in [start, end] hours; none: the "
                          "final time")
    observations: Optional[pathlib.Path] = Field(
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
    snapshots_in_ram: int = Field(0, ge=0, description="states kept in memory")
    snapshots_on_disk: int = Field(0, ge=0, description="multistage: states kept on disk")
    period: int = Field(1, ge=1, description="two_level: steps between disk snapshots")
    directory: Optional[pathlib.Path] = Field(None, description="folder for disk snapshots (none: "
                                              "the system's temporary folder)")

    @model_validator(mode="after")
    def _enough(self):
        if self.schedule in ("revolve", "two_level") and self.snapshots_in_ram < 1:
            raise ValueError(f"snapshots_in_ram = {self.snapshots_in_ram}: schedule "
                             f"{self.schedule!r} needs at least 1")
        if self.schedule == "multistage" and self.snapshots_in_ram + self.snapshots_on_disk < 1:
            raise ValueError("multistage needs snapshots_in_ram + snapshots_on_disk >= 1")
        return self


class SensitivityConfig(Strict):
    cost: CostConfig
    controls: list[Literal["h", "u", "b"]] = Field(["h", "u", "b"], description="gradients "
                                                   "written: initial h, initial u, topography b")
    adjoint_mode: Literal["deterministic", "atomic"] = Field(
        "deterministic", description="deterministic: bitwise reproducible gradients; atomic: "
                                     "scatter with atomics on the GPU")
    checkpointing: CheckpointConfig = CheckpointConfig()
    output: pathlib.Path = Field(pathlib.Path("sensitivity.nc"), description="gradient file (netCDF)")
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
    output: pathlib.Path = Field(pathlib.Path("fourdvar.nc"), description="analysis and "
                                 "convergence history (netCDF); a PNG plot beside it")


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

    @model_validator(mode="after")
    def _one_kind(self):
        if self.sensitivity is not None and self.fourdvar is not None:
            raise ValueError("give at most one of sensitivity and fourdvar")
        return self


class ConfigError(ValueError):
    """A config that cannot run: the message names the file, the key path, the value and what is
    allowed."""


def _set(tree: dict, path: str, value) -> None:
    keys = path.split(".")
    node = tree
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {path}: {k!r} is not a section")
    node[keys[-1]] = value


def load_config(path, overrides=()) -> Config:
    """The config of YAML file `path` with `overrides` ("a.b=value") applied, validated."""
    path = pathlib.Path(path)
    try:
        tree = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top, got {type(tree).__name__}")
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY.PATH=VALUE")
        _set(tree, key.strip(), yaml.safe_load(text))
    try:
        return Config.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_describe(path, exc)) from None


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
        else:
            msg = err["msg"].removeprefix("Value error, ")
            shown = value if not isinstance(value, dict) else "{...}"
            lines.append(f"  {key} = {shown!r}: {msg}")
    return "\n".join(lines)


def _section(annotation):
    """The section (a model class) a field of that annotation holds, or None."""
    return next((a for a in getattr(annotation, "__args__", (annotation,))
                 if isinstance(a, type) and issubclass(a, BaseModel)), None)


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
