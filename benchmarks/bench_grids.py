"""Wall time and peak memory of icosahedral mesh generation, one fresh process per level.

    python benchmarks/bench_grids.py --levels 6 7 8 9 [--lloyd 0] [--order morton] [--stages]

Each level runs in its own subprocess so its peak RSS (ru_maxrss of the child) is its own.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from grids.icosahedral import generate_icosahedral
t = time.perf_counter()
mesh = generate_icosahedral({level}, lloyd_iterations={lloyd}, order={order!r}, progress={stages})
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"level": {level}, "nCells": mesh.nCells, "lloyd": {lloyd}, "wall_s": wall,
                  "cpu_s": ru.ru_utime + ru.ru_stime,
                  "peak_rss_gib": ru.ru_maxrss / 2**20}}))
"""


def run_level(level: int, lloyd: int, order: str, stages: bool) -> dict:
    code = CHILD.format(root=str(ROOT), level=level, lloyd=lloyd, order=order, stages=stages)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"level {level} failed:\n{proc.stderr}")
    lines = proc.stdout.strip().splitlines()
    if stages:
        print("\n".join(lines[:-1]))
    return json.loads(lines[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--levels", type=int, nargs="+", default=[6, 7, 8, 9])
    parser.add_argument("--lloyd", type=int, default=0, help="Lloyd iterations per mesh")
    parser.add_argument("--order", default="morton", choices=["morton", "hilbert", "none"])
    parser.add_argument("--stages", action="store_true", help="print each stage's wall time")
    args = parser.parse_args(argv)
    print(f"{'level':>5} {'nCells':>10} {'lloyd':>5} {'wall s':>8} {'cpu s':>8} {'peak RSS GiB':>13}")
    for level in args.levels:
        r = run_level(level, args.lloyd, args.order, args.stages)
        print(f"{r['level']:>5} {r['nCells']:>10} {r['lloyd']:>5} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} "
              f"{r['peak_rss_gib']:>13.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
