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

`wrf_hybrid`: any number of layers and model top, generated (`hybrid_coefficients`): the hybrid
sigma-pressure coordinate of WRF-ARW version 4 (Skamarock et al. 2019, "A Description of the
Advanced Research WRF Model Version 4", NCAR/TN-556+STR, section 2.1) with its default
eta_c = 0.2 (namelist etac), on interfaces evenly spaced in eta (layers of equal mass in the
reference column p_s = p0):

    p(eta) = B(eta) (p_s - p_top) + (eta - B(eta)) (p0 - p_top) + p_top,
    B(eta) = c1 + c2 eta + c3 eta^2 + c4 eta^3 above eta_c (0 below: pure pressure near the top),
    c1 = 2 eta_c^2 / (1 - eta_c)^3,  c2 = -eta_c (4 + eta_c + eta_c^2) / (1 - eta_c)^3,
    c3 = 2 (1 + eta_c + eta_c^2) / (1 - eta_c)^3,  c4 = -(1 + eta_c) / (1 - eta_c)^3,

so B(eta_c) = B'(eta_c) = 0 and B(1) = B'(1) = 1: A = (eta - B)(p0 - p_top) + (1 - B) p_top.
B' is at most 1.68 (eta_c = 0.2), so the interface pressures fall monotonically upward wherever
p_s > p0 - (p0 - p_top) / 1.68 (about 405 hPa).
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
#: The generated level schemes by config name (vertical.levels), any nVertLevels and top_pa.
GENERATED = ("wrf_hybrid",)
#: Every vertical.levels choice.
SCHEMES = tuple(LEVEL_SETS) + GENERATED
#: The model top of the JW06 set (Pa), a generated scheme's when vertical.top_pa is unset.
JW06_TOP = HYAI_26[0] * P0
#: WRF's default eta below which the coordinate is pure pressure (namelist etac).
ETA_C = 0.2


def coefficients(name: str = "jw06_26", count: int | None = None,
                 top_pa: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(A in Pa, B) at the interfaces of level scheme `name`, from the surface up (float64, shape
    (nVertLevels + 1,)): a level set's own, or a generated scheme's with `count` layers and model
    top `top_pa` (Pa; None: JW06_TOP)."""
    if name in LEVEL_SETS:
        _, hyai, hybi = LEVEL_SETS[name]
        return np.asarray(hyai[::-1]) * P0, np.asarray(hybi[::-1], dtype=np.float64)
    if name in GENERATED:
        return hybrid_coefficients(count, JW06_TOP if top_pa is None else top_pa)
    raise ValueError(f"vertical.levels = {name!r}: expected one of {', '.join(SCHEMES)}")


def hybrid_coefficients(count: int, top_pa: float, eta_c: float = ETA_C,
                        p0: float = P0) -> tuple[np.ndarray, np.ndarray]:
    """(A in Pa, B) of WRF's hybrid coordinate (module doc) with `count` layers evenly spaced in
    eta and the model top at `top_pa`, from the surface up."""
    if count < 2:
        raise ValueError(f"vertical.nVertLevels = {count}: expected at least 2 layers")
    if not 0 < top_pa < p0:
        raise ValueError(f"vertical.top_pa = {top_pa}: expected a model top above 0 and below "
                         f"the surface pressure p0 = {p0:g} Pa")
    eta = 1.0 - np.arange(count + 1) / count
    B = wrf_b(eta, eta_c)
    B[0] = 1.0                                  # exactly the surface (A = 0), not 1 - ulp
    return (eta - B) * (p0 - top_pa) + (1.0 - B) * top_pa, B


def wrf_b(eta, eta_c: float = ETA_C) -> np.ndarray:
    """WRF version 4's B(eta) (module doc): 0 up to eta_c, a cubic from 0 to 1 above it."""
    d = (1.0 - eta_c) ** 3
    c1, c2 = 2.0 * eta_c**2 / d, -eta_c * (4.0 + eta_c + eta_c**2) / d
    c3, c4 = 2.0 * (1.0 + eta_c + eta_c**2) / d, -(1.0 + eta_c) / d
    eta = np.asarray(eta, dtype=np.float64)
    return np.where(eta > eta_c, c1 + c2 * eta + c3 * eta**2 + c4 * eta**3, 0.0)


def interface_pressure(A, B, surface_pressure):
    """p[k] = A[k] + B[k] * p_s: cells (n,) -> (n, N + 1), interfaces from the surface up."""
    return A[None, :] + B[None, :] * np.asarray(surface_pressure)[:, None]


def layer_mass(A, B, surface_pressure, gravity: float):
    """mass[k] = (p[k] - p[k+1]) / g (kg m-2): cells (n,) -> (n, N)."""
    p = interface_pressure(A, B, surface_pressure)
    return (p[:, :-1] - p[:, 1:]) / gravity
