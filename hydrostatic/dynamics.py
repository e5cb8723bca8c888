"""Tendencies of the hydrostatic primitive equations in a mass-based hybrid coordinate, TRiSK in the
horizontal and Lorenz staggering in the vertical (DYNAMICO: Dubos et al. 2015, GMD 8, 3131), from
meshops operators (NumPy or CuPy; fields of any float dtype, the mesh geometry in float64).

State (levels last, layers counted from the surface up): the layer mass `mass` (mu = dp / g,
kg m-2, cells x layers), the mass-weighted potential temperature `theta_mass` (mu theta, cells x
layers) and the normal velocity `u` (edges x layers). Fixed: the surface geopotential phi_s
(cells), the Coriolis parameter f (vertices) and the coordinate's share dB[k] = B[k] - B[k+1] of
the surface pressure in each layer. Diagnostics (g gravity, cp, R, p0 of `meshops.vertical`):

    p_i   = p_top + g * sum_layers_from_top_l2i(mass)        interface pressure (surface: p_s)
    p     = avg_i2l(p_i),  theta = theta_mass / mass          layer pressure, potential temperature
    pi    = cp * exner(p),  alpha = specific_volume(p, theta) Exner function (J kg-1 K-1), R T / p
    phi_i = phi_s + g * sum_layers_from_bottom_l2i(mass * alpha),  phi = avg_i2l(phi_i)
    F     = interp_c2e(mass) * u,  D = div_e2c(F),  theta_e = interp_c2e(theta)
    W     = sum_layers_from_bottom_l2i(dB * sum_k D - D)      upward mass flux at interfaces
    q_v   = (curl_e2v(u) + f) / interp_c2v(mass),  q_e = interp_v2e(q_v)

W is what keeps the layers on the coordinate: with it, d mass[k] / dt = -dB[k] sum_j D[j] =
dB[k] (d p_s / dt) / g, and W is 0 at the surface and (to round-off) at the top. Tendencies:

    tend_mass       = -D - div_vflux_i2l(W)
    tend_theta_mass = -div_e2c(theta_e F) - div_vflux_i2l(W * avg_l2i(theta))
                      + mass * (visc2_theta laplacian_c2c(theta) - visc4_theta del4_c2c(theta))
    tend_u = pv_flux_e2e(F, q_e) - grad_c2e(K + phi) - theta_e * grad_c2e(pi)
             - avg_i2l(interp_c2e(W) * diff_l2i(u)) / interp_c2e(mass)
             + visc2 vector_laplacian_e2e(u) - visc4 del4_e2e(u)

with K the kinetic energy on cells in the form `Physics.kinetic_energy`
(`hydrostatic.terms.kinetic_energy`: TRiSK's ke_e2c, MPAS-Atmosphere's blend with the vertex
kinetic energy, or Perot's reconstruction; decision 0030). The centred
vertical advection of u, 0.5 (W_e[k+1] (u[k+1] - u[k]) + W_e[k] (u[k] - u[k-1])) /
mass_e[k], is DYNAMICO's energy-consistent form; the theta flux and the pressure gradient share
theta_e (their energy exchange cancels), the PV flux is TRiSK's energy-neutral one. Every
operation is smooth (no limiter, no remap): the tangent-linear and adjoint of each are exact.
An optional forcing (`hydrostatic.forcing.HeldSuarez`) adds to tend_theta_mass and tend_u.

Tangent-linear and adjoint (`tendencies_tl`, `tendencies_adj`), with respect to the state and the
surface geopotential phi_s (the control), in three pieces, each with its forward beside it: the
column diagnostics (`column_diagnostics_tl` / `_adj`: with theta = theta_mass / mass,

    dp_i = g sum_layers_from_top_l2i(dmass),  dp = avg_i2l(dp_i),  dtheta = (dtheta_mass -
    theta dmass) / mass,  dpi = cp exner_tl(p; dp),  dalpha = specific_volume_tl(p, theta; dp,
    dtheta),  dphi_i = dphi_s + g sum_layers_from_bottom_l2i(dmass alpha + mass dalpha)),

the flux diagnostics (`flux_diagnostics_tl` / `_adj`: dF = interp_c2e(dmass) u + mass_e du,
dW = W(div_e2c(dF)) (W is linear in D), dq_v = (curl_e2v(du) - q_v interp_c2v(dmass)) /
interp_c2v(mass)), and the terms (`hydrostatic.terms`) and the forcing's. The adjoint runs the
terms, then the flux diagnostics, then the column diagnostics in reverse; <T' x, y> = <x, T'^T y>
in the Euclidean inner product over every entry and level (over owned rows on a rank).
"""
from __future__ import annotations

from dataclasses import dataclass

import meshops
from meshops.operators.vertical import CP_DRY
from framework.constants import GRAVITY

from hydrostatic import terms

#: The chains of operators from the exchanged state to the owned tendencies (the halo depth:
#: `meshops.parallel.layers_needed`); the vertical operators need no halo.
CHAINS = (("interp_c2e", "div_e2c", "interp_c2e"),          # W at edges for u's vertical advection
          ("curl_e2v", "interp_v2e", "pv_flux_e2e"),
          ("interp_c2v", "interp_v2e", "pv_flux_e2e"),
          ("interp_c2e", "pv_flux_e2e"),
          ("ke_e2c", "grad_c2e"), ("ke_e2v", "interp_v2c", "grad_c2e"),
          ("reconstruct_e2c", "grad_c2e"),
          ("del4_e2e",), ("del4_c2c",))


@dataclass(frozen=True)
class Physics:
    """Parameters of the tendencies: gravity (m s-2), the model top's pressure p_top (Pa), the
    coordinate's dB (layers, on the fields' backend and dtype), viscosities on u (visc2 m2 s-1,
    visc4 m4 s-1) and on theta (visc2_theta, visc4_theta), the form of the kinetic
    energy (`kinetic_energy`, one of `hydrostatic.terms.KINETIC_ENERGIES`), and a forcing (None: none; else an
    object with `tendencies(mesh, diag, mass, u) -> (tend_theta_mass, tend_u)`, and for the
    tangent-linear and adjoint its `tendencies_tl` and `tendencies_adj`:
    `hydrostatic.forcing.HeldSuarez`)."""
    p_top: float
    dB: object
    gravity: float = GRAVITY
    visc2: float = 0.0
    visc4: float = 0.0
    visc2_theta: float = 0.0
    visc4_theta: float = 0.0
    kinetic_energy: str = "trisk"
    forcing: object = None


def _add(total, part):
    return part if total is None else total + part


# -- the column diagnostics -------------------------------------------------------------------------

def column_diagnostics(mesh, mass, theta_mass, phi_s, physics: Physics) -> dict:
    """The column diagnostics of (mass, theta_mass) (module doc): interface pressure p_i, layer
    pressure p, theta, Exner function pi (times cp), specific volume alpha, interface and layer
    geopotential phi_i and phi."""
    g = physics.gravity
    p_i = physics.p_top + g * meshops.sum_layers_from_top_l2i(mesh, mass)
    p = meshops.avg_i2l(mesh, p_i)
    theta = theta_mass / mass
    alpha = meshops.specific_volume(mesh, p, theta)
    phi_i = phi_s[:, None] + g * meshops.sum_layers_from_bottom_l2i(mesh, mass * alpha)
    return dict(p_i=p_i, p=p, theta=theta, pi=CP_DRY * meshops.exner(mesh, p), alpha=alpha,
                phi_i=phi_i, phi=meshops.avg_i2l(mesh, phi_i))


def column_diagnostics_tl(mesh, d, mass, dmass, dtheta_mass, dphi_s, physics: Physics) -> dict:
    """Tangent-linear of `column_diagnostics` about the diagnostics `d` of `mass`: (dmass,
    dtheta_mass, dphi_s) -> the tangents of p_i, p, theta, pi, alpha, phi_i, phi (module doc);
    dphi_s None: no perturbation of phi_s."""
    g, p, theta = physics.gravity, d["p"], d["theta"]
    dp_i = g * meshops.sum_layers_from_top_l2i(mesh, dmass)
    dp = meshops.avg_i2l(mesh, dp_i)
    dtheta = (dtheta_mass - theta * dmass) / mass
    dalpha = meshops.specific_volume_tl(mesh, p, theta, dp, dtheta)
    dphi_i = g * meshops.sum_layers_from_bottom_l2i(mesh, dmass * d["alpha"] + mass * dalpha)
    if dphi_s is not None:
        dphi_i = dphi_i + dphi_s[:, None]
    return dict(p_i=dp_i, p=dp, theta=dtheta, pi=CP_DRY * meshops.exner_tl(mesh, p, dp),
                alpha=dalpha, phi_i=dphi_i, phi=meshops.avg_i2l(mesh, dphi_i))


def column_diagnostics_adj(mesh, d, mass, a, physics: Physics, mode=None) -> tuple:
    """Adjoint of `column_diagnostics_tl`: the adjoints a[name] of p_i, p, theta, pi, alpha,
    phi_i, phi (None or missing: zero; phi's at least given) -> (mass_adj, theta_mass_adj,
    phi_s_adj), in reverse:

        phi_i_adj = a_phi_i + avg_i2l^T a_phi,  phi_s_adj = sum_k phi_i_adj[k]
        X = g sum_layers_from_bottom_l2i^T(phi_i_adj):  mass_adj = alpha X, alpha_adj = a_alpha + mass X
        (p_adj, theta_adj) = a_p + cp exner_adj(p; a_pi) + specific_volume_adj(p, theta; alpha_adj), + a_theta
        theta_mass_adj = theta_adj / mass,  mass_adj -= theta theta_mass_adj
        mass_adj += g sum_layers_from_top_l2i^T(a_p_i + avg_i2l^T p_adj)
    """
    g, p, theta = physics.gravity, d["p"], d["theta"]
    phi_i_adj = _add(a.get("phi_i"), meshops.avg_i2l_adj(mesh, a["phi"], mode=mode))
    phi_s_adj = phi_i_adj.sum(axis=1)
    X = g * meshops.sum_layers_from_bottom_l2i_adj(mesh, phi_i_adj, mode=mode)
    mass_adj = d["alpha"] * X
    alpha_adj = _add(a.get("alpha"), mass * X)
    p_adj, theta_adj = meshops.specific_volume_adj(mesh, p, theta, alpha_adj, mode=mode)
    p_adj, theta_adj = _add(a.get("p"), p_adj), _add(a.get("theta"), theta_adj)
    if a.get("pi") is not None:
        p_adj = p_adj + CP_DRY * meshops.exner_adj(mesh, p, a["pi"], mode=mode)
    theta_mass_adj = theta_adj / mass
    mass_adj = mass_adj - theta * theta_mass_adj
    p_i_adj = _add(a.get("p_i"), meshops.avg_i2l_adj(mesh, p_adj, mode=mode))
    mass_adj = mass_adj + g * meshops.sum_layers_from_top_l2i_adj(mesh, p_i_adj, mode=mode)
    return mass_adj, theta_mass_adj, phi_s_adj


# -- the vertical mass flux and the flux diagnostics ----------------------------------------------

def vertical_mass_flux(mesh, div, dB):
    """W = sum_layers_from_bottom_l2i(dB * sum_k div - div): the upward mass flux at interfaces
    (kg m-2 s-1) that keeps the layer masses on the hybrid coordinate (module doc). Linear in
    div: its own tangent-linear."""
    total = meshops.sum_layers_from_top_l2i(mesh, div)[:, :1]
    return meshops.sum_layers_from_bottom_l2i(mesh, dB * total - div)


def vertical_mass_flux_adj(mesh, W_adj, dB, mode=None):
    """Adjoint of `vertical_mass_flux`: interfaces -> layers, with Y = sum_layers_from_bottom_l2i^T
    W_adj, div_adj[k] = sum_j dB[j] Y[j] - Y[k] (the column total's adjoint reaches every layer)."""
    Y = meshops.sum_layers_from_bottom_l2i_adj(mesh, W_adj, mode=mode)
    return (dB * Y).sum(axis=1, keepdims=True) - Y


def flux_diagnostics(mesh, mass, u, theta, f_vertex, physics: Physics) -> dict:
    """The horizontal diagnostics of the state (module doc): mass_e, F, div (= D), theta_e, W,
    mass_v = interp_c2v(mass), q_v and q_e."""
    mass_e = meshops.interp_c2e(mesh, mass)
    F = mass_e * u
    div = meshops.div_e2c(mesh, F)
    mass_v = meshops.interp_c2v(mesh, mass)
    q_v = (meshops.curl_e2v(mesh, u) + f_vertex[:, None]) / mass_v
    return dict(mass_e=mass_e, F=F, div=div, theta_e=meshops.interp_c2e(mesh, theta),
                W=vertical_mass_flux(mesh, div, physics.dB), mass_v=mass_v, q_v=q_v,
                q_e=meshops.interp_v2e(mesh, q_v))


def flux_diagnostics_tl(mesh, b, dmass, du, dtheta, physics: Physics) -> dict:
    """Tangent-linear of `flux_diagnostics` about `b` (its forward, with mass and u): (dmass, du,
    dtheta) -> the tangents of mass_e, F, div, theta_e, W, q_e (module doc)."""
    dmass_e = meshops.interp_c2e(mesh, dmass)
    dF = dmass_e * b["u"] + b["mass_e"] * du
    ddiv = meshops.div_e2c(mesh, dF)
    dq_v = (meshops.curl_e2v(mesh, du) - b["q_v"] * meshops.interp_c2v(mesh, dmass)) / b["mass_v"]
    return dict(mass_e=dmass_e, F=dF, div=ddiv, theta_e=meshops.interp_c2e(mesh, dtheta),
                W=vertical_mass_flux(mesh, ddiv, physics.dB), q_e=meshops.interp_v2e(mesh, dq_v))


def flux_diagnostics_adj(mesh, b, a, physics: Physics, mode=None) -> None:
    """Adjoint of `flux_diagnostics_tl`: the adjoints a[name] of mass_e, F, div, theta_e, W, q_e
    (None: zero) added into a["mass"], a["u"], a["theta"], in reverse:

        w = interp_v2e^T(a_q_e) / mass_v:  u_adj += curl_e2v^T w,  mass_adj -= interp_c2v^T(q_v w)
        div_adj = a_div + W^T a_W,  F_adj = a_F + div_e2c^T div_adj
        mass_adj += interp_c2e^T(a_mass_e + u F_adj),  u_adj += mass_e F_adj,
        theta_adj += interp_c2e^T a_theta_e
    """
    if a["q_e"] is not None:
        w = meshops.interp_v2e_adj(mesh, a["q_e"], mode=mode) / b["mass_v"]
        a["u"] = _add(a["u"], meshops.curl_e2v_adj(mesh, w, mode=mode))
        a["mass"] = _add(a["mass"], -meshops.interp_c2v_adj(mesh, b["q_v"] * w, mode=mode))
    if a["W"] is not None:
        a["div"] = _add(a["div"], vertical_mass_flux_adj(mesh, a["W"], physics.dB, mode))
    if a["div"] is not None:
        a["F"] = _add(a["F"], meshops.div_e2c_adj(mesh, a["div"], mode=mode))
    if a["F"] is not None:
        a["mass_e"] = _add(a["mass_e"], b["u"] * a["F"])
        a["u"] = _add(a["u"], b["mass_e"] * a["F"])
    if a["mass_e"] is not None:
        a["mass"] = _add(a["mass"], meshops.interp_c2e_adj(mesh, a["mass_e"], mode=mode))
    if a["theta_e"] is not None:
        a["theta"] = _add(a["theta"], meshops.interp_c2e_adj(mesh, a["theta_e"], mode=mode))


def diagnostics(mesh, mass, theta_mass, u, phi_s, f_vertex, physics: Physics) -> dict:
    """What the terms read of the state: mass, theta_mass, u, its column and flux diagnostics."""
    d = column_diagnostics(mesh, mass, theta_mass, phi_s, physics)
    return dict(mass=mass, theta_mass=theta_mass, u=u, **d,
                **flux_diagnostics(mesh, mass, u, d["theta"], f_vertex, physics))


def diagnostics_tl(mesh, b, dmass, dtheta_mass, du, dphi_s, physics: Physics) -> dict:
    """Tangent-linear of `diagnostics` about `b`: the tangents the terms read, of the same names
    (dphi_s None: no perturbation of phi_s)."""
    t = dict(mass=dmass, theta_mass=dtheta_mass, u=du, phi_s=dphi_s,
             **column_diagnostics_tl(mesh, b, b["mass"], dmass, dtheta_mass, dphi_s, physics))
    t.update(flux_diagnostics_tl(mesh, b, dmass, du, t["theta"], physics))
    return t


# -- the tendencies, their tangent-linear and adjoint ---------------------------------------------

TARGETS = ("tend_mass", "tend_theta_mass", "tend_u")


def _forcing(physics, method: str):
    fn = getattr(physics.forcing, method, None)
    if fn is None:
        raise ValueError(f"Physics.forcing ({type(physics.forcing).__name__}) has no {method}: "
                         "the tangent-linear and adjoint tendencies need it "
                         "(hydrostatic.forcing.HeldSuarez has it)")
    return fn


def tendencies(mesh, mass, theta_mass, u, phi_s, f_vertex, physics: Physics):
    """(tend_mass, tend_theta_mass, tend_u) of the state (module doc): the active terms of
    `hydrostatic.terms` summed in order, then the forcing; `mesh` a mesh or a
    `meshops.DeviceMesh`. On a rank's local mesh, owned rows are right when the state is valid
    to the halo depth of `CHAINS`."""
    b = diagnostics(mesh, mass, theta_mass, u, phi_s, f_vertex, physics)
    tend = dict.fromkeys(TARGETS)
    for term in terms.active_terms(physics):
        tend[term.target] = _add(tend[term.target], term.forward(mesh, b, physics))
    if physics.forcing is not None:
        forced_theta_mass, forced_u = physics.forcing.tendencies(mesh, b, mass, u)
        tend["tend_theta_mass"] = tend["tend_theta_mass"] + forced_theta_mass
        tend["tend_u"] = tend["tend_u"] + forced_u
    return tuple(tend[target] for target in TARGETS)


def tendencies_tl(mesh, mass, theta_mass, u, phi_s, f_vertex, physics: Physics, dmass, dtheta_mass,
                  du, dphi_s=None):
    """Tangent-linear of `tendencies` about (mass, theta_mass, u, phi_s): (dmass, dtheta_mass, du,
    dphi_s) -> (dtend_mass, dtend_theta_mass, dtend_u): the diagnostics' tangents (module doc),
    then each term's and the forcing's, summed as the forward sums them. dphi_s None: no
    perturbation of phi_s."""
    b = diagnostics(mesh, mass, theta_mass, u, phi_s, f_vertex, physics)
    t = diagnostics_tl(mesh, b, dmass, dtheta_mass, du, dphi_s, physics)
    tend = dict.fromkeys(TARGETS)
    for term in terms.active_terms(physics):
        tend[term.target] = _add(tend[term.target], term.tangent(mesh, b, t, physics))
    if physics.forcing is not None:
        forced_theta_mass, forced_u = _forcing(physics, "tendencies_tl")(mesh, b, mass, u, t, dmass, du)
        tend["tend_theta_mass"] = tend["tend_theta_mass"] + forced_theta_mass
        tend["tend_u"] = tend["tend_u"] + forced_u
    return tuple(tend[target] for target in TARGETS)


def tendencies_adj(mesh, mass, theta_mass, u, phi_s, f_vertex, physics: Physics, tend_mass_adj,
                   tend_theta_mass_adj, tend_u_adj, *, mode=None):
    """Adjoint of `tendencies_tl` about (mass, theta_mass, u, phi_s): (tend_mass_adj,
    tend_theta_mass_adj, tend_u_adj) -> (mass_adj, theta_mass_adj, u_adj, phi_s_adj): the
    forcing's and the terms' adjoints, then `flux_diagnostics_adj`, then
    `column_diagnostics_adj`, so that <dtend, tend_adj> = <dstate, state_adj> + <dphi_s,
    phi_s_adj>. `mode`: the operators' adjoint mode (None: the meshops default). On a rank's
    local mesh, owned rows are valid when the inputs are valid to the forward's halo depth."""
    b = diagnostics(mesh, mass, theta_mass, u, phi_s, f_vertex, physics)
    g = dict(tend_mass=tend_mass_adj, tend_theta_mass=tend_theta_mass_adj, tend_u=tend_u_adj)
    a = dict.fromkeys(("mass", "u", "theta", "p", "p_i", "pi", "phi", "mass_e", "F", "div",
                       "theta_e", "W", "q_e"))
    if physics.forcing is not None:
        column_adj, a["mass"], a["u"] = _forcing(physics, "tendencies_adj")(
            mesh, b, mass, u, tend_theta_mass_adj, tend_u_adj, mode=mode)
        a.update(column_adj)
    for term in reversed(terms.active_terms(physics)):
        term.adjoint(mesh, b, a, g[term.target], physics, mode)
    flux_diagnostics_adj(mesh, b, a, physics, mode)
    mass_adj, theta_mass_adj, phi_s_adj = column_diagnostics_adj(mesh, b, mass, a, physics, mode)
    return a["mass"] + mass_adj, theta_mass_adj, a["u"], phi_s_adj
