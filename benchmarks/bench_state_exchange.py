"""Whole-state halo exchange (`StateExchange`, one packed message per neighbour) against exchanging
the same fields one by one (`HaloExchange`, one message per field and neighbour), forward and adjoint.

    mpiexec -n 2 python benchmarks/bench_state_exchange.py --level 6 --backend numpy
    mpiexec -n 2 python benchmarks/bench_state_exchange.py --level 9 --backend cupy --transport nccl
    mpiexec -n 2 python benchmarks/bench_state_exchange.py --level 9 --backend cupy --transport staging

The state: h (cell), u (edge), zeta (vertex) in float64 and a float32 cell tracer, each with
--nlev levels, halo depth 2. Each call is timed from a barrier to the end of the exchange (device
synchronised); the figure is the median over --reps of the slowest rank, with the messages each
rank sent per call (from the transports' `stats`). Quoted in docs/decisions/0003-state-exchange.md.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv=None):
    from benchmarks.meshes import icosahedral_mesh
    from grids.decompose import distribute_mesh
    from meshops.parallel import HaloExchange, StateExchange, world
    from meshops.parallel.comm import select_device

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--level", type=int, default=6)
    p.add_argument("--nlev", type=int, default=32)
    p.add_argument("--backend", choices=["numpy", "cupy"], default="numpy")
    p.add_argument("--transport", default=None)
    p.add_argument("--reps", type=int, default=50)
    args = p.parse_args(argv)

    comm = world()
    rank = comm.Get_rank()
    xp = np
    if args.backend == "cupy":
        import cupy as xp

        select_device(comm)
    mesh = icosahedral_mesh(args.level, log=lambda *a: None) if rank == 0 else None
    d = distribute_mesh(comm, mesh, halo_depth=2)
    fields = {"h": ("cell", args.nlev, np.float64), "u": ("edge", args.nlev, np.float64),
              "zeta": ("vertex", args.nlev, np.float64), "tracer": ("cell", args.nlev, np.float32)}
    state_ex = StateExchange(d, fields, comm, transport=args.transport)
    halo = HaloExchange(d, comm, transport=args.transport)
    rng = np.random.default_rng(rank)
    state = {n: xp.asarray(rng.standard_normal((d.n_local(s[0]), args.nlev)).astype(s[2]))
             for n, s in fields.items()}
    sync = (lambda: xp.cuda.Device().synchronize()) if xp is not np else (lambda: None)

    def per_field(adjoint):
        pending = [halo.begin(state[n], s[0], adjoint=adjoint) for n, s in fields.items()]
        for q in pending:
            halo.end(q)

    runs = [("state exchange", lambda: state_ex.exchange(state), state_ex),
            ("per-field exchange", lambda: per_field(False), halo),
            ("state exchange adjoint", lambda: state_ex.exchange_adjoint(state), state_ex),
            ("per-field exchange adjoint", lambda: per_field(True), halo)]
    transport = state_ex.transport_summary(xp, args.transport)     # collective: every rank
    if rank == 0:
        print(f"level {args.level}, {comm.Get_size()} ranks, {args.backend}, transport "
              f"{transport}, nlev {args.nlev}")
    for name, fn, owner in runs:
        for _ in range(3):
            fn()
        sync()
        before = owner.stats.snapshot()
        samples = []
        for _ in range(args.reps):
            comm.barrier()
            t0 = time.perf_counter()
            fn()
            sync()
            samples.append(time.perf_counter() - t0)
        delta = owner.stats - before
        slowest = np.max(np.array(comm.allgather(samples)), axis=0)
        sent = comm.allgather((delta.messages_sent / args.reps, delta.bytes_sent / args.reps))
        if rank == 0:
            print(f"{name:28s} {statistics.median(slowest) * 1e3:8.3f} ms  messages per rank "
                  f"{[m for m, _ in sent]}  {sum(b for _, b in sent) / 2**20:.2f} MiB per call")


if __name__ == "__main__":
    main()
