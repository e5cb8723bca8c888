"""Held and Suarez (1994, BAMS 75, 1825) forcing: Newtonian relaxation of temperature toward a
zonally symmetric radiative-equilibrium profile and Rayleigh friction in the boundary layer.

With sigma = p / p_s, s = max(0, (sigma - sigma_b) / (1 - sigma_b)), sigma_b = 0.7:

    k_v = k_f s                                   k_f = 1 / day (on edges, sigma_e = interp_c2e(sigma))
    k_T = k_a + (k_s - k_a) s cos^4(lat)          k_a = 1 / 40 days, k_s = 1 / 4 days
    T_eq = max(200 K, (315 K - dT_y sin^2(lat) - dtheta_z log(p / p0) cos^2(lat)) (p / p0)^kappa)
    tend_u -= k_v u,   tend_theta_mass -= k_T mass (theta - T_eq / (p / p0)^kappa)

(dT_y = 60 K, dtheta_z = 10 K). The max functions are kinks of the profile, not limiters of the
state: the tangent and adjoint are those of the active branch (derivative 0 where the max takes
its constant, also at a tie). With theta_eq = T_eq / exner and Q = 315 K - dT_y sin^2(lat) -
dtheta_z log(p / p0) cos^2(lat), the tangent (`tendencies_tl`) of the state's column
diagnostics' perturbation (dp, dp_s = dp_i at the surface, dtheta) and (dmass, du):

    dsigma = (dp - sigma dp_s) / p_s,  ds = [s > 0] dsigma / (1 - sigma_b)  (s_e: interp_c2e(dsigma))
    dT_eq = [Q exner > 200 K] (-dtheta_z cos^2(lat) dp / p exner + Q dexner),  dexner = exner_tl(p; dp)
    dtheta_eq = (dT_eq - theta_eq dexner) / exner
    dtend_theta_mass = -(dk_T mass r + k_T dmass r + k_T mass (dtheta - dtheta_eq)),  r = theta - theta_eq
    dtend_u = -k_f (ds_e u + s_e du)

and the adjoint (`tendencies_adj`) its transpose line by line.
"""
from __future__ import annotations

import meshops
from meshops.device.backend import array_module
from framework.constants import DAY

SIGMA_B, K_F, K_A, K_S = 0.7, 1.0 / DAY, 1.0 / (40.0 * DAY), 1.0 / (4.0 * DAY)
DT_Y, DTHETA_Z, T_MIN, P0 = 60.0, 10.0, 200.0, 1.0e5


class HeldSuarez:
    """The forcing on a rank's cells of latitude `lat_cell` (radians, on the fields' backend)."""

    def __init__(self, lat_cell):
        xp = array_module(lat_cell)
        self.xp = xp
        self.sin2 = (xp.sin(lat_cell) ** 2)[:, None]
        self.cos2 = (xp.cos(lat_cell) ** 2)[:, None]

    def _profile(self, mesh, d) -> dict:
        """The forcing's fields of the column diagnostics `d`: sigma, sigma_e (edges), s, s_e,
        exner, Q, T_eq, theta_eq (= T_eq / exner), k_T and cos^2(lat), in the fields' dtype."""
        xp, p = self.xp, d["p"]
        sin2, cos2 = (a.astype(p.dtype, copy=False) for a in (self.sin2, self.cos2))
        sigma = p / d["p_i"][:, :1]
        sigma_e = meshops.interp_c2e(mesh, sigma)
        s = xp.maximum(0.0, (sigma - SIGMA_B) / (1.0 - SIGMA_B))
        exner = meshops.exner(mesh, p)
        Q = 315.0 - DT_Y * sin2 - DTHETA_Z * xp.log(p / P0) * cos2
        t_eq = xp.maximum(T_MIN, Q * exner)
        return dict(sigma=sigma, sigma_e=sigma_e, s=s,
                    s_e=xp.maximum(0.0, (sigma_e - SIGMA_B) / (1.0 - SIGMA_B)), exner=exner, Q=Q,
                    t_eq=t_eq, theta_eq=t_eq / exner, k_t=K_A + (K_S - K_A) * s * cos2 ** 2,
                    cos2=cos2)

    def tendencies(self, mesh, d, mass, u):
        """(tend_theta_mass, tend_u) of the state with column diagnostics `d`
        (`hydrostatic.dynamics.column_diagnostics`)."""
        f = self._profile(mesh, d)
        return (-(f["k_t"] * mass * (d["theta"] - f["theta_eq"]))).astype(mass.dtype), \
            (-(K_F * f["s_e"] * u)).astype(u.dtype)

    def tendencies_tl(self, mesh, d, mass, u, dd, dmass, du):
        """Tangent-linear of `tendencies` about (d, mass, u): the tangents `dd` of the column
        diagnostics (p, p_i, theta; `hydrostatic.dynamics.column_diagnostics_tl`) and (dmass, du)
        -> (dtend_theta_mass, dtend_u) (module doc)."""
        f, xp, p, p_s = self._profile(mesh, d), self.xp, d["p"], d["p_i"][:, :1]
        dsigma = (dd["p"] - f["sigma"] * dd["p_i"][:, :1]) / p_s
        ds = xp.where(f["s"] > 0, dsigma / (1.0 - SIGMA_B), 0.0)
        ds_e = xp.where(f["s_e"] > 0, meshops.interp_c2e(mesh, dsigma) / (1.0 - SIGMA_B), 0.0)
        dexner = meshops.exner_tl(mesh, p, dd["p"])
        dQ = -DTHETA_Z * f["cos2"] * dd["p"] / p
        dt_eq = xp.where(f["Q"] * f["exner"] > T_MIN, dQ * f["exner"] + f["Q"] * dexner, 0.0)
        dtheta_eq = (dt_eq - f["theta_eq"] * dexner) / f["exner"]
        r = d["theta"] - f["theta_eq"]
        dk_t = (K_S - K_A) * ds * f["cos2"] ** 2
        dtend_theta_mass = -(dk_t * mass * r + f["k_t"] * dmass * r
                             + f["k_t"] * mass * (dd["theta"] - dtheta_eq))
        return dtend_theta_mass.astype(mass.dtype), (-K_F * (ds_e * u + f["s_e"] * du)).astype(u.dtype)

    def tendencies_adj(self, mesh, d, mass, u, tend_theta_mass_adj, tend_u_adj, *, mode=None):
        """Adjoint of `tendencies_tl`: (tend_theta_mass_adj, tend_u_adj) -> (the adjoints of the
        column diagnostics {p, p_i (nonzero at the surface only), theta}, mass_adj, u_adj):

            r_adj = -k_T mass g:  theta_adj = r_adj,  mass_adj = -k_T r g,  s_adj = -(k_s - k_a)
            cos^4(lat) mass r g;  theta_eq_adj = -r_adj:  T_eq_adj = theta_eq_adj / exner,
            exner_adj = -theta_eq theta_eq_adj / exner + [Q exner > 200 K] Q T_eq_adj,
            p_adj = exner_adj(p; exner_adj) - [Q exner > 200 K] dtheta_z cos^2(lat) exner T_eq_adj / p
            u_adj = -k_f s_e g_u,  sigma_adj = [s > 0] s_adj / (1 - sigma_b) + interp_c2e^T([s_e > 0]
            (-k_f u g_u) / (1 - sigma_b));  p_adj += sigma_adj / p_s,  p_s_adj = -sum_k sigma sigma_adj / p_s

        `mode`: the operators' adjoint mode."""
        f, xp, p, p_s = self._profile(mesh, d), self.xp, d["p"], d["p_i"][:, :1]
        g, g_u = tend_theta_mass_adj, tend_u_adj
        r = d["theta"] - f["theta_eq"]
        r_adj = -(f["k_t"] * mass * g)
        mass_adj = -(f["k_t"] * r * g)
        s_adj = -((K_S - K_A) * f["cos2"] ** 2 * mass * r * g)
        theta_eq_adj = -r_adj
        t_eq_adj = theta_eq_adj / f["exner"]
        active = f["Q"] * f["exner"] > T_MIN
        exner_adj = -f["theta_eq"] * theta_eq_adj / f["exner"] + xp.where(active, f["Q"] * t_eq_adj, 0.0)
        Q_adj = xp.where(active, f["exner"] * t_eq_adj, 0.0)
        p_adj = meshops.exner_adj(mesh, p, exner_adj, mode=mode) - DTHETA_Z * f["cos2"] * Q_adj / p
        u_adj = -(K_F * f["s_e"] * g_u)
        s_e_adj = -(K_F * u * g_u)
        sigma_adj = (xp.where(f["s"] > 0, s_adj / (1.0 - SIGMA_B), 0.0)
                     + meshops.interp_c2e_adj(mesh, xp.where(f["s_e"] > 0, s_e_adj / (1.0 - SIGMA_B), 0.0),
                                              mode=mode))
        p_adj = p_adj + sigma_adj / p_s
        p_i_adj = xp.zeros_like(d["p_i"])
        p_i_adj[:, 0] = -(f["sigma"] * sigma_adj).sum(axis=1) / p_s[:, 0]
        dtype = mass.dtype
        return (dict(p=p_adj.astype(dtype), p_i=p_i_adj.astype(dtype), theta=r_adj.astype(dtype)),
                mass_adj.astype(dtype), u_adj.astype(u.dtype))
