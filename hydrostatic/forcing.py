"""Held and Suarez (1994, BAMS 75, 1825) forcing: Newtonian relaxation of temperature toward a
zonally symmetric radiative-equilibrium profile and Rayleigh friction in the boundary layer.

With sigma = p / p_s, s = max(0, (sigma - sigma_b) / (1 - sigma_b)), sigma_b = 0.7:

    k_v = k_f s                                   k_f = 1 / day (on edges, sigma_e = interp_c2e(sigma))
    k_T = k_a + (k_s - k_a) s cos^4(lat)          k_a = 1 / 40 days, k_s = 1 / 4 days
    T_eq = max(200 K, (315 K - dT_y sin^2(lat) - dtheta_z log(p / p0) cos^2(lat)) (p / p0)^kappa)
    tend_u -= k_v u,   tend_theta_mass -= k_T mass (theta - T_eq / (p / p0)^kappa)

(dT_y = 60 K, dtheta_z = 10 K). The max functions are kinks of the profile, not limiters of the
state: the tangent and adjoint are those of the active branch.
"""
from __future__ import annotations

import meshops
from meshops.device.backend import array_module
from swm.constants import DAY

SIGMA_B, K_F, K_A, K_S = 0.7, 1.0 / DAY, 1.0 / (40.0 * DAY), 1.0 / (4.0 * DAY)
DT_Y, DTHETA_Z, T_MIN, P0 = 60.0, 10.0, 200.0, 1.0e5


class HeldSuarez:
    """The forcing on a rank's cells of latitude `lat_cell` (radians, on the fields' backend)."""

    def __init__(self, lat_cell):
        xp = array_module(lat_cell)
        self.xp = xp
        self.sin2 = (xp.sin(lat_cell) ** 2)[:, None]
        self.cos2 = (xp.cos(lat_cell) ** 2)[:, None]

    def tendencies(self, mesh, d, mass, u):
        """(tend_theta_mass, tend_u) of the state with column diagnostics `d`
        (`hydrostatic.dynamics.column_diagnostics`)."""
        xp, p = self.xp, d["p"]
        sigma = p / d["p_i"][:, :1]
        s = xp.maximum(0.0, (sigma - SIGMA_B) / (1.0 - SIGMA_B))
        s_edge = xp.maximum(0.0, (meshops.interp_c2e(mesh, sigma) - SIGMA_B) / (1.0 - SIGMA_B))
        exner = meshops.exner(mesh, p)
        t_eq = xp.maximum(T_MIN, (315.0 - DT_Y * self.sin2 - DTHETA_Z * xp.log(p / P0) * self.cos2)
                          * exner)
        k_t = K_A + (K_S - K_A) * s * self.cos2 ** 2
        return (-(k_t * mass * (d["theta"] - t_eq / exner))).astype(mass.dtype), \
            (-(K_F * s_edge * u)).astype(u.dtype)
