"""What every model's run configuration shares: a YAML file checked against a model's pydantic
schema (its config class, e.g. `swm.config.Config`) before any work, and the sections and key
types the models have in common (mesh, partition, restart; backend, dtype, log level, clobber).

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
import stat
import typing
from typing import Annotated, Literal, Optional

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from framework.constants import DAY, EARTH_RADIUS
from framework.errors import ConfigError  # noqa: F401 - the error of every config check here

#: The smallest time step a run accepts (s): below it the config is almost surely wrong (a
#: unit-sphere mesh, or a typo), and the run would take millions of steps.
MIN_DT = 1e-3
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
#: The top-level keys every model's config has (`backend: Backend = "numpy"`, the default there).
Backend = Annotated[Literal["numpy", "cupy"],
                    Field(description="NumPy on CPU ranks, CuPy: one GPU per rank")]
Dtype = Annotated[Literal["float64", "float32"], Field(description="floating type of the state")]
LogLevel = Annotated[Literal["debug", "info", "warning", "error"], Field(description="log level")]
#: What a run does with a history or restart file already at its path (MPAS's clobber_mode).
CLOBBER_MODES = ("never_modify", "overwrite", "append")
Clobber = Annotated[Literal[CLOBBER_MODES], Field(
    description="a history or restart file already there (MPAS's clobber_mode): never_modify "
    "(refused: a new run writes nothing over it), overwrite (replaced once the new run's file is "
    "complete), append (continued by a resumed run, restart.resume: true). A resumed run always "
    "continues the history of the run it resumes")]


def once_each(names: list) -> list:
    """`names` when none is repeated, else one error naming the first repeated one."""
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated is not None:
        raise ValueError(f"{repeated!r} is given twice; expected each name once")
    return names


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


def mesh_inputs(mesh: MeshConfig, partition: PartitionConfig) -> list[tuple[str, pathlib.Path]]:
    """(what, path) of the files a run reads for its mesh: the mesh file (mesh.file) and the
    partition file (partition.file), each where the config names one."""
    return [(what, path) for what, path in (("the mesh file (mesh.file)", mesh.file),
                                            ("the partition file (partition.file)",
                                             partition.file)) if path is not None]


class RestartConfig(Strict):
    path: FilePath = Field(pathlib.Path("restart.nc"), description="restart file")
    interval_hours: Optional[float] = Field(None, gt=0, le=87600,
                                            description="restart interval (hours); none: off")
    resume: bool = Field(False, description="start from the restart file")


def fixed_steps(config) -> tuple[float, int, int]:
    """(dt, steps per output, total steps) of any model's config with time.dt (time.days,
    time.max_steps and output.interval_hours beside it), checked (`step_counts`): time.dt must
    divide the output interval."""
    interval = config.output.interval_hours * 3600.0
    per_output = interval / config.time.dt
    if abs(per_output - round(per_output)) > 1e-9 * per_output or round(per_output) < 1:
        raise ConfigError(f"time.dt = {config.time.dt}: expected a divisor of "
                          f"output.interval_hours = {config.output.interval_hours} h ({interval} s)")
    return step_counts(config, int(round(per_output)), f"time.dt = {config.time.dt}")


def step_counts(config, per_output: int, why: str) -> tuple[float, int, int]:
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


def _read_yaml(text: str, where: str, schema, prefix: tuple = (), tree=None):
    """The data of YAML `text`; ConfigError naming `where` for bad YAML, a repeated key or a number
    too large for a float (their key paths below `prefix`; the expected number from `schema`, see
    `validate_tree`, for the config `tree` that `text` sets a key of, or that `text` is)."""
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
        try:                     # the bounds of the config's own schema (of the model it names)
            model = _schema_of(schema, tree if prefix else _read_lenient(text), where)
        except ConfigError:
            model = _schema_of(schema, {}, where)      # the default model's
        raise ConfigError(f"{where}:{at} {key} = {value}: too large for a float; expected "
                          f"{_expected_number(prefix + path, model)}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {exc}") from None


class _Lenient(_Loader):
    """`_Loader` reading a number too large for a float as infinity (to find a config's model
    before its overflow is reported)."""

    def construct_core_float(self, node):
        try:
            return super().construct_core_float(node)
        except _Overflow:
            return math.inf


_Lenient.add_constructor("tag:yaml.org,2002:float", _Lenient.construct_core_float)


def _read_lenient(text: str) -> dict:
    try:
        tree = yaml.load(text, Loader=_Lenient)
    except (yaml.YAMLError, _DuplicateKey):
        return {}
    return tree if isinstance(tree, dict) else {}


def _schema_of(schema, tree, source: str):
    """The config class of `tree`: `schema` itself (a class), or the class that
    `schema(tree, source)` picks (a registry of models: the command line's `meshrun.config`)."""
    if isinstance(schema, type):
        return schema
    return schema(tree if isinstance(tree, dict) else {}, source)


def _set(tree: dict, path: str, value) -> None:
    keys = path.split(".")
    node = tree
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {path}: {k!r} is not a section")
    node[keys[-1]] = value


#: The package the shipped configs install as (pyproject.toml maps the top-level configs/ to it).
CONFIGS_PACKAGE = "meshrun.configs"


def shipped_configs() -> dict[str, pathlib.Path]:
    """The configs that ship with the package, by name (``williamson5`` -> its YAML file): in a
    wheel they sit in CONFIGS_PACKAGE's folder, in a source checkout in the top-level ``configs/``."""
    top = pathlib.Path(__file__).resolve().parent.parent
    for folder in (top.joinpath(*CONFIGS_PACKAGE.split(".")), top / "configs"):
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


def load_config(path, overrides, schema) -> Strict:
    """The config of YAML file `path` (or of the shipped config of that name, see `find_config`)
    with `overrides` ("a.b=value") applied, validated against `schema` (`validate_tree`)."""
    path = find_config(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read the config: not text ({exc.reason})") from None
    tree = _read_yaml(text, str(path), schema) or {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top, got {type(tree).__name__}")
    return validate_tree(tree, overrides, source=str(path), config_file=path, schema=schema)


def with_overrides(config: Strict, overrides=()) -> Strict:
    """`config` with `overrides` ("a.b=value") applied, validated again (by its own class)."""
    return validate_tree(config.model_dump(mode="json", exclude_unset=True), overrides,
                         source="config", schema=type(config))


def validate_tree(tree: dict, overrides=(), *, source: str, schema, config_file=None) -> Strict:
    """The config of a tree of sections with `overrides` applied; errors name `source`. `schema`:
    the config class (a model's alone, e.g. `swm.config.Config`), or a function
    (tree, source) -> the class of the model the tree names (`meshrun.config.schema_of`)."""
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY.PATH=VALUE")
        _set(tree, key.strip(), _read_yaml(text, f"--set {item!r}", schema,
                                           tuple(key.strip().split(".")), tree))
    model = _schema_of(schema, tree, source)
    try:
        config = model.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_describe(source, exc, model)) from None
    problems = _path_problems(config_file, config)
    if problems:
        raise ConfigError("\n".join([f"{source}: {len(problems)} invalid setting(s):"]
                                    + [f"  {p}" for p in problems]))
    return config


def _inputs(path: pathlib.Path, config: Strict) -> list[tuple[str, pathlib.Path]]:
    """(what, path) of every file the run reads (besides a restart file)."""
    return ([("the config file itself", path)] if path is not None else []) + config.inputs()


def _same_file(a: pathlib.Path, b: pathlib.Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except OSError:
        return False


def directory_problem(path: pathlib.Path) -> Optional[str]:
    """Why a file cannot be written at `path` (not a regular file, its directory missing, not one,
    read-only), or None."""
    problem = kind_problem(path)
    if problem is not None:
        return problem
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


def kind_problem(path: pathlib.Path) -> Optional[str]:
    """Why `path` cannot be written as a file: something there that is not a regular file (a
    directory, a FIFO, a device, a socket: a write would fail or block), or None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    return f"is {kind}; expected a regular file or a new path"


def _path_problems(path: pathlib.Path, config: Strict) -> list[str]:
    """Lines naming each output whose directory cannot take it, each file of the run that is not a
    regular file, and each file of the run (`config.written_files()`) that is an input or another
    file of the run."""
    problems = []
    written = config.written_files()
    for file in written:
        why = directory_problem(file.path) if file.what is None else kind_problem(file.path)
        if why is not None:
            problems.append(f"{file.describe()}: {why}")
    for i, file in enumerate(written):
        for what, source in _inputs(path, config):
            if file.what != "the grid file" and _same_file(file.path, source):
                problems.append(f"{file.describe()} is {what}: a run never overwrites its "
                                "inputs; expected another path")
        for earlier in written[:i]:
            if None not in (file.what, earlier.what) and _same_file(file.owner, earlier.owner):
                continue                    # the owners' collision is reported
            if _same_file(file.path, earlier.path):
                problems.append(f"{file.describe()} is the same file as {earlier.describe()}: one "
                                "would overwrite the other; expected another path")
    return problems


_KINDS = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "a list",
          dict: "a mapping", type(None): "null"}


def _describe(path, exc: ValidationError, schema) -> str:
    lines = [f"{path}: {exc.error_count()} invalid setting(s):"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            allowed = _keys_of(err["loc"][:-1], schema)
            lines.append(f"  {key}: unknown key (value {value!r})"
                         + (f"; expected one of: {', '.join(allowed)}" if allowed else ""))
        elif err["type"] == "missing":
            lines.append(f"  {key}: missing (required)")
        elif not err["loc"] and err["type"] == "value_error":   # the message names its keys
            lines.append(f"  {err['msg'].removeprefix('Value error, ')}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "finite_number":
                msg += f" (not .inf or .nan); expected {_expected_number(err['loc'], schema)}"
            elif err["type"].endswith("_type") and type(value) in _KINDS:
                msg += f", got {_KINDS[type(value)]}"
                if isinstance(value, str) and err["type"] in ("int_type", "float_type"):
                    msg += " (write the number without quotes)" if _is_number(value) else \
                        f"; expected {_expected_number(err['loc'], schema, _NUMBER[err['type']])}" + \
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


def section(annotation):
    """The section (a model class) a field of that annotation holds, or None."""
    return next((a for a in getattr(annotation, "__args__", (annotation,))
                 if isinstance(a, type) and issubclass(a, BaseModel)), None)


def _field_at(loc, schema):
    """The field (a pydantic FieldInfo) at `loc` (a path of keys from the top of `schema`), or
    None."""
    model, field = schema, None
    for part in loc:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return None
        field = model.model_fields[part]
        model = section(field.annotation)
    return field


def _expected_number(loc, schema, kind: str = "a finite number") -> str:
    """'a finite number > 0 and <= 3650' for the key at `loc` (its bounds, where it has any)."""
    field = _field_at(loc, schema)
    bounds = [] if field is None else [
        f"{symbol} {getattr(m, attr)}" for m in field.metadata
        for attr, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
        if getattr(m, attr, None) is not None]
    return kind + (f" {' and '.join(bounds)}" if bounds else "")


def _keys_of(loc, schema) -> list[str]:
    """The keys of the section at `loc` (a path of keys from the top of `schema`), [] where none
    is found."""
    model = schema
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        model = section(field.annotation) if field is not None else None
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


def describe_schema(model, prefix: str = "") -> list[str]:
    """One line per key: path, type, default and description."""
    lines = []
    for name, field in model.model_fields.items():
        key = prefix + name
        sub = section(field.annotation)
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


def dump(config: Strict) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
