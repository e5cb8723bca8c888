"""Hybrid sigma-pressure coordinates: interface pressure p[k] = A[k] + B[k] * p_s (Pa).

Interfaces are counted from the surface up (MPAS-Atmosphere's order): k = 0 is the surface (A = 0,
B = 1), k = nVertLevels the model top (B = 0, A = p_top). Layer k lies between interfaces k and
k + 1; its mass per unit area is mass[k] = (p[k] - p[k+1]) / g, so a column's layers hold the
fixed share dA[k] = A[k] - A[k+1] of the pressure at the top and dB[k] = B[k] - B[k+1] of the
surface pressure (sum dB = 1).

`jw06_26`: the 26-level CAM3 hybrid set of Jablonowski and Williamson (2006, QJRMS 132, 2943,
Table in their appendix B; CAM's hyai / hybi, as in HOMME's cami-26.ascii), A given there as a
fraction of p0 = 1e5 Pa: p_top = 0.002194067 * p0 = 219.4 Pa. The table below is CAM's, from the
top down; `coefficients` returns it from the surface up, A in Pa.
"""
from __future__ import annotations

import numpy as np

#: Reference pressure of the A coefficients (Pa).
P0 = 1.0e5

#: CAM3 / JW06 26 levels, interfaces from the top (index 0) down to the surface (index 26).
HYAI_26 = (0.002194067, 0.004895209, 0.009882418, 0.01805201, 0.02983724, 0.04462334,
           0.06160587, 0.07851243, 0.07731271, 0.07590131, 0.07424086, 0.07228744, 0.06998933,
           0.06728574, 0.06410509, 0.06036322, 0.05596111, 0.05078225, 0.04468960, 0.03752191,
           0.02908949, 0.02084739, 0.01334443, 0.00708499, 0.00252136, 0.0, 0.0)
HYBI_26 = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.01505309, 0.03276228, 0.05359622,
           0.07810627, 0.1069411, 0.1408637, 0.1807720, 0.2277220, 0.2829562, 0.3479364,
           0.4243822, 0.5143168, 0.6201202, 0.7235355, 0.8176768, 0.8962153, 0.9534761,
           0.9851122, 1.0)

#: The level sets by config name (vertical.levels): (nVertLevels, hyai, hybi), top down.
LEVEL_SETS = {"jw06_26": (26, HYAI_26, HYBI_26)}


def coefficients(name: str = "jw06_26") -> tuple[np.ndarray, np.ndarray]:
    """(A in Pa, B) at the interfaces of level set `name`, from the surface up (float64, shape
    (nVertLevels + 1,))."""
    if name not in LEVEL_SETS:
        raise ValueError(f"vertical.levels = {name!r}: expected one of {', '.join(LEVEL_SETS)}")
    _, hyai, hybi = LEVEL_SETS[name]
    return np.asarray(hyai[::-1]) * P0, np.asarray(hybi[::-1], dtype=np.float64)


def interface_pressure(A, B, surface_pressure):
    """p[k] = A[k] + B[k] * p_s: cells (n,) -> (n, N + 1), interfaces from the surface up."""
    return A[None, :] + B[None, :] * np.asarray(surface_pressure)[:, None]


def layer_mass(A, B, surface_pressure, gravity: float):
    """mass[k] = (p[k] - p[k+1]) / g (kg m-2): cells (n,) -> (n, N)."""
    p = interface_pressure(A, B, surface_pressure)
    return (p[:, :-1] - p[:, 1:]) / gravity
