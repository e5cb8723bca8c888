"""Initial conditions of the shallow-water test cases, as functions of position.

Williamson et al. 1992 (J. Comput. Phys. 102): case 2 (steady geostrophic flow, rotated by alpha),
case 5 (zonal flow over an isolated mountain), case 6 (Rossby-Haurwitz wave 4); Galewsky et al.
2004 (Tellus 56A): the barotropic jet, balanced, with or without its height perturbation.

Each case gives the thickness h on cells, the topography b on cells, the Coriolis parameter f on
vertices and a streamfunction psi on vertices; the normal velocity is u = -grad_v2e(psi)
(u = k x grad psi, so u . n = -(psi[v1] - psi[v0]) / dvEdge with the tangent k x n from v0 to v1),
discretely non-divergent as in MPAS's shallow-water initialisation.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from framework.constants import DAY, GRAVITY

#: Williamson et al. (1992)'s rotation rate Omega (1/s), which their cases are defined with (the
#: Earth's, `framework.constants.EARTH_OMEGA`, is MPAS's 7.29212e-5).
WILLIAMSON_OMEGA = 7.292e-5


@dataclass
class InitialState:
    """h, b (cells), u (edges), f_vertex (vertices): NumPy arrays on the mesh's entities."""
    h: np.ndarray
    u: np.ndarray
    b: np.ndarray
    f_vertex: np.ndarray


def rotated_coriolis(lat, lon, alpha: float, omega: float = WILLIAMSON_OMEGA):
    """f = 2 Omega (-cos lon cos lat sin alpha + sin lat cos alpha): the rotation axis tilted by
    alpha toward lon = 0 (Williamson case 2)."""
    return 2.0 * omega * (-np.cos(lon) * np.cos(lat) * np.sin(alpha) + np.sin(lat) * np.cos(alpha))


def velocity_from_streamfunction(mesh, psi_vertex):
    """Normal velocity u[e] = -(psi[v1] - psi[v0]) / dvEdge[e] (v0, v1 = verticesOnEdge[e])."""
    v0, v1 = mesh.verticesOnEdge[:, 0], mesh.verticesOnEdge[:, 1]
    return -(psi_vertex[v1] - psi_vertex[v0]) / mesh.dvEdge


def normal_component(mesh, zonal, meridional):
    """u . n at edges of a velocity given by its zonal and meridional components there."""
    return zonal * np.cos(mesh.angleEdge) + meridional * np.sin(mesh.angleEdge)


# -- Williamson case 2: steady-state geostrophic flow ---------------------------------------------

def williamson2_height(lat, lon, a, alpha, gravity=GRAVITY, omega=WILLIAMSON_OMEGA):
    """h = (g h0 - (a Omega u0 + u0^2 / 2) (-cos lon cos lat sin alpha + sin lat cos alpha)^2) / g,
    g h0 = 2.94e4 m^2/s^2, u0 = 2 pi a / 12 days: the case's exact solution at every time."""
    u0 = 2.0 * np.pi * a / (12.0 * DAY)
    s = -np.cos(lon) * np.cos(lat) * np.sin(alpha) + np.sin(lat) * np.cos(alpha)
    return (2.94e4 - (a * omega * u0 + 0.5 * u0 ** 2) * s ** 2) / gravity


def williamson2_velocity(lat, lon, a, alpha):
    """(zonal, meridional) velocity of case 2: u0 (cos lat cos alpha + cos lon sin lat sin alpha),
    -u0 sin lon sin alpha."""
    u0 = 2.0 * np.pi * a / (12.0 * DAY)
    return (u0 * (np.cos(lat) * np.cos(alpha) + np.cos(lon) * np.sin(lat) * np.sin(alpha)),
            -u0 * np.sin(lon) * np.sin(alpha))


def williamson2(mesh, alpha: float = 0.0, gravity=GRAVITY, omega=WILLIAMSON_OMEGA) -> InitialState:
    a = mesh.sphere_radius
    u0 = 2.0 * np.pi * a / (12.0 * DAY)
    lat, lon = mesh.latVertex, mesh.lonVertex
    psi = -a * u0 * (np.sin(lat) * np.cos(alpha) - np.cos(lon) * np.cos(lat) * np.sin(alpha))
    return InitialState(h=williamson2_height(mesh.latCell, mesh.lonCell, a, alpha, gravity, omega),
                        u=velocity_from_streamfunction(mesh, psi), b=np.zeros(mesh.nCells),
                        f_vertex=rotated_coriolis(lat, lon, alpha, omega))


# -- Williamson case 5: zonal flow over an isolated mountain ----------------------------------------

def williamson5(mesh, gravity=GRAVITY, omega=WILLIAMSON_OMEGA) -> InitialState:
    """u0 = 20 m/s, h0 = 5960 m (height of the free surface h + b); mountain of 2000 m, radius
    pi/9, centred at (lon, lat) = (3 pi/2, pi/6)."""
    a, u0, h0 = mesh.sphere_radius, 20.0, 5960.0
    lat_c, lon_c, radius, b0 = np.pi / 6.0, 1.5 * np.pi, np.pi / 9.0, 2000.0
    lat, lon = mesh.latCell, mesh.lonCell
    dlon = np.angle(np.exp(1j * (lon - lon_c)))          # in (-pi, pi]
    r = np.minimum(radius, np.sqrt(dlon ** 2 + (lat - lat_c) ** 2))
    b = b0 * (1.0 - r / radius)
    surface = h0 - (a * omega * u0 + 0.5 * u0 ** 2) * np.sin(lat) ** 2 / gravity
    psi = -a * u0 * np.sin(mesh.latVertex)
    return InitialState(h=surface - b, u=velocity_from_streamfunction(mesh, psi), b=b,
                        f_vertex=2.0 * omega * np.sin(mesh.latVertex))


# -- Williamson case 6: Rossby-Haurwitz wave 4 ------------------------------------------------------

def williamson6(mesh, gravity=GRAVITY, omega=WILLIAMSON_OMEGA) -> InitialState:
    """omega = K = 7.848e-6 1/s, R = 4, h0 = 8000 m; psi = -a^2 w sin lat + a^2 K cos^R lat sin lat
    cos R lon; g h = g h0 + a^2 (A + B cos R lon + C cos 2R lon) (Williamson et al. 1992, eq. 146-149)."""
    a, w, K, R, h0 = mesh.sphere_radius, 7.848e-6, 7.848e-6, 4, 8000.0
    lat, lon = mesh.latCell, mesh.lonCell
    c = np.cos(lat)
    A = (0.5 * w * (2.0 * omega + w) * c ** 2
         + 0.25 * K ** 2 * c ** (2 * R) * ((R + 1) * c ** 2 + (2 * R ** 2 - R - 2) - 2 * R ** 2 / c ** 2))
    B = 2.0 * (omega + w) * K / ((R + 1) * (R + 2)) * c ** R * ((R ** 2 + 2 * R + 2) - (R + 1) ** 2 * c ** 2)
    C = 0.25 * K ** 2 * c ** (2 * R) * ((R + 1) * c ** 2 - (R + 2))
    h = (gravity * h0 + a ** 2 * (A + B * np.cos(R * lon) + C * np.cos(2 * R * lon))) / gravity
    lat_v, lon_v = mesh.latVertex, mesh.lonVertex
    psi = a ** 2 * (-w * np.sin(lat_v) + K * np.cos(lat_v) ** R * np.sin(lat_v) * np.cos(R * lon_v))
    return InitialState(h=h, u=velocity_from_streamfunction(mesh, psi), b=np.zeros(mesh.nCells),
                        f_vertex=2.0 * omega * np.sin(lat_v))


def williamson6_angular_velocity(omega=WILLIAMSON_OMEGA) -> float:
    """Eastward angular velocity (rad/s) of the case-6 wave in the nondivergent barotropic vorticity
    equation, where it moves without change of shape (Haurwitz 1940; Williamson et al. 1992):
    nu = (R (3 + R) w - 2 Omega) / ((1 + R)(2 + R)) = w - 2 (Omega + w) / ((R + 1)(R + 2)),
    solid rotation w minus the westward phase speed of the spherical harmonic of degree R + 1."""
    w, R = 7.848e-6, 4
    return (R * (3 + R) * w - 2.0 * omega) / ((1 + R) * (2 + R))


# -- Galewsky et al. 2004: barotropic jet ------------------------------------------------------------

GALEWSKY_LAT0, GALEWSKY_LAT1, GALEWSKY_UMAX = np.pi / 7.0, np.pi / 2.0 - np.pi / 7.0, 80.0


def galewsky_wind(lat):
    """u(lat) = umax / e_n exp(1 / ((lat - lat0) (lat - lat1))) inside (lat0, lat1), 0 outside,
    e_n = exp(-4 / (lat1 - lat0)^2)."""
    lat = np.asarray(lat, dtype=float)
    lat0, lat1 = GALEWSKY_LAT0, GALEWSKY_LAT1
    inside = (lat > lat0) & (lat < lat1)
    safe = np.where(inside, lat, 0.5 * (lat0 + lat1))
    en = np.exp(-4.0 / (lat1 - lat0) ** 2)
    return np.where(inside, GALEWSKY_UMAX / en * np.exp(1.0 / ((safe - lat0) * (safe - lat1))), 0.0)


def _cumulative(values, grid):
    """Cumulative trapezoid integral of values over grid, starting at 0."""
    out = np.zeros_like(grid)
    out[1:] = np.cumsum(0.5 * (values[1:] + values[:-1]) * np.diff(grid))
    return out


def galewsky(mesh, perturbed: bool = True, gravity=GRAVITY, omega=WILLIAMSON_OMEGA,
             quadrature_points: int = 200001) -> InitialState:
    """Balanced jet: g h(lat) = g h0 - int_{-pi/2}^{lat} a u (f + tan(lat') u / a) dlat', h0 such that
    the area-weighted mean of h is 10 km; psi(lat) = -int a u dlat'. Perturbation: h' = 120 m
    cos lat exp(-(lon / (1/3))^2) exp(-((pi/4 - lat) / (1/15))^2), lon in (-pi, pi]."""
    a = mesh.sphere_radius
    grid = np.linspace(-np.pi / 2.0, np.pi / 2.0, quadrature_points)
    u = galewsky_wind(grid)
    f = 2.0 * omega * np.sin(grid)
    tan = np.tan(np.clip(grid, -np.pi / 2 + 1e-12, np.pi / 2 - 1e-12))
    depth = _cumulative(a * u * (f + tan * u / a), grid) / gravity
    stream = -_cumulative(a * u, grid)
    h = -np.interp(mesh.latCell, grid, depth)
    h += 10000.0 - np.sum(mesh.areaCell * h) / np.sum(mesh.areaCell)
    if perturbed:
        lon = np.angle(np.exp(1j * mesh.lonCell))
        h += (120.0 * np.cos(mesh.latCell) * np.exp(-(lon * 3.0) ** 2)
              * np.exp(-((np.pi / 4.0 - mesh.latCell) * 15.0) ** 2))
    psi = np.interp(mesh.latVertex, grid, stream)
    return InitialState(h=h, u=velocity_from_streamfunction(mesh, psi), b=np.zeros(mesh.nCells),
                        f_vertex=2.0 * omega * np.sin(mesh.latVertex))


CASES = {"williamson2": williamson2, "williamson5": williamson5, "williamson6": williamson6,
         "galewsky": galewsky}
