"""Where the shallow-water model's fields live: one process (`framework.distribution.Serial`), or
every rank of a communicator with its local mesh and the state (h, u) exchanged once per RK stage."""
from __future__ import annotations

from meshops.parallel import StateExchange, layers_needed
from meshops.parallel.comm import is_serial

from framework.distribution import Ranks, Serial, check_rank_count, read_owner
from swm import terms


def halo_depth(physics) -> int:
    """Cell layers of halo the tendencies need so that one exchange per stage is enough: the
    deepest operator chain of the active terms (`swm.terms`)."""
    return max(layers_needed(chain) for chain in terms.chains(physics))


class Distributed(Ranks):
    """Every rank of `comm` with its `grids.decompose.Decomposition`; the state (h, u) exchanged
    in one message per neighbour (`meshops.parallel.StateExchange`).

    The tangent-linear and adjoint steps (`framework.stepper`) exchange perturbations and adjoint
    tendencies the same way (`exchange_tl`); with a topography perturbation db the three fields go
    in one message per neighbour through a second exchange, `control_exchange` {h, u, b}."""

    def __init__(self, decomposition, comm, dtype, *, transport=None):
        super().__init__(decomposition, comm)
        state = {"h": ("cell", None, dtype), "u": ("edge", None, dtype)}
        self.state_exchange = StateExchange(decomposition, state, comm, transport=transport)
        self.control_exchange = StateExchange(decomposition, {**state, "b": ("cell", None, dtype)},
                                              comm, transport=transport)

    def exchange(self, h, u) -> None:
        self.state_exchange.exchange({"h": h, "u": u})

    def exchange_tl(self, dh, du, db=None) -> None:
        """The forward exchange of a perturbation (dh, du[, db]), in place."""
        if db is None:
            self.state_exchange.exchange({"h": dh, "u": du})
        else:
            self.control_exchange.exchange({"h": dh, "u": du, "b": db})


def distribute(config, comm, global_mesh, physics, dtype):
    """Serial on one rank; else partition on rank 0 as the config says and distribute (no more
    ranks than cells: `check_rank_count`). A partition file (partition.method: file) is read and
    checked against the mesh and the rank count on one process too (a ConfigError on every rank
    names it and the problem)."""
    check_rank_count(comm, global_mesh)
    owner = read_owner(config, comm, global_mesh)
    if is_serial(comm):
        return Serial(global_mesh, comm)
    from grids.decompose import distribute_mesh

    method = {"metis": "metis", "sfc": "sfc", "file": "auto"}[config.partition.method]
    decomposition = distribute_mesh(comm, global_mesh, owner, halo_depth=halo_depth(physics),
                                    method=method)
    return Distributed(decomposition, comm, dtype)
