"""Time the shallow-water model's RK4 step (Williamson case 5) on one GPU or CPU process, against
the step's memory-traffic floor over the measured copy bandwidth.

    python benchmarks/bench_model.py --levels 8 9 --dtypes float64 float32 [--backend numpy] [--json out.json]

Traffic floor of one RK4 step: 4 stages, each reading the provisional state (h, u), b and
f_vertex, reading and writing the accumulated new state and writing the next provisional state,
and reading once the connectivity and geometry a fused tendency needs: edgesOnCell, cellsOnEdge,
verticesOnEdge, edgesOnVertex, cellsOnVertex, edgesOnEdge (int32) and weightsOnEdge,
kiteAreasOnVertex, dcEdge, dvEdge, areaCell, areaTriangle, edgeSignOnCell, edgeSignOnVertex (state
dtype), each counted once.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import CudaTimer, copy_bandwidth, time_wall  # noqa: E402
from meshes import icosahedral_mesh  # noqa: E402

from swm import testcases  # noqa: E402
from swm.model import Model  # noqa: E402
from swm.tendencies import Physics  # noqa: E402


def floor_bytes(mesh, itemsize: int) -> int:
    """Fewest bytes of one RK4 step (module doc)."""
    C, E, V = mesh.nCells, mesh.nEdges, mesh.nVertices
    state = C + E
    per_stage = itemsize * (state + C + V + 2 * state + state)
    eoe = int(np.max(mesh.nEdgesOnEdge))
    tables = (4 * (C * mesh.maxEdges + 2 * E + 2 * E + 3 * V + 3 * V + E * eoe)
              + itemsize * (E * eoe + 3 * V + 2 * E + C + V + C * mesh.maxEdges + 3 * V))
    return 4 * (per_stage + tables)


def bench(level: int, dtype: str, backend: str, reps: int, cache_dir) -> dict:
    xp = np
    if backend == "cupy":
        import cupy as xp
    mesh = icosahedral_mesh(level, cache_dir, log=lambda *a: print(*a, file=sys.stderr))
    state = testcases.williamson5(mesh)
    dt = 1200.0 / 2 ** (level - 4)
    cast = lambda a: xp.asarray(np.asarray(a, dtype=dtype))  # noqa: E731
    model = Model(mesh, cast(state.h), cast(state.u), cast(state.b), cast(state.f_vertex), dt, Physics())
    if backend == "cupy":
        timing = CudaTimer().time(model.step, reps=reps, warmup=3)
    else:
        timing = time_wall(model.step, reps=reps, warmup=1, target_seconds=0.0)
    bandwidth = copy_bandwidth(xp)
    floor = floor_bytes(mesh, np.dtype(dtype).itemsize) / bandwidth
    return {"level": level, "nCells": mesh.nCells, "dtype": dtype, "backend": backend, "dt": dt,
            "ms_per_step": timing.median * 1e3, "steps_per_s": 1.0 / timing.median,
            "simulated_days_per_hour": dt / timing.median * 3600.0 / 86400.0,
            "floor_ms": floor * 1e3, "x_floor": timing.median / floor,
            "copy_bandwidth_gbs": bandwidth / 1e9}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--levels", type=int, nargs="+", default=[8, 9])
    p.add_argument("--dtypes", nargs="+", default=["float64", "float32"], choices=["float64", "float32"])
    p.add_argument("--backend", default="cupy", choices=["cupy", "numpy"])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--cache-dir", default=None, help="mesh cache directory (benchmarks/meshes.py)")
    p.add_argument("--json", type=pathlib.Path, help="write the rows here")
    args = p.parse_args(argv)
    rows = []
    print("| level | cells | dtype | ms / step | steps/s | simulated days / h | floor ms | x floor |")
    print("|---|---|---|---|---|---|---|---|")
    for level in args.levels:
        for dtype in args.dtypes:
            r = bench(level, dtype, args.backend, args.reps, args.cache_dir)
            rows.append(r)
            print(f"| {level} | {r['nCells']} | {dtype} | {r['ms_per_step']:.3f} | {r['steps_per_s']:.1f} "
                  f"| {r['simulated_days_per_hour']:.1f} | {r['floor_ms']:.3f} | {r['x_floor']:.2f} |",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps({"date": datetime.date.today().isoformat(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
