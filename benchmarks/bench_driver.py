"""The model as users run it against the step it is built on, in one process and one call:

    python benchmarks/bench_driver.py configs/williamson5_l9_gpu.yaml --set time.days=1 \
        [--dtypes float64 float32] [--levels 8 9 10] [--json out.json]
    python benchmarks/bench_driver.py configs/jw06_baroclinic_l9_gpu.yaml --set time.days=0.05 \
        --set output.interval_hours=0.6 [--set dynamics.fused=false]

For each (level, dtype): `run_model.py CONFIG` as a subprocess (with --cold first on an empty mesh
cache, then `--repeat` times cached), its wall time, its start-up (until the first step), its
stepping rate, the time to finish its files and its GPU memory, from its own log; then the bare
RK4 step of the same model (the config's model's driver `setup`, shallow-water or hydrostatic:
same mesh, dt and kernels) timed in this process, the best of three runs of as many steps. The
ratio driver rate / step rate (the fastest of each) is the target (>= 0.9).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from meshrun.config import load_config  # noqa: E402

READY = re.compile(r"ready to step in ([0-9.]+) s")
MEMORY = re.compile(r"device memory: ([0-9.]+) GiB held")
RATE = re.compile(r"(\d+) steps in ([0-9.]+) s \(([0-9.]+) steps/s, ([0-9.]+) simulated days per "
                  r"hour\); output .* \(files finished in ([0-9.]+) s\)")


def mpiexec(ranks: int) -> list:
    """The launcher prefix for `ranks` processes ([] for one)."""
    if ranks == 1:
        return []
    beside = pathlib.Path(sys.executable).parent / "mpiexec"
    return [str(beside) if beside.exists() else "mpiexec", "-n", str(ranks)]


def run_model(config_path, overrides, env, ranks: int = 1) -> dict:
    """Wall time, start-up and stepping rate of `run_model.py` (from its log)."""
    args = mpiexec(ranks) + [sys.executable, str(ROOT / "run_model.py"), str(config_path),
                             "--no-progress"]
    for item in overrides:
        args += ["--set", item]
    t0 = time.perf_counter()
    out = subprocess.run(args, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    ready, rate = READY.search(out.stderr), RATE.search(out.stderr)
    memory = MEMORY.search(out.stderr)
    return {"wall_s": wall, "log": out.stderr[-2500:], "startup_s": float(ready.group(1)),
            "device_gib": float(memory.group(1)) if memory else None,
            "steps": int(rate.group(1)),
            "loop_s": float(rate.group(2)), "driver_steps_per_s": float(rate.group(3)),
            "simulated_days_per_hour": float(rate.group(4)), "finish_s": float(rate.group(5))}


def bare_model(config):
    """(model, communicator, this rank's owned cells) of `config` set up by its model's driver as
    `run_model.py` sets it up (mesh, state, dt, kernels), without the run's callbacks."""
    if config.model == "hydrostatic":
        from hydrostatic.driver import setup
        from meshops.parallel import world

        comm = world()
        s = setup(config, comm)
        return s.model, comm, s.distribution.owned["cell"]
    from swm.driver import setup

    s = setup(config)
    return s.model, s.comm, s.distribution.owned["cell"]


def step_rate(config, steps: int, repeat: int = 3) -> dict:
    """Steps per second of the bare RK4 step of the config's model (no callbacks), the best of
    `repeat` timings of `steps` steps."""
    model, comm, owned = bare_model(config)
    xp = model.device_mesh.xp

    def sync():
        if xp is not __import__("numpy"):
            xp.cuda.Device().synchronize()
    for _ in range(3):
        model.step()
    sync()
    walls = []
    for _ in range(repeat):
        comm.barrier()
        t0 = time.perf_counter()
        for _ in range(steps):
            model.step()
        sync()
        comm.barrier()
        walls.append(time.perf_counter() - t0)
    wall = min(walls)
    return {"step_steps_per_s": steps / wall, "step_ms": 1e3 * wall / steps, "dt": model.dt,
            "cells": int(comm.allreduce(owned))}


def step_rate_on_ranks(config_path, overrides, env, ranks: int, steps: int) -> dict:
    """`step_rate` under mpiexec (this script with --step-only), its row from rank 0."""
    args = mpiexec(ranks) + [sys.executable, __file__, str(config_path), "--step-only", str(steps)]
    for item in overrides:
        args += ["--set", item]
    out = subprocess.run(args, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--levels", type=int, nargs="*", default=[], help="mesh.generate.level values "
                   "(default: the config's)")
    p.add_argument("--dtypes", nargs="+", default=["float64"], choices=["float64", "float32"])
    p.add_argument("--cold", action="store_true", help="also time a start with an empty mesh cache "
                   "(once per level)")
    p.add_argument("--repeat", type=int, default=2, help="cached runs (the fastest counts)")
    p.add_argument("--ranks", type=int, default=1, help="MPI ranks of the run and of the step")
    p.add_argument("--step-only", type=int, default=None, metavar="STEPS", help=argparse.SUPPRESS)
    p.add_argument("--out-dir", default=None, help="where the runs write (default: a temporary folder)")
    p.add_argument("--json", type=pathlib.Path)
    args = p.parse_args(argv)
    if args.step_only is not None:               # one rank of step_rate_on_ranks
        from meshops.parallel import world

        row = step_rate(load_config(args.config, args.set), args.step_only)
        if world().Get_rank() == 0:
            print(json.dumps(row))
        return 0
    out_dir = pathlib.Path(args.out_dir or tempfile.mkdtemp(prefix="bench_driver_"))
    rows = []
    for level in args.levels or [None]:
        for dtype in args.dtypes:
            overrides = list(args.set) + [f"dtype={dtype}",
                                          f"output.path={out_dir / 'history.nc'}",
                                          f"restart.path={out_dir / 'restart.nc'}",
                                          "output.clobber=overwrite"]
            if level is not None:
                overrides.append(f"mesh.generate.level={level}")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
            if args.ranks > 1:
                env.pop("MESHOPS_NO_MPI", None)
            row = {"level": level, "dtype": dtype}
            cold = args.cold and dtype == args.dtypes[0]        # the mesh does not depend on dtype
            if cold:                                          # then cached in the same folder
                env["MESHOPS_CACHE_DIR"] = tempfile.mkdtemp(prefix="cold_cache_")
                row["cold"] = run_model(args.config, overrides, env, args.ranks)
            runs = [run_model(args.config, overrides, env, args.ranks) for _ in range(args.repeat)]
            row["cached"] = max(runs, key=lambda r: r["driver_steps_per_s"])
            row["driver_rates"] = [r["driver_steps_per_s"] for r in runs]
            row["history_bytes"] = (out_dir / "history.nc").stat().st_size
            steps = max(300, row["cached"]["steps"])
            row.update(step_rate(load_config(args.config, overrides), steps) if args.ranks == 1
                       else step_rate_on_ranks(args.config, overrides, env, args.ranks, steps))
            row["ranks"] = args.ranks
            row["ratio"] = row["cached"]["driver_steps_per_s"] / row["step_steps_per_s"]
            rows.append(row)
            c = row["cached"]
            print(f"level {level} {dtype}, {args.ranks} rank(s): {row['cells']} cells, dt "
                  f"{row['dt']:.2f} s, {c['steps']} steps; run_model.py {c['wall_s']:.1f} s (start-up {c['startup_s']:.1f} s"
                  + (f", cold {row['cold']['startup_s']:.1f} s" if cold else "")
                  + f"), driver {c['driver_steps_per_s']:.1f} steps/s "
                  f"({c['simulated_days_per_hour']:.1f} days/h), step alone "
                  f"{row['step_steps_per_s']:.1f} steps/s ({row['step_ms']:.3f} ms): "
                  f"ratio {row['ratio']:.3f}; history {row['history_bytes'] / 1e9:.2f} GB"
                  + (f"; {c['device_gib']:.2f} GiB of GPU memory" if c["device_gib"] else ""),
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps({"date": datetime.date.today().isoformat(),
                                         "config": args.config, "set": args.set, "rows": rows},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
