"""Time the shallow-water model's RK4 step (Williamson case 5) on one GPU or CPU process, against
the step's memory-traffic floor over the measured copy bandwidth.

    python benchmarks/bench_model.py --levels 8 9 --dtypes float64 float32 [--paths fused operators]
        [--passes] [--backend numpy] [--json out.json]

Paths: `fused` (swm.fused, three kernels per stage; CuPy only) and `operators` (the operator path,
swm.tendencies with framework.timestepping). `--passes` also times each pass of a middle RK4 stage of the
fused path on its own (L2 flushed before each repetition) under launch variants of the tuning
table, with the bytes its arguments hold (each array once; an accumulated output twice): the pass's
least traffic, so bytes / time is its effective bandwidth.

Traffic floor of one RK4 step: 4 stages, each reading the provisional state (h, u), b and
f_vertex, reading and writing the accumulated new state and writing the next provisional state,
and reading once the connectivity and geometry a fused tendency needs: edgesOnCell, cellsOnEdge,
verticesOnEdge, edgesOnVertex, cellsOnVertex, edgesOnEdge (int32) and weightsOnEdge,
kiteAreasOnVertex, dcEdge, dvEdge, areaCell, areaTriangle, edgeSignOnCell, edgeSignOnVertex (state
dtype), each counted once.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import CudaTimer, copy_bandwidth, time_wall  # noqa: E402
from meshes import icosahedral_mesh  # noqa: E402

from swm import testcases  # noqa: E402
from swm.fused import Update  # noqa: E402
from swm.model import Model  # noqa: E402
from swm.tendencies import Physics  # noqa: E402


def table_bytes(mesh, itemsize: int) -> int:
    """Bytes of the connectivity and geometry a fused tendency reads (module doc)."""
    C, E, V = mesh.nCells, mesh.nEdges, mesh.nVertices
    eoe = int(np.max(mesh.nEdgesOnEdge))
    return (4 * (C * mesh.maxEdges + 2 * E + 2 * E + 3 * V + 3 * V + E * eoe)
            + itemsize * (E * eoe + 3 * V + 2 * E + C + V + C * mesh.maxEdges + 3 * V))


def floor_bytes(mesh, itemsize: int) -> int:
    """Fewest bytes of one RK4 step (module doc)."""
    C, E, V = mesh.nCells, mesh.nEdges, mesh.nVertices
    state = C + E
    per_stage = itemsize * (state + C + V + 2 * state + state)
    return 4 * (per_stage + table_bytes(mesh, itemsize))


def _model(mesh, dtype, xp, path, level):
    state = testcases.williamson5(mesh)
    dt = 1200.0 / 2 ** (level - 4)
    cast = lambda a: xp.asarray(np.asarray(a, dtype=dtype))  # noqa: E731
    return Model(mesh, cast(state.h), cast(state.u), cast(state.b), cast(state.f_vertex), dt,
                 Physics(), fused=path == "fused")


def bench(mesh, level: int, dtype: str, backend: str, path: str, reps: int, bandwidth: float):
    """(row, model) of one path: the step timed after 3 warm-up steps."""
    xp = np
    if backend == "cupy":
        import cupy as xp
    model = _model(mesh, dtype, xp, path, level)
    launches = []                            # the launches of the first (warm-up) step

    def step():
        if launches:
            return model.step()
        from meshops.device import kernels

        with kernels.observe_launches(launches.append):
            model.step()

    if backend == "cupy":
        timing = CudaTimer().time(step, reps=reps, warmup=3)
    else:
        timing = time_wall(step, reps=reps, warmup=1, target_seconds=0.0)
    floor = floor_bytes(mesh, np.dtype(dtype).itemsize) / bandwidth
    row = {"level": level, "nCells": mesh.nCells, "dtype": dtype, "backend": backend, "path": path,
           "dt": model.dt, "ms_per_step": timing.median * 1e3, "low_ms": timing.low * 1e3,
           "high_ms": timing.high * 1e3, "steps_per_s": 1.0 / timing.median,
           "simulated_days_per_hour": model.dt / timing.median * 3600.0 / 86400.0,
           "floor_ms": floor * 1e3, "x_floor": timing.median / floor,
           "copy_bandwidth_gbs": bandwidth / 1e9}
    if path == "fused":
        row["fused_traffic_ms"] = sum(map(launch_bytes, launches)) / bandwidth * 1e3
    return row, model


def launch_bytes(launch) -> int:
    """Least bytes of a launch: each array argument once, an output it also reads (the RK4
    accumulation, `accumulate`) twice, an output it does not write (`provisional` 0) not at all."""
    from meshops.device import kernels

    args, address = launch.arguments, kernels.launcher().address
    skip = {k for k in ("hNext", "uNext") if k in args and not args.get("provisional", 1)}
    arrays = {address(a): a for k, a in args.items() if getattr(a, "ndim", 0) and k not in skip}
    again = [args[k] for k in ("hNew", "uNew") if k in args and args.get("accumulate")]
    return int(sum(a.nbytes for a in arrays.values()) + sum(a.nbytes for a in again))


#: Launch variants of the tuning table timed for each pass by `--passes`: (name, Tuning changes
#: for the pass's kernel, block size).
VARIANTS = (("sm_90", lambda t, k: {}, 256),
            ("nlev at run time", lambda t, k: {"runtime_nlev": t.runtime_nlev | {k}}, 256),
            ("nlev compiled in", lambda t, k: {"runtime_nlev": t.runtime_nlev - {k}}, 256),
            ("64-bit offsets", lambda t, k: {"offsets64": t.offsets64 | {k}}, 256),
            ("no pass bound", lambda t, k: {"unbounded_passes": t.unbounded_passes | {k}}, 256),
            ("block 128", lambda t, k: {}, 128),
            ("block 512", lambda t, k: {}, 512))


def bench_passes(mesh, level: int, dtype: str, reps: int, bandwidth: float,
                 sources: dict | None = None) -> list[dict]:
    """Each pass of a middle RK4 stage (accumulating, writing the next provisional state) timed on
    its own under every launch variant (VARIANTS), and compiled from each other copy of the CUDA
    sources in `sources` ({name: directory}: kernels of the same signatures) under the first two."""
    import cupy
    from meshops.device import kernels

    model = _model(mesh, dtype, cupy, "fused", level)
    stepper, physics = model.stages.forward, model.physics
    h, u, b, f = model.h, model.u, model.b, model.f_vertex
    h_new, u_new, h_next, u_next = (cupy.empty_like(x) for x in (h, u, h, u))
    update = Update(model.dt / 3, model.dt / 2, True, True)
    pv_vertex = stepper.vertex_pass(h, u, f)
    pv_edge = stepper.pv_edge_pass(h, u, pv_vertex, physics)
    flux, phi = stepper.cell_pass(h, u, b, physics, update, h, h_new, h_next)
    #: The outputs of each pass that do not accumulate (compared between variants).
    outputs = {"sw_pv_vertex": lambda: [stepper.scratch("pvVertex", "vertex", h)],
               "sw_pv_edge": lambda: [stepper.scratch("pvEdge", "edge", u)],
               "sw_cell_stage": lambda: [flux, phi, h_next], "sw_edge_stage": lambda: [u_next]}
    passes = {"sw_pv_vertex": lambda: stepper.vertex_pass(h, u, f),
              "sw_pv_edge": lambda: stepper.pv_edge_pass(h, u, pv_vertex, physics),
              "sw_cell_stage": lambda: stepper.cell_pass(h, u, b, physics, update, h, h_new, h_next),
              "sw_edge_stage": lambda: stepper.edge_pass(u, flux, pv_edge, phi, physics, update, u,
                                                         u_new, u_next)}
    base = kernels.tuning()
    rows = []
    for kernel, run in passes.items():
        launches = []
        with kernels.observe_launches(launches.append):
            run()
        nbytes = launch_bytes(launches[0])
        runs = [(variant, changes, block, kernels.CUDA_DIR) for variant, changes, block in VARIANTS]
        runs += [(f"{name}{', ' + variant if i else ''}", changes, block, pathlib.Path(directory))
                 for name, directory in (sources or {}).items()
                 for i, (variant, changes, block) in enumerate(VARIANTS[:2])]
        for variant, changes, block, directory in runs:
            launcher = kernels.launcher().replace(
                tuning=dataclasses.replace(base, **changes(base, kernel)), block_size=block,
                sources=directory)
            for x in outputs[kernel]():
                x.fill(np.nan)
            with kernels.use_launcher(launcher):
                t = CudaTimer().time(run, reps=reps, warmup=2)
            result = [cupy.asnumpy(x) for x in outputs[kernel]()]
            reference = result if variant == VARIANTS[0][0] else reference
            rows.append({"level": level, "dtype": dtype, "pass": kernel, "variant": variant,
                         "ms": t.median * 1e3, "low_ms": t.low * 1e3, "high_ms": t.high * 1e3,
                         "bytes": nbytes, "gbs": nbytes / t.median / 1e9,
                         "x_copy": nbytes / t.median / bandwidth,
                         "same_bits": all(np.array_equal(a, b) for a, b in zip(result, reference))})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--levels", type=int, nargs="+", default=[8, 9])
    p.add_argument("--dtypes", nargs="+", default=["float64", "float32"], choices=["float64", "float32"])
    p.add_argument("--backend", default="cupy", choices=["cupy", "numpy"])
    p.add_argument("--paths", nargs="+", default=None, choices=["fused", "operators"],
                   help="default: both on cupy, operators on numpy")
    p.add_argument("--passes", action="store_true", help="time each fused pass under launch variants")
    p.add_argument("--sources", nargs="*", default=[], metavar="NAME=DIR",
                   help="with --passes: also time the passes compiled from these copies of meshops/cuda")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--cache-dir", default=None, help="mesh cache directory (benchmarks/meshes.py)")
    p.add_argument("--json", type=pathlib.Path, help="write the rows here")
    args = p.parse_args(argv)
    paths = args.paths or (["operators", "fused"] if args.backend == "cupy" else ["operators"])
    if "fused" in paths and args.backend != "cupy":
        p.error("--paths fused: the fused kernels run on cupy only")
    xp = np
    if args.backend == "cupy":
        import cupy as xp
    bandwidth = copy_bandwidth(xp)
    rows, pass_rows = [], []
    print(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s")
    print("| level | cells | dtype | path | ms / step | steps/s | simulated days / h | floor ms | x floor "
          "| fused traffic ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for level in args.levels:
        mesh = icosahedral_mesh(level, args.cache_dir, log=lambda *a: print(*a, file=sys.stderr))
        for dtype in args.dtypes:
            states = {}
            for path in paths:
                r, model = bench(mesh, level, dtype, args.backend, path, args.reps, bandwidth)
                states[path] = [np.asarray(getattr(x, "get", lambda: x)(), np.float64)
                                for x in (model.h, model.u)]
                if len(states) == 2:      # both paths took the same steps from the same state
                    r["max_rel_diff_vs_operators"] = max(
                        float(np.abs(a - b).max() / np.abs(b).max())
                        for a, b in zip(states["fused"], states["operators"]))
                    print(f"fused against operators after {model.step_count} steps: max relative "
                          f"difference {r['max_rel_diff_vs_operators']:.2e} (h, u)", file=sys.stderr)
                rows.append(r)
                traffic = f"{r['fused_traffic_ms']:.3f}" if "fused_traffic_ms" in r else ""
                print(f"| {level} | {r['nCells']} | {dtype} | {path} | {r['ms_per_step']:.3f} "
                      f"| {r['steps_per_s']:.1f} | {r['simulated_days_per_hour']:.1f} "
                      f"| {r['floor_ms']:.3f} | {r['x_floor']:.2f} | {traffic} |", flush=True)
            if args.passes:
                pass_rows += bench_passes(mesh, level, dtype, args.reps, bandwidth,
                                          dict(item.split("=", 1) for item in args.sources))
    if pass_rows:
        print("\n| level | dtype | pass | variant | ms | low-high | MB | GB/s | x copy | same bits |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in pass_rows:
            print(f"| {r['level']} | {r['dtype']} | {r['pass']} | {r['variant']} | {r['ms']:.4f} "
                  f"| {r['low_ms']:.4f}-{r['high_ms']:.4f} | {r['bytes'] / 1e6:.0f} | {r['gbs']:.0f} "
                  f"| {r['x_copy']:.2f} | {'yes' if r['same_bits'] else 'NO'} |")
    if args.json:
        args.json.write_text(json.dumps({"date": datetime.date.today().isoformat(), "rows": rows,
                                         "passes": pass_rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
