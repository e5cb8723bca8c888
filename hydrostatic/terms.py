"""The terms of the hydrostatic tendencies, each in one place: its forward, tangent-linear and
adjoint side by side (`hydrostatic.dynamics` sums them; its module doc has the equations).

Every term reads the forward's diagnostics `b` (`hydrostatic.dynamics.diagnostics`: the state
mass, theta_mass, u, the column diagnostics p_i, p, theta, pi, alpha, phi_i, phi and the flux
diagnostics mass_e, F, div, theta_e, W, mass_v, q_v, q_e). Its tangent reads the tangents `t` of
the same names (`diagnostics_tl`); its adjoint takes the adjoint `g` of its target and adds into
the adjoints `a` of the same names (None: zero so far), so that <tangent(t), g> = sum over the
names it reads of <t[name], a[name] added>. With Dv = div_vflux_i2l, the lines are:

    MassFlux           tend_mass        = -D - Dv(W)
    ThetaFlux          tend_theta_mass  = -div_e2c(theta_e F) - Dv(W avg_l2i(theta))
    Del2Theta          tend_theta_mass += visc2_theta mass laplacian_c2c(theta)
    Del4Theta          tend_theta_mass -= visc4_theta mass del4_c2c(theta)
    PVFlux             tend_u  = pv_flux_e2e(F, q_e)
    Bernoulli          tend_u -= grad_c2e(K + phi),  K = kinetic_energy(u)
    PressureGradient   tend_u -= theta_e grad_c2e(pi)
    VerticalAdvection  tend_u -= V / mass_e,  V = avg_i2l(interp_c2e(W) diff_l2i(u))
    Del2               tend_u += visc2 vector_laplacian_e2e(u)
    Del4               tend_u -= visc4 del4_e2e(u)

Tangents by the product rule, e.g. VerticalAdvection: -(dV - V dmass_e / mass_e) / mass_e with
dV = avg_i2l(interp_c2e(dW) diff_l2i(u) + interp_c2e(W) diff_l2i(du)); adjoints the transposes
line by line (each method's docstring). Each returns its signed part, so the sums are the
forward's expression, bitwise.
"""
from __future__ import annotations

import meshops


def _add(total, part):
    return part if total is None else total + part


def _sub(total, part):
    return -part if total is None else total - part


class MassFlux:
    """tend_mass = -D - Dv(W): horizontal and vertical mass-flux divergence."""
    target = "tend_mass"

    @staticmethod
    def active(physics) -> bool:
        return True

    @staticmethod
    def forward(mesh, b, physics):
        return -b["div"] - meshops.div_vflux_i2l(mesh, b["W"])

    @staticmethod
    def tangent(mesh, b, t, physics):
        return -t["div"] - meshops.div_vflux_i2l(mesh, t["W"])

    @staticmethod
    def adjoint(mesh, b, a, g, physics, mode):
        """div_adj -= g, W_adj -= Dv^T g."""
        a["div"] = _sub(a["div"], g)
        a["W"] = _sub(a["W"], meshops.div_vflux_i2l_adj(mesh, g, mode=mode))


class ThetaFlux:
    """tend_theta_mass = -div_e2c(theta_e F) - Dv(W avg_l2i(theta)): flux form of theta's
    advection, theta at interfaces the mean of the layers'."""
    target = "tend_theta_mass"

    @staticmethod
    def active(physics) -> bool:
        return True

    @staticmethod
    def forward(mesh, b, physics):
        return (-meshops.div_e2c(mesh, b["theta_e"] * b["F"])
                - meshops.div_vflux_i2l(mesh, b["W"] * meshops.avg_l2i(mesh, b["theta"])))

    @staticmethod
    def tangent(mesh, b, t, physics):
        horizontal = t["theta_e"] * b["F"] + b["theta_e"] * t["F"]
        vertical = (t["W"] * meshops.avg_l2i(mesh, b["theta"])
                    + b["W"] * meshops.avg_l2i(mesh, t["theta"]))
        return -meshops.div_e2c(mesh, horizontal) - meshops.div_vflux_i2l(mesh, vertical)

    @staticmethod
    def adjoint(mesh, b, a, g, physics, mode):
        """h = -div_e2c^T g: theta_e_adj += F h, F_adj += theta_e h; v = -Dv^T g: W_adj +=
        avg_l2i(theta) v, theta_adj += avg_l2i^T(W v)."""
        h = -meshops.div_e2c_adj(mesh, g, mode=mode)
        a["theta_e"] = _add(a["theta_e"], b["F"] * h)
        a["F"] = _add(a["F"], b["theta_e"] * h)
        v = -meshops.div_vflux_i2l_adj(mesh, g, mode=mode)
        a["W"] = _add(a["W"], meshops.avg_l2i(mesh, b["theta"]) * v)
        a["theta"] = _add(a["theta"], meshops.avg_l2i_adj(mesh, b["W"] * v, mode=mode))


class Del2Theta:
    """tend_theta_mass += visc2_theta mass laplacian_c2c(theta)."""
    target = "tend_theta_mass"

    @staticmethod
    def active(physics) -> bool:
        return bool(physics.visc2_theta)

    @staticmethod
    def forward(mesh, b, physics):
        return physics.visc2_theta * b["mass"] * meshops.laplacian_c2c(mesh, b["theta"])

    @staticmethod
    def tangent(mesh, b, t, physics):
        return physics.visc2_theta * (t["mass"] * meshops.laplacian_c2c(mesh, b["theta"])
                                      + b["mass"] * meshops.laplacian_c2c(mesh, t["theta"]))

    @staticmethod
    def adjoint(mesh, b, a, g, physics, mode):
        """mass_adj += c L(theta) g, theta_adj += c L^T(mass g), c = visc2_theta."""
        c = physics.visc2_theta
        a["mass"] = _add(a["mass"], c * meshops.laplacian_c2c(mesh, b["theta"]) * g)
        a["theta"] = _add(a["theta"], c * meshops.laplacian_c2c_adj(mesh, b["mass"] * g, mode=mode))


class Del4Theta:
    """tend_theta_mass -= visc4_theta mass del4_c2c(theta)."""
    target = "tend_theta_mass"

    @staticmethod
    def active(physics) -> bool:
        return bool(physics.visc4_theta)

    @staticmethod
    def forward(mesh, b, physics):
        return (-physics.visc4_theta) * b["mass"] * meshops.del4_c2c(mesh, b["theta"])

    @staticmethod
    def tangent(mesh, b, t, physics):
        return (-physics.visc4_theta) * (t["mass"] * meshops.del4_c2c(mesh, b["theta"])
                                         + b["mass"] * meshops.del4_c2c(mesh, t["theta"]))

    @staticmethod
    def adjoint(mesh, b, a, g, physics, mode):
        """mass_adj -= c del4(theta) g, theta_adj -= c del4^T(mass g), c = visc4_theta."""
        c = physics.visc4_theta
        a["mass"] = _sub(a["mass"], c * meshops.del4_c2c(mesh, b["theta"]) * g)
        a["theta"] = _sub(a["theta"], c * meshops.del4_c2c_adj(mesh, b["mass"] * g, mode=mode))


class PVFlux:
    """tend_u = pv_flux_e2e(F, q_e): TRiSK's energy-neutral nonlinear Coriolis term."""
    target = "tend_u"

    @staticmethod
    def active(physics) -> bool:
        return True

    @staticmethod
    def forward(mesh, b, physics):
        return meshops.pv_flux_e2e(mesh, b["F"], b["q_e"])

    @staticmethod
    def tangent(mesh, b, t, physics):
        return meshops.pv_flux_e2e_tl(mesh, b["F"], b["q_e"], t["F"], t["q_e"])

    @staticmethod
    def adjoint(mesh, b, a, g, physics, mode):
        """(F_adj, q_e_adj) += pv_flux_e2e_adj(F, q_e; g)."""
        F_adj, q_adj = meshops.pv_flux_e2e_adj(mesh, b["F"], b["q_e"], g, mode=mode)
        a["F"], a["q_e"] = _add(a["F"], F_adj), _add(a["q_e"], q_adj)


#: The kinetic energies on cells (`kinetic_energy`): TRiSK's cell form, MPAS-Atmosphere's blend
#: of the cell and vertex forms, and half the square of Perot's reconstructed velocity.
KINETIC_ENERGIES = ("trisk", "mpas", "perot")
#: MPAS-Atmosphere's vertex share of the blend (1 - ke_fact, ke_fact = 1 - 0.375).
MPAS_VERTEX_WEIGHT = 0.375


def kinetic_energy(mesh, u, form):
    """K on cells by `form` (`KINETIC_ENERGIES`):

        trisk:  ke_e2c(u)
        mpas:   (1 - w) ke_e2c(u) + w interp_v2c(ke_e2v(u)),  w = MPAS_VERTEX_WEIGHT
        perot:  0.5 |reconstruct_e2c(u)|^2
    """
    if form == "trisk":
        return meshops.ke_e2c(mesh, u)
    if form == "mpas":
        w = MPAS_VERTEX_WEIGHT
        return (1 - w) * meshops.ke_e2c(mesh, u) + w * meshops.interp_v2c(mesh, meshops.ke_e2v(mesh, u))
    X, Y, Z = meshops.reconstruct_e2c(mesh, u)
    return 0.5 * (X * X + Y * Y + Z * Z)


def kinetic_energy_tl(mesh, u, du, form):
    """Tangent-linear of `kinetic_energy` about u (perot: R(u) . R(du), R = reconstruct_e2c)."""
    if form == "trisk":
        return meshops.ke_e2c_tl(mesh, u, du)
    if form == "mpas":
        w = MPAS_VERTEX_WEIGHT
        return ((1 - w) * meshops.ke_e2c_tl(mesh, u, du)
                + w * meshops.interp_v2c(mesh, meshops.ke_e2v_tl(mesh, u, du)))
    R, dR = meshops.reconstruct_e2c(mesh, u), meshops.reconstruct_e2c(mesh, du)
    return R[0] * dR[0] + R[1] * dR[1] + R[2] * dR[2]


def kinetic_energy_adj(mesh, u, g, form, mode=None):
    """Adjoint of `kinetic_energy_tl` about u: trisk ke_e2c_adj(u; g); mpas (1 - w)
    ke_e2c_adj(u; g) + w ke_e2v_adj(u; interp_v2c^T g); perot R^T(g R(u))."""
    if form == "trisk":
        return meshops.ke_e2c_adj(mesh, u, g, mode=mode)
    if form == "mpas":
        w = MPAS_VERTEX_WEIGHT
        return ((1 - w) * meshops.ke_e2c_adj(mesh, u, g, mode=mode)
                + w * meshops.ke_e2v_adj(mesh, u, meshops.interp_v2c_adj(mesh, g, mode=mode),
                                         mode=mode))
    X, Y, Z = meshops.reconstruct_e2c(mesh, u)
    return meshops.reconstruct_e2c_adj(mesh, g * X, g * Y, g * Z, mode=mode)


class Bernoulli:
    """tend_u -= grad_c2e(K + phi): kinetic energy (`kinetic_energy` of the form
    physics.kinetic_energy) and geopotential."""
    target = "tend_u"

    @staticmethod
    def active(physics) -> bool:
        return True

    @staticmethod
    def forward(mesh, b, physics):
        return -meshops.grad_c2e(mesh, kinetic_energy(mesh, b["u"], physics.kinetic_energy)
                                 + b["phi"])

    @staticmethod
    def tangent(mesh, b, t, physics):
        return -meshops.grad_c2e(mesh, kinetic_energy_tl(mesh, b["u"], t["u"],
                                                         physics.kinetic_energy) + t["phi"])

    @staticmethod
    def adjoint(mesh, b, a, g, physics, mode):
        """c = -grad_c2e^T g: u_adj += kinetic_energy_adj(u; c), phi_adj += c."""
        c = -meshops.grad_c2e_adj(mesh, g, mode=mode)
        a["u"] = _add(a["u"], kinetic_energy_adj(mesh, b["u"], c, physics.kinetic_energy, mode))
        a["phi"] = _add(a["phi"], c)


class PressureGradient:
    """tend_u -= theta_e grad_c2e(pi): the pressure-gradient force in Exner form."""
    target = "tend_u"

    @staticmethod
    def active(physics) -> bool:
        return True

    @staticmethod
    def forward(mesh, b, physics):
        return -(b["theta_e"] * meshops.grad_c2e(mesh, b["pi"]))

    @staticmethod
    def tangent(mesh, b, t, physics):
        return -(t["theta_e"] * meshops.grad_c2e(mesh, b["pi"])
                 + b["theta_e"] * meshops.grad_c2e(mesh, t["pi"]))

    @staticmethod
    def adjoint(mesh, b, a, g, physics, mode):
        """theta_e_adj -= grad(pi) g, pi_adj -= grad_c2e^T(theta_e g)."""
        a["theta_e"] = _sub(a["theta_e"], meshops.grad_c2e(mesh, b["pi"]) * g)
        a["pi"] = _sub(a["pi"], meshops.grad_c2e_adj(mesh, b["theta_e"] * g, mode=mode))


class VerticalAdvection:
    """tend_u -= V / mass_e, V = avg_i2l(interp_c2e(W) diff_l2i(u)): DYNAMICO's centred,
    energy-consistent vertical advection of u."""
    target = "tend_u"

    @staticmethod
    def active(physics) -> bool:
        return True

    @staticmethod
    def _V(mesh, W, u):
        return meshops.avg_i2l(mesh, meshops.interp_c2e(mesh, W) * meshops.diff_l2i(mesh, u))

    @staticmethod
    def forward(mesh, b, physics):
        return -(VerticalAdvection._V(mesh, b["W"], b["u"]) / b["mass_e"])

    @staticmethod
    def tangent(mesh, b, t, physics):
        dV = meshops.avg_i2l(mesh, meshops.interp_c2e(mesh, t["W"]) * meshops.diff_l2i(mesh, b["u"])
                             + meshops.interp_c2e(mesh, b["W"]) * meshops.diff_l2i(mesh, t["u"]))
        V = VerticalAdvection._V(mesh, b["W"], b["u"])
        return -(dV - V * t["mass_e"] / b["mass_e"]) / b["mass_e"]

    @staticmethod
    def adjoint(mesh, b, a, g, physics, mode):
        """mass_e_adj += V g / mass_e^2; h = avg_i2l^T(-g / mass_e): W_adj +=
        interp_c2e^T(diff_l2i(u) h), u_adj += diff_l2i^T(interp_c2e(W) h)."""
        mass_e = b["mass_e"]
        V = VerticalAdvection._V(mesh, b["W"], b["u"])
        a["mass_e"] = _add(a["mass_e"], V * g / (mass_e * mass_e))
        h = meshops.avg_i2l_adj(mesh, -g / mass_e, mode=mode)
        a["W"] = _add(a["W"], meshops.interp_c2e_adj(mesh, meshops.diff_l2i(mesh, b["u"]) * h, mode=mode))
        a["u"] = _add(a["u"], meshops.diff_l2i_adj(mesh, meshops.interp_c2e(mesh, b["W"]) * h, mode=mode))


class Del2:
    """tend_u += visc2 vector_laplacian_e2e(u), linear in u: its `coefficient` times its
    `operator` (adjoint: times `operator_adjoint`; the fused u passes apply the coefficient
    themselves)."""
    target = "tend_u"

    @staticmethod
    def active(physics) -> bool:
        return bool(physics.visc2)

    @staticmethod
    def coefficient(physics) -> float:
        return physics.visc2

    @staticmethod
    def operator(mesh, u):
        return meshops.vector_laplacian_e2e(mesh, u)

    @staticmethod
    def inner(mesh, u):
        """The field whose vector Laplacian is the operator's: u itself."""
        return u

    @staticmethod
    def forward(mesh, b, physics):
        return Del2.coefficient(physics) * Del2.operator(mesh, b["u"])

    @staticmethod
    def tangent(mesh, b, t, physics):
        return Del2.coefficient(physics) * Del2.operator(mesh, t["u"])

    @staticmethod
    def operator_adjoint(mesh, g, mode):
        return meshops.vector_laplacian_e2e_adj(mesh, g, mode=mode)

    @staticmethod
    def inner_adjoint(mesh, g, mode):
        """The field whose transposed vector Laplacian is `operator_adjoint`'s: g itself."""
        return g

    @staticmethod
    def adjoint(mesh, b, a, g, physics, mode):
        a["u"] = _add(a["u"], Del2.coefficient(physics) * Del2.operator_adjoint(mesh, g, mode))


class Del4:
    """tend_u -= visc4 del4_e2e(u), linear in u: its `coefficient` (-visc4: the product equals
    -(visc4 x) bitwise, one pass) times its `operator`."""
    target = "tend_u"

    @staticmethod
    def active(physics) -> bool:
        return bool(physics.visc4)

    @staticmethod
    def coefficient(physics) -> float:
        return -physics.visc4

    @staticmethod
    def operator(mesh, u):
        return meshops.del4_e2e(mesh, u)

    @staticmethod
    def inner(mesh, u):
        """The field whose vector Laplacian is the operator's: the first Laplacian of u."""
        return meshops.vector_laplacian_e2e(mesh, u)

    @staticmethod
    def forward(mesh, b, physics):
        return Del4.coefficient(physics) * Del4.operator(mesh, b["u"])

    @staticmethod
    def tangent(mesh, b, t, physics):
        return Del4.coefficient(physics) * Del4.operator(mesh, t["u"])

    @staticmethod
    def operator_adjoint(mesh, g, mode):
        return meshops.del4_e2e_adj(mesh, g, mode=mode)

    @staticmethod
    def inner_adjoint(mesh, g, mode):
        """The field whose transposed vector Laplacian is `operator_adjoint`'s: the first transposed Laplacian of g."""
        return meshops.vector_laplacian_e2e_adj(mesh, g, mode=mode)

    @staticmethod
    def adjoint(mesh, b, a, g, physics, mode):
        """a_u += (-visc4) del4_e2e^T(g): a_u - visc4 x bitwise (negation is exact)."""
        a["u"] = _add(a["u"], Del4.coefficient(physics) * Del4.operator_adjoint(mesh, g, mode))


#: Every term, in the order the tendencies sum them (per target).
TERMS = (MassFlux, ThetaFlux, Del2Theta, Del4Theta, PVFlux, Bernoulli, PressureGradient,
         VerticalAdvection, Del2, Del4)


def active_terms(physics) -> tuple:
    """The terms active for `physics`, in `TERMS`' order."""
    return tuple(term for term in TERMS if term.active(physics))
