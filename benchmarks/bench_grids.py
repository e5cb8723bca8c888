"""Mesh generation at scale: time per stage, peak memory, file size and load time, per level.

    python benchmarks/bench_grids.py --levels 8 9 10 11 [--lloyd 0] [--order morton]
                                     [--dir DIR] [--keep] [--compress yes|no|connectivity]
                                     [--stages] [--cache] [--no-load] [--json out.json]

Per level, two fresh processes, so that each peak RSS (ru_maxrss of the child) is its own:

1. generate: `grids.icosahedral.write_icosahedral` writes the MPAS grid file (NETCDF4, counts, signs
   and ids zlib-compressed) field by field, as `python -m grids generate` and a mesh-cache miss
   do; the time and the peak RSS after each stage are recorded;
2. load: `grids.mpas_io.read_trusted_mesh` reads it back, as a mesh-cache hit does (the load time,
   its peak RSS, and the bytes per cell of the loaded `Mesh`, every MPAS field: the floor of any
   in-memory mesh);
3. with --cache: `grids.cache.cached_icosahedral` in a fresh cache, a miss (generate, write, load,
   validate) and a hit, each in its own process.

The file is written in --dir (default: a temporary directory) and removed after loading unless
--keep (a level-11 file is ~43 GB). --stages shows each stage's time and peak RSS as it ends; the
JSON file is rewritten after each level, so a run stopped at level 11 keeps levels 8-10. Threads: $MESHOPS_THREADS (default: every CPU of the process).
Lloyd seconds per iteration per million cells are reported when --lloyd > 0.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

GENERATE = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from grids.geometry import threads
from grids.icosahedral import write_icosahedral
stages = []
def progress(name, wall, cpu):
    stages.append({{"stage": name, "wall_s": wall, "cpu_s": cpu,
                    "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}})
    print(f"    [level {level}] {{name}}: {{wall:.2f}} s wall, {{cpu:.2f}} s cpu, "
          f"peak {{stages[-1]['peak_rss_gib']:.2f}} GiB", file=sys.stderr, flush=True)
t = time.perf_counter()
sizes = write_icosahedral({level}, {path!r}, lloyd_iterations={lloyd}, order={order!r},
                          compress={compress}, progress=progress)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"nCells": sizes["nCells"], "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                  "peak_rss_gib": ru.ru_maxrss / 2**20, "threads": threads(), "stages": stages}}))
"""

LOAD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from grids.mpas_io import read_trusted_mesh
t = time.perf_counter()
mesh = read_trusted_mesh({path!r})
wall = time.perf_counter() - t
nbytes = sum(a.nbytes for a in mesh.fields().values()) + sum(a.nbytes for _, a in mesh.extra.values())
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"load_s": wall, "load_peak_rss_gib": ru.ru_maxrss / 2**20,
                  "mesh_bytes_per_cell": nbytes / mesh.nCells}}))
"""


CACHE = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from grids.cache import cached_icosahedral
t = time.perf_counter()
mesh = cached_icosahedral({level}, lloyd_iterations={lloyd}, order={order!r}, cache_dir={directory!r})
wall = time.perf_counter() - t
print(json.dumps({{"wall_s": wall, "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}}))
"""


def _child(code: str, live: bool = False) -> dict:
    """Run `code` in a fresh Python; its last stdout line is the JSON result. `live`: its stderr
    (the stage lines) goes straight to ours, as it happens."""
    proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                          stderr=None if live else subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed (status {proc.returncode}):\n"
                           f"{proc.stderr or 'see its output above'}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_level(level: int, lloyd: int, order: str, compress, directory: str, keep: bool,
              cache: bool = False, load: bool = True, live: bool = False) -> dict:
    """One level: generate (write) in one process, load in another (unless not `load`); the file
    removed unless keep. With `cache`, also `cached_icosahedral` twice in fresh processes (a miss:
    generate, write, load and validate; then a hit: load). `live` shows the stages as they end."""
    path = os.path.join(directory, f"x1.{10 * 4**level + 2}.l{level}.lloyd{lloyd}.grid.nc")
    gen = _child(GENERATE.format(root=str(ROOT), level=level, path=path, lloyd=lloyd, order=order,
                                 compress=repr(compress)), live)
    n = gen["nCells"]
    row = {"level": level, "lloyd": lloyd, **gen, "file_bytes": os.path.getsize(path),
           "bytes_per_cell": gen["peak_rss_gib"] * 2**30 / n}
    print(f"  level {level}: generated in {gen['wall_s']:.1f} s, peak {gen['peak_rss_gib']:.2f} GiB "
          f"({row['bytes_per_cell']:.0f} B/cell), file {row['file_bytes'] / 1e9:.2f} GB", flush=True)
    if load:
        row.update(_child(LOAD.format(root=str(ROOT), path=path)))
    if not keep:
        os.remove(path)
    if cache:
        cache_dir = os.path.join(directory, f"cache-l{level}")
        code = CACHE.format(root=str(ROOT), level=level, lloyd=lloyd, order=order, directory=cache_dir)
        miss, hit = _child(code), _child(code)
        row.update(cache_miss_s=miss["wall_s"], cache_miss_peak_rss_gib=miss["peak_rss_gib"],
                   cache_hit_s=hit["wall_s"], cache_hit_peak_rss_gib=hit["peak_rss_gib"])
        if not keep:
            shutil.rmtree(cache_dir)
    lloyd_stage = [s for s in gen["stages"] if s["stage"].endswith("Lloyd iterations")]
    if lloyd and lloyd_stage:
        row["lloyd_s_per_iter_per_mcell"] = lloyd_stage[0]["wall_s"] / lloyd / (n / 1e6)
    return row


def _print_row(r: dict) -> None:
    per_iter = r.get("lloyd_s_per_iter_per_mcell")
    load = (f"{r['load_s']:>7.2f} {r['load_peak_rss_gib']:>9.2f} {r['mesh_bytes_per_cell']:>8.0f}"
            if "load_s" in r else f"{'-':>7} {'-':>9} {'-':>8}")
    print(f"{r['level']:>5} {r['nCells']:>10} {r['lloyd']:>5} {r['wall_s']:>9.1f} {r['cpu_s']:>9.1f} "
          f"{r['peak_rss_gib']:>9.2f} {r['bytes_per_cell']:>7.0f} {r['file_bytes'] / 1e9:>8.2f} "
          f"{load} {'' if per_iter is None else f'{per_iter:.2f}':>8}", flush=True)


def _write_json(path: str, rows: list) -> None:
    meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
            "cpus": os.cpu_count(), "python": platform.python_version()}
    pathlib.Path(path).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--levels", type=int, nargs="+", default=[6, 7, 8, 9])
    parser.add_argument("--lloyd", type=int, default=0, help="Lloyd iterations per mesh")
    parser.add_argument("--order", default="morton", choices=["morton", "hilbert", "none"])
    parser.add_argument("--dir", default=None, help="where the files are written (default: a "
                        "temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the written files")
    parser.add_argument("--compress", default="yes", choices=["yes", "no", "connectivity"],
                        help="zlib for counts/signs/ids (yes), none, or the index fields too")
    parser.add_argument("--stages", action="store_true", help="print each stage's time and RSS")
    parser.add_argument("--cache", action="store_true", help="also time grids.cache."
                        "cached_icosahedral: a miss (generate, load, validate) and a hit")
    parser.add_argument("--no-load", action="store_true", help="generate only (no load of the file)")
    parser.add_argument("--json", default=None, help="write the rows (with the stages) to this file, "
                        "rewritten after each level")
    args = parser.parse_args(argv)
    rows = []
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = args.dir if (args.dir and args.keep) else tmp
        print(f"{'level':>5} {'nCells':>10} {'lloyd':>5} {'gen s':>9} {'cpu s':>9} {'peak GiB':>9} "
              f"{'B/cell':>7} {'file GB':>8} {'load s':>7} {'load GiB':>9} {'mesh B/c':>8} "
              f"{'s/it/Mc':>8}")
        for level in args.levels:
            compress = {"yes": True, "no": False}.get(args.compress, args.compress)
            r = run_level(level, args.lloyd, args.order, compress, directory, args.keep, args.cache,
                          load=not args.no_load, live=args.stages)
            rows.append(r)
            if args.json:
                _write_json(args.json, rows)
            _print_row(r)
            if args.cache:
                print(f"        cache miss {r['cache_miss_s']:.1f} s, peak {r['cache_miss_peak_rss_gib']:.2f} "
                      f"GiB; hit {r['cache_hit_s']:.1f} s, peak {r['cache_hit_peak_rss_gib']:.2f} GiB",
                      flush=True)
            if args.stages:
                for s in r["stages"]:
                    print(f"        {s['stage']:<40} {s['wall_s']:>8.2f} s wall {s['cpu_s']:>8.2f} s cpu "
                          f"peak {s['peak_rss_gib']:.2f} GiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
