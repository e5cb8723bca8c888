"""TRiSK shallow-water model on meshops operators.

    import swm
    ds = swm.run("configs/williamson5.yaml", "time.days=1")    # the history, an xarray.Dataset
"""


def run(config, *overrides, progress: bool = False):
    """Run a config (a YAML path or a `swm.config.Config`, with `overrides` such as "time.days=1")
    and return its history as an `xarray.Dataset` (loaded into memory; on every rank of an MPI job
    the same). Errors are raised as exceptions (`swm.config.ConfigError` for a bad config)."""
    import pathlib

    import xarray

    from swm.config import Config, load_config, with_overrides
    from swm.driver import run as run_config

    if not isinstance(config, Config):
        config = load_config(pathlib.Path(config), overrides)
    elif overrides:
        config = with_overrides(config, overrides)
    run_config(config, progress=progress)
    with xarray.open_dataset(config.output.path) as ds:
        return ds.load()
