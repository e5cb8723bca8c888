"""Halo exchange and distributed operators over MPI ranks: exchange time, operator time, weak scaling.

    mpiexec -n 1 python benchmarks/bench_halo.py --level 9 --backend cupy --transport nccl --json r1.json
    mpiexec -n 2 python benchmarks/bench_halo.py --level 9 --backend cupy --transport nccl --weak --json r2.json
    mpiexec -n 2 python benchmarks/bench_halo.py --level 9 --backend cupy --transport staging
    python benchmarks/bench_halo.py --summary r1.json r2.json        # weak-scaling efficiency
    mpiexec -n 2 python benchmarks/bench_halo.py --level 6 --backend numpy   # CPU

Rank 0 loads (or generates and caches, benchmarks/meshes.py) the icosahedral mesh, partitions it
with METIS and sends each rank its local mesh (halo depth 2). With one GPU per rank (node-local
rank), each rank times, after warm-up, `--reps` calls of: the forward exchange of a cell and an
edge field, the adjoint exchange of an edge field, and for each operator the distributed forward,
the distributed adjoint (default adjoint mode) and the local kernel alone (no exchange). On CuPy
arrays the distributed forward computes its interior outputs (n_interior of n_owned, reported per
rank and operator) while the exchange is in flight, then the rest; on NumPy it exchanges, then
computes (`meshops.parallel.distributed`). A call is timed
from a barrier (device synchronised) to the device being synchronised again; the figure reported is
the median over repetitions of the slowest rank.

Weak scaling: `--weak` multiplies the level count by the rank count, so every rank holds as many
(cell x level) values as the one-rank run of the same level (the icosahedral levels grow by 4x, so
the horizontal size cannot be held per rank from 1 to 2 ranks). Efficiency = t(1 rank) / t(N ranks)
for the same per-rank work; `--summary` prints it per measured item.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_OPS = ["div_e2c", "grad_c2e", "curl_e2v", "tangential_e2e"]


def _timer(comm, xp):
    sync = (lambda: xp.cuda.Device().synchronize()) if xp is not np else (lambda: None)

    def measure(fn, reps: int, warmup: int = 3) -> float:
        for _ in range(warmup):
            fn()
        sync()
        samples = []
        for _ in range(reps):
            comm.barrier()
            t0 = time.perf_counter()
            fn()
            sync()
            samples.append(time.perf_counter() - t0)
        slowest = np.max(np.array(comm.allgather(samples)), axis=0)    # per repetition, over ranks
        return float(statistics.median(slowest))

    return measure


def run(args) -> dict:
    from grids.decompose import distribute_mesh
    from grids.partition import partition_quality
    from meshops.parallel.distributed import distributed
    from meshops.parallel.halo import HaloExchange
    from meshops.parallel.comm import abort_on_error, install_excepthook, select_device, world
    from meshops.registry import OPERATORS

    comm = world()
    install_excepthook(comm)
    rank, size = comm.Get_rank(), comm.Get_size()
    say = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    with abort_on_error(comm):
        if args.backend == "cupy":
            import cupy as xp

            device = select_device(comm)
        else:
            xp, device = np, -1
        mesh, owner, quality = None, None, None
        t0 = time.perf_counter()
        if rank == 0:
            from benchmarks.meshes import icosahedral_mesh
            from grids.partition import partition_cells

            mesh = icosahedral_mesh(args.level, log=say)
            owner = partition_cells(mesh, size, method=args.partition)
            quality = str(partition_quality(mesh, owner))
            say(f"level {args.level}: {mesh.nCells} cells; {quality}")
        d = distribute_mesh(comm, mesh, owner, halo_depth=args.halo_depth)
        del mesh
        say(f"mesh ready and distributed in {time.perf_counter() - t0:.1f} s")
        halo = HaloExchange(d, comm, transport=args.transport)
        nlev = args.nlev * (size if args.weak else 1)
        dtype = np.dtype(args.dtype)
        rng = np.random.default_rng(rank)

        def field(loc):
            return xp.asarray(rng.standard_normal((d.n_local(loc), nlev)).astype(dtype))

        measure = _timer(comm, xp)
        transport = halo.transport_name(xp)
        sizes = {loc: (d.n_owned(loc), d.n_local(loc) - d.n_owned(loc)) for loc in ("cell", "edge")}
        all_sizes = comm.gather(sizes)
        result = dict(nranks=size, level=args.level, nlev=nlev, dtype=dtype.name, backend=args.backend,
                      transport=transport, partition=quality, device=device, times={},
                      sizes=all_sizes, bytes={}, interior={})
        cell, edge = field("cell"), field("edge")
        for loc in ("cell", "edge"):
            ex = d.exchange[loc]
            halo_rows = comm.allgather(int(ex.recv_index.size))
            result["bytes"][loc] = max(halo_rows) * nlev * dtype.itemsize
        times = result["times"]
        times["exchange cell"] = measure(lambda: halo.exchange(cell, "cell"), args.reps)
        times["exchange edge"] = measure(lambda: halo.exchange(edge, "edge"), args.reps)
        times["adjoint exchange edge"] = measure(lambda: halo.exchange_adjoint(edge, "edge"), args.reps)
        for name in args.ops:
            spec, op = OPERATORS[name], distributed(name, halo)
            split = (op.n_interior(), d.n_owned(spec.range[0]))
            result["interior"][name] = comm.gather(split)
            x = [field(loc) for loc in spec.domain]
            y = [field(loc) for loc in spec.range]
            base = [] if spec.linear else [field(loc) for loc in spec.domain]
            times[f"{name} local"] = measure(lambda: spec.forward(d.mesh, *x), args.reps)
            times[f"{name} forward"] = measure(lambda: op.forward(*x), args.reps)
            times[f"{name} adjoint"] = measure(lambda: op.adjoint(*base, *y), args.reps)
        say(f"{size} rank(s), transport {transport}, nlev {nlev}, {dtype.name}, "
            f"owned/halo per rank {all_sizes if rank == 0 else ''}")
        for key, value in times.items():
            say(f"  {key:32s} {1e3 * value:10.3f} ms")
        for loc, b in result["bytes"].items():
            say(f"  halo {loc} bytes per rank (max)  {b / 2**20:10.2f} MiB")
        for name, splits in result["interior"].items():
            say(f"  {name + ' interior/owned':32s} {_splits(splits) if rank == 0 else ''}")
        return result


def _splits(splits) -> str:
    """'n_int/n_owned (pct %)' per rank."""
    return ", ".join(f"{i}/{n} ({100 * i / max(n, 1):.0f} %)" for i, n in splits)


def summary(paths) -> None:
    runs = sorted((json.loads(pathlib.Path(p).read_text()) for p in paths), key=lambda r: r["nranks"])
    base = runs[0]
    for r in runs[1:]:
        print(f"weak scaling {base['nranks']} -> {r['nranks']} ranks (level {r['level']}, nlev "
              f"{base['nlev']} -> {r['nlev']}, transport {r['transport']}):")
        for key, t1 in base["times"].items():
            if key in r["times"] and "exchange" not in key:
                print(f"  {key:32s} {1e3 * t1:9.3f} -> {1e3 * r['times'][key]:9.3f} ms  "
                      f"efficiency {100 * t1 / r['times'][key]:6.1f} %")
        for name, splits in r.get("interior", {}).items():
            print(f"  {name + ' interior/owned':32s} {_splits(splits)}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--level", type=int, default=9)
    p.add_argument("--nlev", type=int, default=32)
    p.add_argument("--weak", action="store_true", help="multiply nlev by the rank count")
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--backend", choices=["cupy", "numpy"], default="cupy")
    p.add_argument("--transport", default=None,
                   help="auto, nccl, staging, cuda-aware-mpi (default: $MESHOPS_HALO_TRANSPORT or auto)")
    p.add_argument("--partition", default="metis", choices=["metis", "sfc"])
    p.add_argument("--halo-depth", type=int, default=2)
    p.add_argument("--ops", nargs="+", default=DEFAULT_OPS)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", help="write the results (rank 0) to this file")
    p.add_argument("--summary", nargs="+", metavar="JSON", help="print weak-scaling efficiency")
    args = p.parse_args(argv)
    if args.summary:
        summary(args.summary)
        return
    result = run(args)
    from meshops.parallel.comm import world

    if args.json and world().Get_rank() == 0:
        tmp = f"{args.json}.tmp{os.getpid()}"
        pathlib.Path(tmp).write_text(json.dumps(result, indent=1))
        os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
