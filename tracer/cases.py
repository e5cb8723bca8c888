"""Williamson et al. (1992) test 1: a cosine bell carried once round the sphere by solid-body
rotation about an axis tilted by alpha from the pole. On a sphere of radius a, u0 = 2 pi a / T
(T the revolution's period); the wind is k x grad psi with the streamfunction at vertices

    psi = -u0 (z cos(alpha) - x sin(alpha))    (= -a u0 (sin(lat) cos(alpha) - cos(lon) cos(lat) sin(alpha))),

so the normal wind u[e] = -grad_v2e(psi)[e] = -(psi[v1] - psi[v0]) / dvEdge[e] is discretely
non-divergent (div_e2c of a tangential gradient vanishes to round-off). The bell, centred at
(lon, lat) = (3 pi / 2, 0) with radius R = a / 3, is q = q0 / 2 (1 + cos(pi r / R)) for great-circle
distance r < R, else 0; at time t it is the same bell about its centre rotated by u0 t / a about
the axis (-sin(alpha), 0, cos(alpha)): the exact solution.
"""
from __future__ import annotations

import numpy as np

import meshops

#: The bell's height, and its centre at t = 0 (lon, lat in radians).
Q0 = 1000.0
CENTER = (1.5 * np.pi, 0.0)


def wind(mesh, u0: float, alpha: float):
    """The normal wind on edges (m/s) of solid-body rotation at speed u0 about the tilted axis."""
    psi = -u0 * (mesh.zVertex * np.cos(alpha) - mesh.xVertex * np.sin(alpha))
    return -meshops.grad_v2e(mesh, psi)


def bell(mesh, u0: float, alpha: float, t: float = 0.0):
    """The cosine bell on cells at time t (s): the initial state (t = 0) and the exact solution."""
    a = float(np.linalg.norm([mesh.xCell[0], mesh.yCell[0], mesh.zCell[0]]))
    lon, lat = CENTER
    centre = np.array([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    axis, angle = np.array([-np.sin(alpha), 0.0, np.cos(alpha)]), u0 * t / a
    centre = (centre * np.cos(angle) + np.cross(axis, centre) * np.sin(angle)
              + axis * axis.dot(centre) * (1 - np.cos(angle)))          # Rodrigues' rotation
    cells = np.stack([mesh.xCell, mesh.yCell, mesh.zCell], axis=-1) / a
    r = a * np.arccos(np.clip(cells @ centre, -1.0, 1.0))
    return np.where(r < a / 3, 0.5 * Q0 * (1 + np.cos(3 * np.pi * r / a)), 0.0)


def l2_error(mesh, q, exact) -> float:
    """Williamson's normalised l2 error: sqrt(I[(q - exact)^2] / I[exact^2]), I[f] = sum_c
    areaCell[c] f[c]."""
    return float(np.sqrt(np.sum(mesh.areaCell * (q - exact) ** 2)
                         / np.sum(mesh.areaCell * exact ** 2)))
