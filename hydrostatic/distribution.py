"""Where the hydrostatic model's fields live: one process, or every rank with its local mesh and
the state (mass, theta_mass, u; layers last) exchanged in one message per neighbour per RK stage
(`meshops.parallel.StateExchange`, as the shallow-water model exchanges (h, u)); the tangent-linear
and adjoint steps exchange perturbations and adjoint tendencies the same way (`exchange_tl`), the
surface geopotential's perturbation in the same message with the first stage's."""
from __future__ import annotations

from meshops.parallel import StateExchange, layers_needed
from meshops.parallel.comm import is_serial
from framework.distribution import Ranks, Serial, check_rank_count, read_owner

from hydrostatic.dynamics import CHAINS

STATE = ("mass", "theta_mass", "u")
LOCATIONS = {"mass": "cell", "theta_mass": "cell", "u": "edge"}


def halo_depth() -> int:
    """Cell layers of halo the tendencies need after one exchange per stage."""
    return max(layers_needed(chain) for chain in CHAINS)


class Distributed(Ranks):
    """Every rank of `comm` with its `grids.decompose.Decomposition`; (mass, theta_mass, u) of
    nlev levels exchanged in one message per neighbour; with a perturbation of phi_s, the four
    fields through a second exchange, `control_exchange` {mass, theta_mass, u, phi_s}."""

    def __init__(self, decomposition, comm, dtype, nlev: int, *, transport=None):
        super().__init__(decomposition, comm)
        specs = {name: (LOCATIONS[name], nlev, dtype) for name in STATE}
        self.state_exchange = StateExchange(decomposition, specs, comm, transport=transport)
        self.control_exchange = StateExchange(decomposition, {**specs, "phi_s": ("cell", None, dtype)},
                                              comm, transport=transport)

    def exchange(self, mass, theta_mass, u) -> None:
        self.state_exchange.exchange({"mass": mass, "theta_mass": theta_mass, "u": u})

    def exchange_tl(self, dmass, dtheta_mass, du, dphi_s=None) -> None:
        """The forward exchange of a perturbation (dmass, dtheta_mass, du[, dphi_s]), in place."""
        fields = {"mass": dmass, "theta_mass": dtheta_mass, "u": du}
        if dphi_s is None:
            self.state_exchange.exchange(fields)
        else:
            self.control_exchange.exchange({**fields, "phi_s": dphi_s})


def distribute(config, comm, global_mesh, dtype, nlev: int):
    """Serial on one rank; else partition on rank 0 as config.partition says and distribute (no
    more ranks than cells: `framework.distribution.check_rank_count`)."""
    check_rank_count(comm, global_mesh)
    owner = read_owner(config, comm, global_mesh)
    if is_serial(comm):
        return Serial(global_mesh, comm)
    from grids.decompose import distribute_mesh

    method = {"metis": "metis", "sfc": "sfc", "file": "auto"}[config.partition.method]
    decomposition = distribute_mesh(comm, global_mesh, owner, halo_depth=halo_depth(),
                                    method=method)
    return Distributed(decomposition, comm, dtype, nlev)
