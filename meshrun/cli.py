"""Run a model from a YAML config, on one process or under mpiexec: the command line of
`run_model.py` (a thin wrapper at the repository's top) and of the installed console scripts
`meshrun` and `swm-run` (the same command). The config's `model:` picks the model from the
registry (`meshrun.models`; default shallow_water); a section of an application (sensitivity,
fourdvar) runs it instead of the forward run.

    python run_model.py configs/williamson5.yaml
    meshrun williamson5                          (a config shipped with the package, by name)
    mpiexec -n 4 python run_model.py configs/williamson2.yaml --set time.days=2
    python run_model.py configs/galewsky.yaml --print-config
    python run_model.py configs/sensitivity_williamson5.yaml              (gradients of a cost)
    python run_model.py configs/sensitivity_williamson5.yaml --check-adjoint
    mpiexec -n 2 python run_model.py configs/fourdvar_twin.yaml            (a 4D-Var twin experiment)
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import sys
import traceback

import grids
from meshrun.models import MODELS, model_of

#: The command's name in its messages: run_model.py, meshrun or swm-run, as the user typed it.
PROG = next((name for name in ("swm-run", "meshrun") if sys.argv and sys.argv[0].endswith(name)),
            "run_model.py")

def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog=PROG, description="Run a model from a YAML config, on one process or on every rank "
        "of mpiexec; with backend: cupy, one GPU per rank. The config's model key picks the model "
        "(default shallow_water: the TRiSK shallow-water model, Williamson 2/5/6, Galewsky). A "
        "config with a sensitivity section runs the model's adjoint and writes the gradients of "
        "its cost; one with a fourdvar section runs a 4D-Var twin experiment.",
        epilog="Config keys: --help-config lists every key with its type, default, range and meaning.")
    p.add_argument("config", nargs="?", help="the run's YAML config: a path, or the name of a config "
                   "shipped with the package (e.g. williamson5; --list-configs names them)")
    p.add_argument("--version", action="version", version=f"%(prog)s (meshops {grids.__version__})")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set time.days=2 --set backend=cupy "
                        "(the value read as YAML; repeatable)")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved config (defaults filled in) and exit")
    p.add_argument("--list-configs", action="store_true",
                   help="list the configs shipped with the package and exit")
    p.add_argument("--help-config", action="store_true", help="list every config key and exit "
                   "(of the model that --set model=NAME or the given config names; default "
                   "shallow_water)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--plot", action="store_true",
                   help="after the run, write PNG maps of the last output (python -m swm.plot)")
    p.add_argument("--debug", action="store_true",
                   help="show the traceback of an error (otherwise one line)")
    p.add_argument("--check-adjoint", action="store_true",
                   help="(a config with a sensitivity section) instead of the run, the whole-run "
                        "dot-product test of the tangent-linear and adjoint models and a Taylor "
                        "table of the config's cost; exit status 1 if either fails")
    return p.parse_args(argv)


#: The packages' loggers: on ranks other than 0 they say warnings and errors only.
LOGGERS = ("framework", "swm", "hydrostatic", "tracer", "adjoint", "meshrun")


def main(argv=None) -> int:
    args = parse_args(argv)
    from framework import stop

    stop.install()               # SIGTERM, SIGINT: one line and 128 + signum in every phase
    try:
        status = _main(args)
    except stop.Interrupted as exc:    # before the run (config, start-up) or while reporting
        stop.hold()
        if stop.leader():
            print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        status = 128 + exc.signum
    return _ending(status)


def _ending(status: int) -> int:
    """`status`; where a netCDF file could not be closed (a full disk: its line was said, its
    records kept), the process ends here with it, past the HDF5 library's teardown at exit, which
    crashes on a file it still holds (`grids.netcdf_files.close_dataset`)."""
    from grids.netcdf_files import datasets_left_open

    if not datasets_left_open():
        return status
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() \
            and mpi.COMM_WORLD.Get_size() == 1:
        mpi.Finalize()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _model_named_by(config) -> str | None:
    """The `model:` key of the config file (a path or a shipped name), None where it has none."""
    import yaml

    from meshrun.config import ConfigError, find_config

    path = find_config(config)
    try:
        tree = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the config's model key ({exc})") from None
    return tree.get("model") if isinstance(tree, dict) else None


def _main(args) -> int:
    from meshrun.config import (DEFAULT_MODEL, ConfigError, describe_schema, dump, load_config,
                                shipped_configs)
    from framework import stop

    if args.help_config:
        model = next((item.partition("=")[2].strip() for item in reversed(args.set)
                      if item.partition("=")[0].strip() == "model"), None)
        if model is None and args.config is not None:
            try:
                model = _model_named_by(args.config)
            except ConfigError as exc:
                print(f"{PROG}: error: {exc}", file=sys.stderr)
                return 2
        model = model or DEFAULT_MODEL
        if model not in MODELS:
            print(f"{PROG}: error: --set model={model}: unknown model; expected one of: "
                  f"{', '.join(MODELS)}", file=sys.stderr)
            return 2
        print("\n".join(describe_schema(model)))
        return 0
    if args.list_configs:
        for name, path in shipped_configs().items():
            print(f"{name:28s} {path}")
        return 0
    if args.config is None:
        print(f"{PROG}: error: give a config file or the name of a shipped one "
              f"({', '.join(shipped_configs())})", file=sys.stderr)
        return 2
    from meshops.parallel.comm import world

    comm = world()
    stop.install(comm)
    try:
        config, error = load_config(args.config, args.set), None
    except ConfigError as exc:
        config, error = None, str(exc)
    error = agree(comm, config, error)   # a config one rank refuses (its paths) stops every rank
    if error is None and args.check_adjoint:
        checked = [a for a in model_of(config).applications if a.check is not None]
        application = model_of(config).application(config)
        if application is None or application.check is None:
            error = (f"--check-adjoint: {args.config} has no "
                     f"{' or '.join(a.key for a in checked) or 'checked application'} section"
                     + "".join(f" (see {a.example})" for a in checked if a.example))
    if error is not None:
        stop.hold()
        if comm.Get_rank() == 0:
            print(f"{PROG}: error: {error}", file=sys.stderr, flush=True)
        return 2
    if args.print_config:
        if comm.Get_rank() == 0:
            print(dump(config), end="")
        return 0
    logging.basicConfig(level=config.log_level.upper(),
                        format=f"%(asctime)s rank {comm.Get_rank()}: %(message)s",
                        stream=sys.stderr)
    if comm.Get_rank() != 0:
        for name in LOGGERS:
            logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
    logging.getLogger("meshrun").info("config %s:\n%s", args.config, dump(config))
    try:
        status = run(config, args)
        model = model_of(config)
        if status == 0 and args.plot and comm.Get_rank() == 0 and model.plot is not None \
                and model.application(config) is None:
            for target in model.plot(config):
                print(f"wrote {target}")
    except (Exception, stop.Interrupted) as exc:  # noqa: BLE001 - one line, traceback with --debug
        stop.hold()
        return report(exc, comm, args.debug)
    stop.hold()
    if stop.received():          # after the last check: the run's files are complete
        if comm.Get_rank() == 0:
            print(f"{PROG}: stopped by {stop.name(stop.received())} after the run finished "
                  "(its files are complete)", file=sys.stderr, flush=True)
        return 128 + stop.received()
    return status


def agree(comm, config, error):
    """The error of the run's config that every rank reports (None when there is none): the first
    rank's config error (its rank named when the ranks' errors differ), or, when the ranks
    resolved different configs (another file, another --set), the first key whose values differ,
    with each rank's value. One allgather, before any other collective, so no rank waits in a
    collective for a rank that stopped."""
    from meshops.parallel.comm import is_serial
    from meshrun.config import dump

    if is_serial(comm):
        return error
    digest = None if config is None else hashlib.sha256(dump(config).encode()).hexdigest()
    found = comm.allgather((error, digest))
    errors = [(rank, e) for rank, (e, _) in enumerate(found) if e is not None]
    if errors:
        rank, first = errors[0]
        return first if all(e == first for _, e in errors) and len(errors) == len(found) \
            else f"rank {rank}: {first}"
    if len({d for _, d in found}) == 1:
        return None
    flats = comm.allgather(_flat(config.model_dump(mode="json")))
    key = next(k for k in flats[0] | {k: None for f in flats for k in f}
               if len({repr(f.get(k)) for f in flats}) > 1)
    values = ", ".join(f"{f.get(key)!r} on rank {rank}" for rank, f in enumerate(flats))
    return (f"the ranks resolved different configs: {key} = {values}; expected one config on "
            "every rank (the same file and --set)")


def _flat(tree: dict, prefix: str = "") -> dict:
    """{"a.b": value} of a tree of sections."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def run(config, args) -> int:
    """Run `config` as the registry says (`meshrun.models`): its application's check
    (--check-adjoint: exit status 1 when it fails), its application, or the model's forward run."""
    model = model_of(config)
    application = model.application(config)
    if args.check_adjoint:
        return 0 if application.check(config) else 1
    if application is not None:
        application.run(config, progress=not args.no_progress)
        return 0
    model.forward(config, progress=not args.no_progress, plot=args.plot)
    return 0


def report(exc, comm, debug: bool) -> int:
    """Print `exc` as one line on stderr (the traceback too with --debug) and return the exit
    status: 2 for a config or input problem, 3 for a watchdog stop, 128 + the signal number for a
    run stopped by a signal (`framework.stop`), 1 otherwise. Errors raised on every rank together are
    printed by rank 0; any other error on one rank of several ends the whole job (MPI_Abort; a
    signal that stopped rank 0 alone is printed by rank 0, and the job ends with its status)."""
    from framework.errors import ConfigError
    from framework.stop import Interrupted
    from framework.errors import WatchdogError

    collective = isinstance(exc, (ConfigError, WatchdogError)) or \
        getattr(exc, "collective", False)
    if debug:
        traceback.print_exc()
    if isinstance(exc, ConfigError):
        line, status = f"error: {exc}", 2
    elif isinstance(exc, WatchdogError):
        line, status = f"stopped: {exc}", 3
    elif isinstance(exc, Interrupted):   # stopped on rank 0 alone: every rank ends (MPI_Abort)
        line = f"{exc}; resume with --set restart.resume=true" if exc.resume else str(exc)
        status = 128 + exc.signum
    elif isinstance(exc, (ValueError, OSError)):     # bad input: meshes, files, restarts
        line, status = f"error: {_plain(exc)}", 2
    else:
        line, status = f"error: {_plain(exc)}" + ("" if debug else " (--debug shows where)"), 1
    from meshops.parallel.comm import is_serial

    several = not is_serial(comm)
    signal = isinstance(exc, Interrupted)
    if comm.Get_rank() == 0 or not (collective or signal):
        prefix = f"{PROG}: rank {comm.Get_rank()}: " if several and not (collective or signal) \
            else f"{PROG}: "
        print(prefix + line, file=sys.stderr, flush=True)
    if several and not collective:
        from meshops.parallel.comm import abort

        abort(comm, status if signal else 1)
    return status


def _plain(exc) -> str:
    """The exception's message (its type's name where the message alone would not say much)."""
    text = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, (ValueError, OSError, RuntimeError)):
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())
