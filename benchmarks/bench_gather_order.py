"""How much memory order matters to a gather kernel: `div_e2c` (forward and both adjoint modes) on a
Morton-ordered icosahedral mesh against the same mesh with cells, edges and vertices randomly
permuted (`grids.reorder.permute_mesh`).

    python benchmarks/bench_gather_order.py --level 9                 # GPU (CuPy)
    python benchmarks/bench_gather_order.py --backend numpy --level 6 # CPU

Timing and byte counting as in bench_operators.py (benchmarks/common.py); `random/morton` is the
slow-down of the random order.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import common, meshes  # noqa: E402
from benchmarks.bench_operators import log, measure, random_fields  # noqa: E402


def random_order(mesh, rng):
    from grids.reorder import MeshPermutation, permute_mesh

    perm = MeshPermutation(cells=rng.permutation(mesh.nCells), edges=rng.permutation(mesh.nEdges),
                           vertices=rng.permutation(mesh.nVertices))
    return permute_mesh(mesh, perm)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--level", type=int, default=9)
    p.add_argument("--nlev", type=int, nargs="+", default=[1, 32])
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--backend", choices=["cupy", "numpy"], default="cupy")
    p.add_argument("--reps", type=int, default=25)
    p.add_argument("--cache-dir", type=pathlib.Path, default=None)
    args = p.parse_args(argv)
    import meshops

    if args.backend == "cupy":
        import cupy as xp
        timer = common.CudaTimer()
    else:
        xp, timer = np, None
    rng = np.random.default_rng()
    dtype = np.dtype(args.dtype)
    morton = meshes.icosahedral_mesh(args.level, args.cache_dir, log=log)
    shuffled = random_order(morton, rng)
    copy_bw = common.copy_bandwidth(xp)
    log(f"# div_e2c, level {args.level} ({morton.nCells} cells), {dtype.name}, backend {args.backend}, "
        f"copy bandwidth {copy_bw / 1e9:.0f} GB/s")
    log(f"{'pass':<11} {'nlev':>4} {'morton ms':>10} {'GB/s':>7} {'random ms':>10} {'GB/s':>7} "
        f"{'random/morton':>14}")
    for nlev in args.nlev:
        F, g = (random_fields(morton, (loc,), nlev, dtype, xp, rng)[0] for loc in ("edge", "cell"))
        passes = {"fwd": lambda m: meshops.div_e2c(m, F),
                  "adj_atomic": lambda m: meshops.div_e2c_adj(m, g, mode="atomic"),
                  "adj_det": lambda m: meshops.div_e2c_adj(m, g, mode="deterministic")}
        for name, call in passes.items():
            zeroing = 2 if name == "adj_atomic" else 1
            result = {}
            for label, mesh in (("morton", morton), ("random", shuffled)):
                inputs = F if name == "fwd" else g
                t, nbytes, _ = measure(xp, timer, lambda: call(mesh), args.reps, 3,
                                       lambda out: inputs.nbytes + zeroing * out.nbytes)
                result[label] = (t.median * 1e3, nbytes / t.median / 1e9)
            (tm, bm), (tr, br) = result["morton"], result["random"]
            log(f"{name:<11} {nlev:>4} {tm:10.4f} {bm:7.1f} {tr:10.4f} {br:7.1f} {tr / tm:14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
