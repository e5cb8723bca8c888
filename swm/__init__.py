"""TRiSK shallow-water model on meshops operators.

    import swm
    ds = swm.run("configs/williamson5.yaml", "time.days=1")    # the history, an xarray.Dataset
"""


def run(config, *overrides, progress: bool = False):
    """Run a config (a YAML path or a `swm.config.Config`, with `overrides` such as "time.days=1")
    and return its history as an `xarray.Dataset` with the mesh (loaded into memory; on every rank
    of an MPI job the same; a history that references its grid file is read with it:
    `framework.mesh_files.open_history`). Errors are raised as exceptions
    (`framework.errors.ConfigError` for a bad config)."""
    import pathlib

    from framework.config import with_overrides
    from swm.config import Config, load_config
    from swm.driver import run as run_config

    if not isinstance(config, Config):
        config = load_config(pathlib.Path(config), overrides)
    elif overrides:
        config = with_overrides(config, overrides)
    run_config(config, progress=progress)
    from framework.mesh_files import open_history

    with open_history(config.output.path) as ds:
        return ds.load()
