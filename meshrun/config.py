"""The full config of a run: the model's config (the one the config's `model:` key names, from the
registry `meshrun.models`) composed with the sections of the applications on top of it, loaded
with `framework.config`'s strict YAML and its one-line errors.

    from meshrun.config import load_config
    config = load_config("configs/sensitivity_williamson5.yaml", ["time.days=1"])

`swm.config.load_config` alone reads the shallow-water model's own sections (what `swm.run` runs).
"""
from __future__ import annotations

from framework import config as shared
from framework.config import dump, find_config, shipped_configs, with_overrides  # noqa: F401
from framework.errors import ConfigError  # noqa: F401
from meshrun.shallow_water import ShallowWaterConfig  # noqa: F401

__all__ = ["ConfigError", "DEFAULT_MODEL", "ShallowWaterConfig", "describe_schema", "dump", "find_config",
           "load_config", "schema_of", "shipped_configs", "validate_tree", "with_overrides"]


#: The model a config runs when it names none.
DEFAULT_MODEL = "shallow_water"


def schema_of(tree: dict, source: str = "config"):
    """The config class of the model that config `tree` names (`model:`, default shallow_water);
    ConfigError naming `source`, the value and the known models for a model not registered."""
    from meshrun.models import MODELS

    if "model" not in tree:
        others = other_models(tree)
        if others:
            name, keys = next(iter(others.items()))
            raise ConfigError(f"{source}: model: missing, so the config is read as "
                              f"{DEFAULT_MODEL}, but it has {', '.join(keys)} of model {name}; "
                              f"expected model: {name} (the models: {', '.join(MODELS)})")
    name = tree.get("model", DEFAULT_MODEL)
    if not isinstance(name, str) or name not in MODELS:
        raise ConfigError(f"{source}: model = {name!r}: unknown model; expected one of: "
                          f"{', '.join(MODELS)}")
    return MODELS[name].schema()


def other_models(tree: dict) -> dict:
    """{model: [what of `tree` only it has]} of the registered models other than DEFAULT_MODEL
    whose config has a top-level section the default model's lacks (e.g. vertical) or a case the
    default model does not know (case.name = 'jw06_baroclinic'), as `tree` gives them."""
    from meshrun.models import MODELS

    default = MODELS[DEFAULT_MODEL].schema()
    found = {}
    for name, model in MODELS.items():
        if name == DEFAULT_MODEL:
            continue
        schema = model.schema()
        keys = [k for k in tree if k in schema.model_fields and k not in default.model_fields]
        case = tree.get("case")
        case = case.get("name") if isinstance(case, dict) else None
        if isinstance(case, str) and case in _case_names(schema) \
                and case not in _case_names(default):
            keys.append(f"case.name = {case!r}")
        if keys:
            found[name] = keys
    return found


def _case_names(schema) -> tuple:
    """The case names a config class accepts (its case.name's choices)."""
    import typing

    case = shared.section(schema.model_fields["case"].annotation)
    annotation = case.model_fields["name"].annotation
    return typing.get_args(annotation)


def load_config(path, overrides=()):
    """The config of YAML file `path` (a path or a shipped config's name) with `overrides`
    ("a.b=value"), validated against the schema of the model it names."""
    return shared.load_config(path, overrides, schema_of)


def validate_tree(tree: dict, overrides=(), *, source: str, config_file=None):
    """`framework.config.validate_tree` against the schema of the model that `tree` names."""
    return shared.validate_tree(tree, overrides, source=source, config_file=config_file,
                              schema=schema_of)


def describe_schema(model: str = DEFAULT_MODEL) -> list[str]:
    """One line per key of `model`'s config: path, type, default, range and description."""
    from meshrun.models import MODELS

    return shared.describe_schema(MODELS[model].schema())
