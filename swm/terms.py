"""The terms of the shallow-water tendencies, each in one place: its forward, tangent-linear and
adjoint side by side, and the operator chains (hence the halo layers) it reads.

The terms share the diagnostics of the state (`swm.tendencies.diagnostics`: h_edge, h_vertex,
pv_vertex, pv_edge, ke, MPAS names). A term is active for some physics (`active`) and either adds
to the tendencies (tend_h on cells, tend_u on edges) or, as APVM, corrects pv_edge, which the PV
flux reads. Tangents and adjoints follow the forward line by line (c = apvm * dt, g = gravity):

    ThicknessFlux  tend_h  = -flux_div_e2c(h_edge, u)
    PVFlux         tend_u += pv_flux_e2e(h_edge * u, pv_edge)
    Bernoulli      tend_u -= grad_c2e(ke + g (h + b))             (kinetic energy and topography)
    Del2           tend_u += visc2 * vector_laplacian_e2e(u)
    Del4           tend_u -= visc4 * del4_e2e(u)
    APVM           pv_edge -= c (u grad_c2e(pv_cell) + v grad_v2e(pv_vertex)),
                   v = tangential_e2e(u), pv_cell = interp_v2c(pv_vertex)

The fused kernels (`swm.fused`, `swm.fused_tangent`, `swm.fused_adjoint`) compute the terms
marked `fused`; the others, of every target, they add through `forward` / `tangent` / `adjoint`
here (`extra`: tend_h added to the cell pass's update, tend_u to the edge pass's; the pv_edge
corrections subtracted in the pv pass). A new term is a class here (and its physics setting), or
an object in `Physics.extra_terms`: the tendencies, their tangent and adjoint, the RK4 step, the
fused paths and the halo depth pick it up.

`forward(mesh, h, u, b, d, physics)` reads the state and its diagnostics `d` (b is None for a
pv_edge term: the diagnostics do not read it). `tangent(mesh, base, t, physics)` reads the base
state `base` (`swm.tendencies.linearisation`: u, h, h_edge, h_vertex, pv_vertex, pv_edge) and the
tangents `t` (dh, du, db (None: no perturbation of b), dh_edge, dpv_vertex, dpv_edge);
`adjoint(mesh, base, a, physics, mode)` reads the adjoint tendencies a["tend_h"], a["tend_u"],
a["pv_edge"] and adds into the adjoints a["h"], a["u"], a["b"], a["h_edge"], a["pv_edge"] (a
tend_* term), a["pv_vertex"] (None: zero so far). The fused paths hold some of these fields and
derive the others when a term first reads one (`Fields`). A term that reads more of the base
state has the hook `base(mesh, base, physics) -> dict` (APVM: v, grad_pv_cell, grad_pv_vertex):
its tangent and adjoint get the shared fields with its own (`base_of`), its own alone.
"""
from __future__ import annotations

from collections import ChainMap

import meshops


def _add(total, part):
    return part if total is None else total + part


def _sub(total, part):
    return -part if total is None else total - part


class ThicknessFlux:
    """tend_h = -flux_div_e2c(h_edge, u): the divergence of the thickness flux."""
    name, fused, target = "thickness_flux", True, "tend_h"
    chains = (("interp_c2e", "flux_div_e2c"),)

    @staticmethod
    def active(physics) -> bool:
        return True

    @staticmethod
    def forward(mesh, h, u, b, d, physics):
        return -meshops.flux_div_e2c(mesh, d["h_edge"], u)

    @staticmethod
    def tangent(mesh, base, t, physics):
        return -meshops.flux_div_e2c_tl(mesh, base["h_edge"], base["u"], t["dh_edge"], t["du"])

    @staticmethod
    def adjoint(mesh, base, a, physics, mode):
        h_edge_adj, u_adj = meshops.flux_div_e2c_adj(mesh, base["h_edge"], base["u"], -a["tend_h"],
                                                     mode=mode)
        a["h_edge"], a["u"] = _add(a["h_edge"], h_edge_adj), _add(a["u"], u_adj)


class PVFlux:
    """tend_u += pv_flux_e2e(h_edge * u, pv_edge): TRiSK's energy-conserving nonlinear Coriolis
    term, sum_j weightsOnEdge F[eoe_j] (pv_edge[e] + pv_edge[eoe_j]) / 2."""
    name, fused, target = "pv_flux", True, "tend_u"
    chains = (("interp_c2e", "pv_flux_e2e"), ("interp_c2v", "interp_v2e", "pv_flux_e2e"),
              ("curl_e2v", "interp_v2e", "pv_flux_e2e"))

    @staticmethod
    def active(physics) -> bool:
        return True

    @staticmethod
    def forward(mesh, h, u, b, d, physics):
        return meshops.pv_flux_e2e(mesh, d["h_edge"] * u, d["pv_edge"])

    @staticmethod
    def tangent(mesh, base, t, physics):
        h_edge, u = base["h_edge"], base["u"]
        return meshops.pv_flux_e2e_tl(mesh, h_edge * u, base["pv_edge"],
                                      t["dh_edge"] * u + h_edge * t["du"], t["dpv_edge"])

    @staticmethod
    def adjoint(mesh, base, a, physics, mode):
        h_edge, u = base["h_edge"], base["u"]
        F_adj, pv_edge_adj = meshops.pv_flux_e2e_adj(mesh, h_edge * u, base["pv_edge"], a["tend_u"],
                                                     mode=mode)
        a["pv_edge"] = _add(a["pv_edge"], pv_edge_adj)
        a["h_edge"] = _add(a["h_edge"], u * F_adj)
        a["u"] = _add(a["u"], h_edge * F_adj)


class Bernoulli:
    """tend_u -= grad_c2e(ke + g (h + b)): the gradient of the Bernoulli function, kinetic energy
    and the bottom topography b (which the tangent and adjoint treat as a control)."""
    name, fused, target = "bernoulli", True, "tend_u"
    chains = (("ke_e2c", "grad_c2e"),)

    @staticmethod
    def active(physics) -> bool:
        return True

    @staticmethod
    def forward(mesh, h, u, b, d, physics):
        return -meshops.grad_c2e(mesh, d["ke"] + physics.gravity * (h + b))

    @staticmethod
    def tangent(mesh, base, t, physics):
        dh, db = t["dh"], t["db"]
        dphi = meshops.ke_e2c_tl(mesh, base["u"], t["du"]) + physics.gravity * (dh if db is None else dh + db)
        return -meshops.grad_c2e(mesh, dphi)

    @staticmethod
    def adjoint(mesh, base, a, physics, mode):
        phi_adj = -meshops.grad_c2e_adj(mesh, a["tend_u"], mode=mode)
        a["u"] = _add(a["u"], meshops.ke_e2c_adj(mesh, base["u"], phi_adj, mode=mode))
        b_adj = physics.gravity * phi_adj
        a["b"] = _add(a["b"], b_adj)
        a["h"] = _add(a["h"], b_adj.copy())


class Del2:
    """tend_u += visc2 * vector_laplacian_e2e(u) (MPAS del2u), linear in u."""
    name, fused, target = "del2", False, "tend_u"
    chains = (("vector_laplacian_e2e",),)

    @staticmethod
    def active(physics) -> bool:
        return bool(physics.visc2)

    @staticmethod
    def forward(mesh, h, u, b, d, physics):
        return physics.visc2 * meshops.vector_laplacian_e2e(mesh, u)

    @staticmethod
    def tangent(mesh, base, t, physics):
        return physics.visc2 * meshops.vector_laplacian_e2e(mesh, t["du"])

    @staticmethod
    def adjoint(mesh, base, a, physics, mode):
        a["u"] = _add(a["u"], physics.visc2 * meshops.vector_laplacian_e2e_adj(mesh, a["tend_u"], mode=mode))


class Del4:
    """tend_u -= visc4 * del4_e2e(u) (MPAS del4u), linear in u."""
    name, fused, target = "del4", False, "tend_u"
    chains = (("del4_e2e",),)

    @staticmethod
    def active(physics) -> bool:
        return bool(physics.visc4)

    @staticmethod
    def forward(mesh, h, u, b, d, physics):
        return -(physics.visc4 * meshops.del4_e2e(mesh, u))

    @staticmethod
    def tangent(mesh, base, t, physics):
        return -(physics.visc4 * meshops.del4_e2e(mesh, t["du"]))

    @staticmethod
    def adjoint(mesh, base, a, physics, mode):
        a["u"] = _sub(a["u"], physics.visc4 * meshops.del4_e2e_adj(mesh, a["tend_u"], mode=mode))


class APVM:
    """The anticipated potential vorticity method (Sadourny and Basdevant 1985, as MPAS): pv_edge -=
    c (u grad_c2e(pv_cell) + v grad_v2e(pv_vertex)), c = apvm * dt."""
    name, fused, target = "apvm", False, "pv_edge"
    chains = (("interp_c2v", "interp_v2c", "grad_c2e", "pv_flux_e2e"), ("tangential_e2e", "pv_flux_e2e"))

    @staticmethod
    def active(physics) -> bool:
        return bool(physics.apvm)

    @staticmethod
    def forward(mesh, h, u, b, d, physics):
        """The correction pv_edge loses (a positive quantity subtracted)."""
        v = meshops.tangential_e2e(mesh, u)
        pv_cell = meshops.interp_v2c(mesh, d["pv_vertex"])
        return physics.apvm * physics.dt * (
            u * meshops.grad_c2e(mesh, pv_cell) + v * meshops.grad_v2e(mesh, d["pv_vertex"]))

    @staticmethod
    def base(mesh, base, physics) -> dict:
        """What the tangent and adjoint read of the base state besides `base`: v, grad_pv_cell,
        grad_pv_vertex."""
        u, pv_vertex = base["u"], base["pv_vertex"]
        return dict(v=meshops.tangential_e2e(mesh, u),
                    grad_pv_cell=meshops.grad_c2e(mesh, meshops.interp_v2c(mesh, pv_vertex)),
                    grad_pv_vertex=meshops.grad_v2e(mesh, pv_vertex))

    @staticmethod
    def tangent(mesh, base, t, physics):
        """The tangent of the correction (subtracted from dpv_edge)."""
        c = physics.apvm * physics.dt
        du, dpv_vertex = t["du"], t["dpv_vertex"]
        dv = meshops.tangential_e2e(mesh, du)
        dpv_cell = meshops.interp_v2c(mesh, dpv_vertex)
        return c * (du * base["grad_pv_cell"] + base["u"] * meshops.grad_c2e(mesh, dpv_cell)
                    + dv * base["grad_pv_vertex"] + base["v"] * meshops.grad_v2e(mesh, dpv_vertex))

    @staticmethod
    def adjoint(mesh, base, a, physics, mode):
        s = (-physics.apvm * physics.dt) * a["pv_edge"]
        a["u"] = _add(a["u"], s * base["grad_pv_cell"]
                      + meshops.tangential_e2e_adj(mesh, s * base["grad_pv_vertex"], mode=mode))
        pv_cell_adj = meshops.grad_c2e_adj(mesh, s * base["u"], mode=mode)
        a["pv_vertex"] = _add(a["pv_vertex"], meshops.interp_v2c_adj(mesh, pv_cell_adj, mode=mode)
                              + meshops.grad_v2e_adj(mesh, s * base["v"], mode=mode))


#: Every term, in the order the tendencies sum them (APVM, a pv_edge correction, before the PV flux
#: reads pv_edge).
TERMS = (APVM, ThicknessFlux, PVFlux, Bernoulli, Del2, Del4)


class Relaxation:
    """tend_u -= (u - u_ref) / tau: relaxation of u towards an edge field u_ref (the rank's local
    rows, on the model's backend) over the time scale tau (s); linear in u. A term to add through
    `Physics(extra_terms=(Relaxation(u_ref, tau),))`."""
    name, fused, target = "relaxation", False, "tend_u"
    chains = ()

    def __init__(self, u_ref, tau: float):
        if not tau > 0:
            raise ValueError(f"Relaxation: tau = {tau!r}: expected a positive time scale in seconds")
        self.u_ref, self.tau = u_ref, float(tau)

    def active(self, physics) -> bool:
        return True

    def forward(self, mesh, h, u, b, d, physics):
        return -((u - self.u_ref) / self.tau)

    def tangent(self, mesh, base, t, physics):
        return -(t["du"] / self.tau)

    def adjoint(self, mesh, base, a, physics, mode):
        a["u"] = _sub(a["u"], a["tend_u"] / self.tau)


def active_terms(physics, *, target=None, fused=None) -> tuple:
    """The terms active for `physics` (`TERMS`, then the physics' own `extra_terms`), in order;
    only those of `target` and/or `fused` if given."""
    return tuple(t for t in TERMS + tuple(physics.extra_terms)
                 if t.active(physics) and (target is None or t.target == target)
                 and (fused is None or t.fused == fused))


def chains(physics) -> list:
    """The operator chains of the active terms, from the state to the owned tendencies."""
    return [chain for term in active_terms(physics) for chain in term.chains]


def extra(mesh, h, u, b, d, physics, target: str):
    """The sum of the `target` (tend_h or tend_u) parts of the active terms the fused kernels do
    not compute, in order (None: none)."""
    total = None
    for term in active_terms(physics, target=target, fused=False):
        total = _add(total, term.forward(mesh, h, u, b, d, physics))
    return total


def pv_correction(mesh, h, u, d, physics):
    """The sum of the active pv_edge corrections (subtracted from pv_edge once), in order (None:
    none)."""
    total = None
    for term in active_terms(physics, target="pv_edge"):
        total = _add(total, term.forward(mesh, h, u, None, d, physics))
    return total


def base_of(term, mesh, base, physics):
    """The base fields `term`'s tangent and adjoint read: `base`, with the term's own
    (`term.base(mesh, base, physics)`) first where it has that hook."""
    hook = getattr(term, "base", None)
    return base if hook is None else ChainMap(hook(mesh, base, physics), base)



def tangent_sum(mesh, base, t, physics, **select):
    """The sum of the tangents of the active terms `select`ed (`active_terms`'s target, fused),
    each with its own base fields (`base_of`), in order (None: none)."""
    total = None
    for term in active_terms(physics, **select):
        total = _add(total, term.tangent(mesh, base_of(term, mesh, base, physics), t, physics))
    return total

#: How `Fields` derives a field it does not hold, from those it holds (MPAS names).
DERIVED = {
    "h_edge": lambda mesh, f: meshops.interp_c2e(mesh, f["h"]),
    "h_vertex": lambda mesh, f: meshops.interp_c2v(mesh, f["h"]),
    "vorticity": lambda mesh, f: meshops.curl_e2v(mesh, f["u"]),
    "ke": lambda mesh, f: meshops.ke_e2c(mesh, f["u"]),
    "pv_edge": lambda mesh, f: meshops.interp_v2e(mesh, f["pv_vertex"]),
    "dh_edge": lambda mesh, f: meshops.interp_c2e(mesh, f["dh"]),
    "dpv_edge": lambda mesh, f: meshops.interp_v2e(mesh, f["dpv_vertex"]),
}


class Fields(dict):
    """The fields a fused path holds (diagnostics, base state or tangents), which derives one it
    does not hold (`DERIVED`) when a term first reads it, as the operator path computes it."""

    def __init__(self, mesh, **fields):
        super().__init__(fields)
        self.mesh = mesh

    def __missing__(self, key):
        if key not in DERIVED:
            raise KeyError(f"swm.terms: a term read {key!r}; expected one of "
                           f"{sorted(set(self) | set(DERIVED))}")
        value = self[key] = DERIVED[key](self.mesh, self)
        return value
