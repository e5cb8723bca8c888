"""A/B timings of a kernel variant against the package's kernels on the GPU (the sweeps of
benchmarks/RESULTS.md): every operator (or --ops), forward and deterministic adjoint, each timed
baseline / variant / baseline / variant in turn in one process (CUDA events, L2 flushed, median of
--reps), and per row the ratio variant / baseline (the lesser time of each pair), with its
geometric mean per dtype and nlev. Ratios below 1: the variant is faster.

The baseline is meshops as installed; the variant is
  --sources DIR          the CUDA sources of DIR (e.g. meshops/cuda of another checkout), and/or
  --max-passes N|none    another bound on the grid-stride passes per thread at one lane per row
                         (the package: the tuning's max_passes, 3 on sm_90, meshops/device/tuning.py;
                         none: 4x the resident blocks), for every kernel that has a bound.

    git worktree add /tmp/before HEAD~1
    python benchmarks/bench_variants.py --level 9 --nlev 1 32 --dtypes float64 float32 \
        --sources /tmp/before/meshops/cuda --json ab.json
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_operators, common, meshes  # noqa: E402


class Variant:
    """Switches the launcher (`meshops.device.kernels.use_launcher`) between the package's ("base",
    the launcher in use, or `base`) and a variant ("variant"): CUDA sources compiled from another
    directory, another bound on grid-stride passes, or both. Modules of both source trees stay
    cached side by side; `close` restores the launcher in use before."""

    def __init__(self, sources=None, max_passes="package", base=None):
        import meshops.device.kernels as kernels

        self.kernels = kernels
        base = base or kernels.launcher()
        changes = {}
        if sources:
            changes["sources"] = pathlib.Path(sources).resolve()
        for directory in (base.sources, changes.get("sources", base.sources)):
            if not (directory / "common.cuh").is_file():
                raise FileNotFoundError(f"--sources {directory}: expected a copy of meshops/cuda "
                                        f"(no common.cuh there)")
        if max_passes != "package":
            tuning = base.tuning_of(base.device())
            changes["tuning"] = dataclasses.replace(tuning, max_passes=max_passes)
        self.launchers = {"base": base, "variant": base.replace(**changes)}
        self._using = None
        self.active = "base"

    @property
    def active(self) -> str:
        return self._active

    @active.setter
    def active(self, label: str) -> None:
        if self._using is not None:
            self._using.__exit__(None, None, None)
        self._active, self._using = label, self.kernels.use_launcher(self.launchers[label])
        self._using.__enter__()

    def close(self):
        if self._using is not None:
            self._using.__exit__(None, None, None)
            self._using = None


def geometric_mean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def run(args) -> list[dict]:
    import cupy

    operators = bench_operators.load_operators()
    names = args.ops or sorted(operators)
    unknown = sorted(set(names) - set(operators))
    if unknown:
        raise SystemExit(f"--ops: unknown operators {unknown}; registered: {sorted(operators)}")
    variant = Variant(args.sources, args.max_passes)
    timer, rng, rows = common.CudaTimer(), np.random.default_rng(args.seed), []
    mesh = meshes.icosahedral_mesh(args.level, args.cache_dir)
    start = time.perf_counter()
    try:
        for dtype in (np.dtype(d) for d in args.dtypes):
            for nlev in args.nlev:
                for name in names:
                    spec = operators[name]
                    x = bench_operators.random_fields(mesh, spec.domain, nlev, dtype, cupy, rng)
                    g = bench_operators.random_fields(mesh, spec.range, nlev, dtype, cupy, rng)
                    base = () if spec.linear else x
                    passes = (("fwd", lambda: spec.forward(mesh, *x)),
                              ("adj_det", lambda: spec.adjoint(mesh, *base, *g, mode="deterministic")))
                    for pass_name, fn in passes:
                        ms = {"base": [], "variant": []}
                        for label in ("base", "variant", "base", "variant"):
                            variant.active = label
                            fn()
                            cupy.cuda.Device().synchronize()
                            ms[label].append(timer.time(fn, reps=args.reps, warmup=2).median * 1e3)
                        variant.active = "base"
                        row = dict(op=name, level=args.level, dtype=dtype.name, nlev=nlev,
                                   pass_=pass_name, base_ms=ms["base"], variant_ms=ms["variant"],
                                   ratio=min(ms["variant"]) / min(ms["base"]))
                        rows.append(row)
                        print(f"{name:34s} {dtype.name:8s} {nlev:4d} {pass_name:8s} base "
                              f"{min(ms['base']):9.4f} variant {min(ms['variant']):9.4f} ms  "
                              f"ratio {row['ratio']:.3f}", flush=True)
                    del x, g
                group = [r["ratio"] for r in rows if (r["dtype"], r["nlev"]) == (dtype.name, nlev)]
                print(f"# {dtype.name} nlev {nlev}: geometric mean variant/base "
                      f"{geometric_mean(group):.4f} over {len(group)} rows "
                      f"({time.perf_counter() - start:.0f} s)", flush=True)
    finally:
        variant.close()
    return rows


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sources", help="directory of the variant's CUDA sources (a copy of meshops/cuda)")
    p.add_argument("--max-passes", type=lambda s: None if s == "none" else int(s), default="package",
                   help="the variant's bound on grid-stride passes at one lane per row (N or none)")
    p.add_argument("--level", type=int, default=9)
    p.add_argument("--nlev", type=int, nargs="+", default=[1, 32])
    p.add_argument("--dtypes", nargs="+", default=["float64", "float32"], choices=["float64", "float32"])
    p.add_argument("--ops", nargs="+", help="operators (default: every registered one)")
    p.add_argument("--reps", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cache-dir", default=None, help="mesh cache (benchmarks/meshes.py)")
    p.add_argument("--json", type=pathlib.Path, help="write the rows to this JSON file")
    args = p.parse_args(argv)
    if args.sources is None and args.max_passes == "package":
        p.error("give the variant: --sources DIR and/or --max-passes N|none")
    return args


def main(argv=None):
    args = parse_args(argv)
    rows = run(args)
    if args.json:
        import cupy

        device = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())["name"]
        doc = dict(date=datetime.date.today().isoformat(), device=device.decode(),
                   argv=sys.argv[1:] if argv is None else argv, rows=rows)
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
