"""The Python entry of every registered model: `run` a config as `run_model.py` would, and get
what the run wrote as an xarray Dataset.

    import meshrun
    ds = meshrun.run("jw06_steady_l5", "mesh.generate.level=3", "time.days=1")
"""
from __future__ import annotations

import pathlib


def run(config, *overrides, progress: bool = False):
    """Run `config` (a YAML path, the name of a shipped config, or a validated config of any
    model in `meshrun.models.MODELS`) with `overrides` ("key.path=value", as `--set`) on one
    process or on every rank of an MPI job, and return what it wrote, loaded into memory: the
    history of a forward run (with its mesh, `framework.mesh_files.open_history`), the gradient file
    of a `sensitivity` run, the analysis of a `fourdvar` twin. Errors are raised (a
    `framework.errors.ConfigError` names the key of a bad config)."""
    import xarray

    from meshrun.config import load_config, validate_tree
    from meshrun.models import model_of
    from framework.mesh_files import open_history

    if isinstance(config, (str, pathlib.Path)):
        config = load_config(config, overrides)
    elif overrides:
        config = validate_tree(config.model_dump(mode="json", exclude_unset=True), overrides,
                               source="meshrun.run")
    model = model_of(config)
    application = model.application(config)
    if application is None:
        model.forward(config, progress=progress, plot=False)
        with open_history(config.output.path) as ds:
            return ds.load()
    application.run(config, progress=progress)
    with xarray.open_dataset(getattr(config, application.key).output) as ds:
        return ds.load()
