"""Where the tracer's fields live: one process (`framework.distribution.Serial`), or every rank with
its local mesh, q exchanged in one message per neighbour per RK stage; the tangent-linear's first
stage exchanges (dq, du) together (`exchange_tl`)."""
from __future__ import annotations

from meshops.parallel import StateExchange, layers_needed
from meshops.parallel.comm import is_serial
from framework.distribution import Ranks, Serial, check_rank_count, read_owner

from tracer.terms import CHAINS


class Distributed(Ranks):
    """Every rank of `comm` with its `grids.decompose.Decomposition`; q, and (q, u) with a wind
    perturbation, exchanged in one message per neighbour."""

    def __init__(self, decomposition, comm, dtype):
        super().__init__(decomposition, comm)
        q, u = ("cell", None, dtype), ("edge", None, dtype)
        self.state_exchange = StateExchange(decomposition, {"q": q}, comm)
        self.control_exchange = StateExchange(decomposition, {"q": q, "u": u}, comm)

    def exchange(self, q) -> None:
        self.state_exchange.exchange({"q": q})

    def exchange_tl(self, dq, du=None) -> None:
        if du is None:
            self.state_exchange.exchange({"q": dq})
        else:
            self.control_exchange.exchange({"q": dq, "u": du})


def distribute(config, comm, global_mesh, dtype):
    """Serial on one rank; else the mesh partitioned on rank 0 as config.partition says and
    distributed with the halo the term's chain needs."""
    check_rank_count(comm, global_mesh)
    owner = read_owner(config, comm, global_mesh)
    if is_serial(comm):
        return Serial(global_mesh, comm)
    from grids.decompose import distribute_mesh

    method = {"metis": "metis", "sfc": "sfc", "file": "auto"}[config.partition.method]
    depth = max(layers_needed(chain) for chain in CHAINS)
    return Distributed(distribute_mesh(comm, global_mesh, owner, halo_depth=depth, method=method),
                       comm, dtype)
