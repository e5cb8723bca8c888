"""Run the TRiSK shallow-water model from a YAML config, on one process or under mpiexec: the
command line of `run_model.py` (a thin wrapper at the repository's top) and of the installed
console script `swm-run`.

    python run_model.py configs/williamson5.yaml
    swm-run williamson5                          (a config shipped with the package, by name)
    mpiexec -n 4 python run_model.py configs/williamson2.yaml --set time.days=2
    python run_model.py configs/galewsky.yaml --print-config
    python run_model.py configs/sensitivity_williamson5.yaml              (gradients of a cost)
    python run_model.py configs/sensitivity_williamson5.yaml --check-adjoint
    mpiexec -n 2 python run_model.py configs/fourdvar_twin.yaml            (a 4D-Var twin experiment)
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

import grids

#: The command's name in its messages: run_model.py or swm-run, as the user typed it.
PROG = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0].endswith("swm-run") else "run_model.py"

def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog=PROG, description="Run the TRiSK shallow-water model (Williamson 2/5/6, "
        "Galewsky) from a YAML config, on one process or on every rank of mpiexec; with "
        "backend: cupy, one GPU per rank. A config with a sensitivity section runs the model's "
        "adjoint and writes the gradients of its cost; one with a fourdvar section runs a 4D-Var "
        "twin experiment.",
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
    p.add_argument("--help-config", action="store_true", help="list every config key and exit")
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


def main(argv=None) -> int:
    args = parse_args(argv)
    from swm.config import ConfigError, describe_schema, dump, load_config, shipped_configs

    if args.help_config:
        print("\n".join(describe_schema()))
        return 0
    if args.list_configs:
        for name, path in shipped_configs().items():
            print(f"{name:28s} {path}")
        return 0
    if args.config is None:
        print(f"{PROG}: error: give a config file or the name of a shipped one "
              f"({', '.join(shipped_configs())})", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config, args.set)
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        print(dump(config), end="")
        return 0
    if args.check_adjoint and config.sensitivity is None:
        print(f"{PROG}: error: --check-adjoint: {args.config} has no sensitivity section "
              "(see configs/sensitivity_williamson5.yaml)", file=sys.stderr)
        return 2
    from meshops.parallel.comm import world

    comm = world()
    logging.basicConfig(level=config.log_level.upper(),
                        format=f"%(asctime)s rank {comm.Get_rank()}: %(message)s",
                        stream=sys.stderr)
    if comm.Get_rank() != 0:
        logging.getLogger("swm").setLevel(max(logging.WARNING, logging.getLogger().level))
    logging.getLogger("swm").info("config %s:\n%s", args.config, dump(config))
    try:
        status = run(config, args)
    except Exception as exc:  # noqa: BLE001 - one line for the user, the traceback with --debug
        return report(exc, comm, args.debug)
    if status == 0 and args.plot and comm.Get_rank() == 0 and forward(config):
        from swm.plot import plot_file

        for target in plot_file(config.output.path):
            print(f"wrote {target}")
    return status


def run(config, args) -> int:
    if args.check_adjoint:
        from adjoint.sensitivity import check_adjoint

        return 0 if check_adjoint(config) else 1
    if config.sensitivity is not None:
        from adjoint.sensitivity import run_sensitivity

        run_sensitivity(config, progress=not args.no_progress)
        return 0
    if config.fourdvar is not None:
        from adjoint.fourdvar import run_fourdvar

        run_fourdvar(config)
        return 0
    from swm.driver import run as run_forward

    run_forward(config, progress=not args.no_progress, plot=args.plot)
    return 0


def forward(config) -> bool:
    """Whether `config` is a forward run (no sensitivity or fourdvar section)."""
    return config.sensitivity is None and config.fourdvar is None


def report(exc, comm, debug: bool) -> int:
    """Print `exc` as one line on stderr (the traceback too with --debug) and return the exit
    status: 2 for a config or input problem, 3 for a watchdog stop, 128 + the signal number for a
    run stopped by a signal, 1 otherwise. Errors raised on every rank together are printed by rank
    0; any other error on one rank of several ends the whole job (MPI_Abort)."""
    from swm.config import ConfigError
    from swm.simulation import Interrupted
    from swm.watchdog import WatchdogError

    collective = isinstance(exc, (ConfigError, WatchdogError, Interrupted)) or \
        getattr(exc, "collective", False)
    if debug:
        traceback.print_exc()
    if isinstance(exc, ConfigError):
        line, status = f"error: {exc}", 2
    elif isinstance(exc, WatchdogError):
        line, status = f"stopped: {exc}", 3
    elif isinstance(exc, Interrupted):
        line, status = f"{exc}; resume with --set restart.resume=true", 128 + exc.signum
    elif isinstance(exc, (ValueError, OSError)):     # bad input: meshes, files, restarts
        line, status = f"error: {_plain(exc)}", 2
    else:
        line, status = f"error: {_plain(exc)}" + ("" if debug else " (--debug shows where)"), 1
    from meshops.parallel.comm import is_serial

    several = not is_serial(comm)
    if comm.Get_rank() == 0 or not collective:
        prefix = f"{PROG}: rank {comm.Get_rank()}: " if several and not collective \
            else f"{PROG}: "
        print(prefix + line, file=sys.stderr, flush=True)
    if several and not collective:
        from meshops.parallel.comm import abort

        abort(comm)
    return status


def _plain(exc) -> str:
    """The exception's message (its type's name where the message alone would not say much)."""
    text = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, (ValueError, OSError, RuntimeError)):
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())
