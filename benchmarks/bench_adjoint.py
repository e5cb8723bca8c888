"""Time the shallow-water model's adjoint (Williamson case 5, float64): one adjoint RK4 step
against one forward step at several levels, both adjoint modes; whole gradients with every state
stored and with binomial checkpointing (multistage, snapshots in GPU memory) (time and peak GPU memory); and the gradient of a long run
(e.g. 5 days at level 9) that only fits with checkpointing.

    python benchmarks/bench_adjoint.py --levels 8 9 10 [--gradient-level 9 --gradient-days 5
        --snapshots 400|auto] [--json out.json]

The adjoint step recomputes its four stage states from the step's start state and then runs the
stages' tendency adjoints in reverse. Its memory-traffic floor (`adjoint_floor_bytes`): the
forward step's floor (`bench_model.floor_bytes`: the recompute) plus, per stage, the connectivity
and geometry of the fused tendency once more (the transposed stencils hold the same information),
the stage's record (h, u, pv_vertex, h_vertex, pv_edge, flux), the adjoint tendency and the end
state's adjoint read, the start state's adjoint read and written, the next adjoint tendency written
and b's adjoint read and written; `--traffic` also sums the least bytes of the adjoint step's
launches (each array argument once) and reports both against the measured copy bandwidth. Peak memory is the CuPy memory pool's size after a run that
started from an emptied pool (what the run needed at most, the mesh tables included), after an
untimed two-step gradient that builds the tables and compiles the kernels.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_model import floor_bytes, launch_bytes, table_bytes  # noqa: E402
from common import CudaTimer, copy_bandwidth, time_wall  # noqa: E402
from meshes import icosahedral_mesh  # noqa: E402

from adjoint.costs import Context  # noqa: E402
from swm.costs import RegionCost  # noqa: E402
from adjoint.gradient import run_gradient  # noqa: E402
from framework.stepper import rk4_step_adj, rk4_step_tl  # noqa: E402
from swm import testcases  # noqa: E402
from swm.model import Model  # noqa: E402
from swm.tendencies import Physics  # noqa: E402


def build(level, dtype, xp, cache_dir):
    mesh = icosahedral_mesh(level, cache_dir, log=lambda *a: print(*a, file=sys.stderr))
    state = testcases.williamson5(mesh)
    dt = 1200.0 / 2 ** (level - 4)
    cast = lambda a: xp.asarray(np.asarray(a, dtype=dtype))  # noqa: E731
    model = Model(mesh, cast(state.h), cast(state.u), cast(state.b), cast(state.f_vertex), dt,
                  Physics())
    return mesh, model


def timer(xp):
    if xp is np:
        return lambda fn, reps: time_wall(fn, reps=reps, warmup=1, target_seconds=0.0).median
    t = CudaTimer()
    return lambda fn, reps: t.time(fn, reps=reps, warmup=2).median


def adjoint_floor_bytes(mesh, itemsize: int) -> int:
    """Fewest bytes of one adjoint RK4 step (module doc)."""
    C, E, V = mesh.nCells, mesh.nEdges, mesh.nVertices
    forward = floor_bytes(mesh, itemsize)                     # the recompute, tables included
    tables = table_bytes(mesh, itemsize)
    per_stage = itemsize * ((C + E + 2 * V + 2 * E)            # the record
                            + 2 * (C + E) + 2 * (C + E) + (C + E) + 2 * C)
    return forward + 4 * (tables + per_stage)


def adjoint_traffic(model, h, u, dh, du, mode) -> int:
    """Least bytes of the launches of one adjoint step (each array argument once)."""
    from meshops.device import kernels

    launches = []
    with kernels.observe_launches(launches.append):
        rk4_step_adj(model, h, u, dh, du, mode=mode)
    return sum(map(launch_bytes, launches))


def step_ratios(level, dtype, xp, reps, cache_dir, traffic=False) -> dict:
    """ms per forward, tangent-linear and adjoint (both modes) RK4 step."""
    mesh, model = build(level, dtype, xp, cache_dir)
    measure = timer(xp)
    rng = np.random.default_rng(0)
    h, u = model.h, model.u
    dh = xp.asarray(rng.standard_normal(h.shape), dtype=h.dtype)
    du = xp.asarray(rng.standard_normal(u.shape), dtype=u.dtype)
    forward = measure(model.step, reps)
    tangent = measure(lambda: rk4_step_tl(model, h, u, dh, du, None), reps)
    row = {"level": level, "nCells": mesh.nCells, "dtype": dtype, "forward_ms": forward * 1e3,
           "tl_ms": tangent * 1e3, "tl_over_forward": tangent / forward}
    for mode in ("deterministic", "atomic"):
        adjoint = measure(lambda: rk4_step_adj(model, h, u, dh, du, mode=mode), reps)
        row[f"adj_{mode}_ms"] = adjoint * 1e3
        row[f"adj_{mode}_over_forward"] = adjoint / forward
    if traffic and xp is not np:
        bandwidth = copy_bandwidth(xp)
        floor = adjoint_floor_bytes(mesh, np.dtype(dtype).itemsize) / bandwidth
        row.update(copy_bandwidth_gbs=bandwidth / 1e9, adj_floor_ms=floor * 1e3,
                   adj_x_floor=row["adj_deterministic_ms"] / 1e3 / floor,
                   adj_launch_traffic_ms=adjoint_traffic(model, h, u, dh, du, "deterministic")
                   / bandwidth * 1e3)
    return row


def _cost(mesh, model, n_steps, xp, dtype):
    owned = {"cell": mesh.nCells, "edge": mesh.nEdges, "vertex": mesh.nVertices}
    context = Context(mesh, model.device_mesh, owned, np.arange(mesh.nCells), _Serial(), model.dt,
                      n_steps, lambda h, u: None, xp, dtype)
    return RegionCost(context, "h", "energy", ((20.0, 60.0), (280.0, 340.0)))


class _Serial:
    def Get_size(self):
        return 1


def whole_gradient(level, dtype, xp, n_steps, schedule, snapshots, cache_dir) -> dict:
    """Time, peak GPU memory and forward steps of one gradient of an n_steps run."""
    mesh, model = build(level, dtype, xp, cache_dir)
    cost = _cost(mesh, model, n_steps, xp, dtype)
    from adjoint.config import CheckpointConfig

    # untimed: the first gradient builds the adjoints' tables and compiles their kernels
    run_gradient(model, (model.h, model.u), _cost(mesh, model, 2, xp, dtype), 2)
    pool = None
    if xp is not np:
        pool = xp.get_default_memory_pool()
        xp.cuda.Device().synchronize()
        pool.free_all_blocks()
        base = pool.total_bytes()
    t0 = time.perf_counter()
    checkpointing = CheckpointConfig(schedule=schedule, snapshots_in_ram=snapshots)
    value, grads, stats = run_gradient(model, (model.h, model.u), cost, n_steps,
                                       checkpointing=checkpointing)
    if xp is not np:
        xp.cuda.Device().synchronize()
    wall = time.perf_counter() - t0
    state_bytes = (mesh.nCells + mesh.nEdges) * np.dtype(dtype).itemsize
    return {"level": level, "nCells": mesh.nCells, "dtype": dtype, "steps": n_steps,
            "simulated_days": n_steps * model.dt / 86400.0, "schedule": schedule,
            "snapshots_in_ram": snapshots, "memory": stats.memory, "seconds": wall, "J": value,
            "forward_steps": stats.forward_steps, "recomputed": stats.recomputed,
            "max_states_in_memory": stats.max_states_in_memory,
            "state_mib": state_bytes / 2**20,
            "peak_pool_gib": None if pool is None else pool.total_bytes() / 2**30,
            "pool_before_gib": None if pool is None else base / 2**30,
            "grad_h_norm": float(xp.linalg.norm(grads[0]))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--levels", type=int, nargs="*", default=[8, 9])
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--backend", default="cupy", choices=["cupy", "numpy"])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--stored-steps", type=int, default=48,
                   help="steps of the whole-gradient comparison (stored vs checkpointed)")
    p.add_argument("--gradient-level", type=int, default=None)
    p.add_argument("--gradient-days", type=float, default=5.0)
    p.add_argument("--snapshots", default="400", type=lambda v: v if v == "auto" else int(v),
                   help="snapshots in GPU memory, or auto: as many as fit")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--traffic", action="store_true",
                   help="the adjoint step's traffic floor and its launches' least bytes (CuPy)")
    p.add_argument("--json", type=pathlib.Path)
    args = p.parse_args(argv)
    xp = np
    if args.backend == "cupy":
        import cupy as xp
    out = {"date": datetime.date.today().isoformat(), "steps": [], "gradients": []}
    print("| level | cells | forward ms | TLM ms (x fwd) | adjoint det. ms (x fwd) | adjoint atomic ms (x fwd) |")
    print("|---|---|---|---|---|---|")
    for level in args.levels:
        r = step_ratios(level, args.dtype, xp, args.reps, args.cache_dir, args.traffic)
        out["steps"].append(r)
        print(f"| {level} | {r['nCells']} | {r['forward_ms']:.3f} | {r['tl_ms']:.3f} "
              f"({r['tl_over_forward']:.2f}) | {r['adj_deterministic_ms']:.3f} "
              f"({r['adj_deterministic_over_forward']:.2f}) | {r['adj_atomic_ms']:.3f} "
              f"({r['adj_atomic_over_forward']:.2f}) |", flush=True)
    for r in out["steps"]:
        if "adj_floor_ms" in r:
            print(f"level {r['level']}: deterministic adjoint step {r['adj_deterministic_ms']:.3f} ms, "
                  f"traffic floor {r['adj_floor_ms']:.3f} ms ({r['adj_x_floor']:.2f}x), its launches' "
                  f"least traffic {r['adj_launch_traffic_ms']:.3f} ms (copy {r['copy_bandwidth_gbs']:.0f} GB/s)")
    runs = []
    if args.levels and args.stored_steps:
        level = args.levels[-1]
        runs += [(level, args.stored_steps, "none", 0),
                 (level, args.stored_steps, "multistage", max(2, args.stored_steps // 8))]
    if args.gradient_level is not None:
        dt = 1200.0 / 2 ** (args.gradient_level - 4)
        n = int(round(args.gradient_days * 86400.0 / dt))
        runs.append((args.gradient_level, n, "multistage", args.snapshots))
    if runs:
        print("\n| level | steps | days | schedule | snapshots | s | forward steps | peak GPU GiB |")
        print("|---|---|---|---|---|---|---|---|")
    for level, n, schedule, snapshots in runs:
        r = whole_gradient(level, args.dtype, xp, n, schedule, snapshots, args.cache_dir)
        out["gradients"].append(r)
        peak = "-" if r["peak_pool_gib"] is None else f"{r['peak_pool_gib']:.2f}"
        print(f"| {level} | {n} | {r['simulated_days']:.2f} | {schedule} | {snapshots} | "
              f"{r['seconds']:.1f} | {r['forward_steps']} | {peak} |", flush=True)
        print(r["memory"], flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
