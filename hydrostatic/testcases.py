"""Initial states of the hydrostatic core, as functions of position and of eta = p / p0.

Jablonowski and Williamson (2006, QJRMS 132, 2943; JW06): a steady, balanced, baroclinically
unstable zonal jet on p_s = 1000 hPa, with the surface geopotential that balances it, and the
baroclinic wave it grows into from a zonal-wind perturbation of u_p = 1 m/s, radius R = a / 10,
centred at (lon, lat) = (20 E, 40 N) (JW06 eq. 12: (pi / 9, 2 pi / 9)). With eta_v = (eta - eta_0)
pi / 2, eta_0 = 0.252, u_0 = 35 m/s, a Omega the Earth's radius times its rotation rate:

    u      = u_0 cos^{3/2}(eta_v) sin^2(2 lat)
    T      = T_bar(eta) + 3/4 (eta pi u_0 / R) sin(eta_v) cos^{1/2}(eta_v) (
               (-2 sin^6 lat (cos^2 lat + 1/3) + 10/63) 2 u_0 cos^{3/2}(eta_v)
               + (8/5 cos^3 lat (sin^2 lat + 2/3) - pi/4) a Omega)
    T_bar  = T_0 eta^{R Gamma / g} (+ dT (eta_t - eta)^5 above eta_t = 0.2),  T_0 = 288 K,
             Gamma = 0.005 K m-1, dT = 4.8e5 K
    phi_s  = u_0 cos^{3/2}((1 - eta_0) pi / 2) ((-2 sin^6 lat (cos^2 lat + 1/3) + 10/63) u_0
               cos^{3/2}((1 - eta_0) pi / 2) + (8/5 cos^3 lat (sin^2 lat + 2/3) - pi/4) a Omega)

evaluated at each layer's eta = p / p0 (the layer pressure of the model, the mean of its interface
pressures). The zonal jet enters as the normal velocity of its streamfunction, psi = -a u_0
cos^{3/2}(eta_v) (lat / 2 - sin(4 lat) / 8) at vertices (discretely non-divergent, as
`swm.testcases` initialises its flows); the perturbation as its normal component u_p exp(-(r/R)^2)
cos(angleEdge). The layer masses are those of the hybrid coordinate at p_s = p0, and theta = T /
(p / p0)^kappa.

Rotated (Lauritzen et al. 2010, JAMES 2, 15): `rotation` alpha > 0 tilts the test's frame, so
that its north pole sits at the model's (lon, lat) = (180 E, 90 - alpha N). Every field (the
streamfunction, T, phi_s, the perturbation and its direction) and the Coriolis parameter f =
2 Omega sin(lat') are those of the unrotated case at the test-frame position (lon', lat') =
`rotated_coordinates`: the same flow about a tilted axis, which a mesh that does not imprint
computes the same, rotated.

held_suarez: the JW06 baroclinic state on a flat surface (phi_s = 0) under the Held-Suarez forcing
(`hydrostatic.forcing`); the flow adjusts and spins up toward the forcing's climate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from meshops.operators.vertical import CP_DRY, R_DRY
from framework.constants import EARTH_OMEGA, GRAVITY

from hydrostatic import levels

ETA_0, ETA_T, U_0, T_0, LAPSE, DELTA_T = 0.252, 0.2, 35.0, 288.0, 0.005, 4.8e5
#: JW06's rotation rate (s-1) and the perturbation: amplitude (m/s), centre (lon, lat, radians).
OMEGA_JW = EARTH_OMEGA
U_P, LON_C, LAT_C = 1.0, np.pi / 9.0, 2.0 * np.pi / 9.0
P_SURFACE = levels.P0
CASES = ("jw06_steady", "jw06_baroclinic", "held_suarez")


@dataclass
class InitialState:
    """mass, theta_mass (cells x layers), u (edges x layers), phi_s (cells), f_vertex (vertices):
    float64 arrays (NumPy or CuPy: `state_fields`)."""
    mass: np.ndarray
    theta_mass: np.ndarray
    u: np.ndarray
    phi_s: np.ndarray
    f_vertex: np.ndarray


def jw06_temperature(lat, eta, a):
    """JW06's temperature (K) at latitude `lat` (radians) and eta (broadcast together): T_bar(eta)
    + amplitude(eta) (jet_cos(lat) cos^{3/2}(eta_v) + jet_const(lat)), of `jw06_temperature_levels`
    and `jw06_temperature_jet`."""
    t_bar, amplitude, cos_v = jw06_temperature_levels(eta)
    jet_cos, jet_const = jw06_temperature_jet(lat, a)
    return t_bar + amplitude * (jet_cos * cos_v + jet_const)


def jw06_temperature_levels(eta):
    """The temperature's factors of eta: T_bar, the jet's amplitude 3/4 (eta pi u_0 / R)
    sin(eta_v) cos^{1/2}(eta_v), and cos^{3/2}(eta_v)."""
    eta_v = (eta - ETA_0) * np.pi / 2.0
    t_bar = T_0 * eta ** (R_DRY * LAPSE / GRAVITY) + np.where(
        eta < ETA_T, DELTA_T * np.maximum(ETA_T - eta, 0.0) ** 5, 0.0)
    amplitude = 0.75 * (eta * np.pi * U_0 / R_DRY) * np.sin(eta_v) * np.sqrt(np.cos(eta_v))
    return t_bar, amplitude, np.cos(eta_v) ** 1.5


def jw06_temperature_jet(lat, a):
    """The temperature's factors of latitude: (-2 sin^6 lat (cos^2 lat + 1/3) + 10/63) 2 u_0 and
    (8/5 cos^3 lat (sin^2 lat + 2/3) - pi/4) a Omega."""
    s, c = np.sin(lat), np.cos(lat)
    return ((-2.0 * s ** 6 * (c ** 2 + 1.0 / 3.0) + 10.0 / 63.0) * 2.0 * U_0,
            (1.6 * c ** 3 * (s ** 2 + 2.0 / 3.0) - np.pi / 4.0) * a * OMEGA_JW)


def jw06_surface_geopotential(lat, a):
    """JW06's surface geopotential (m2 s-2) that balances the steady state on p_s = p0."""
    s, c = np.sin(lat), np.cos(lat)
    cv = np.cos((1.0 - ETA_0) * np.pi / 2.0) ** 1.5
    return U_0 * cv * ((-2.0 * s ** 6 * (c ** 2 + 1.0 / 3.0) + 10.0 / 63.0) * U_0 * cv
                       + (1.6 * c ** 3 * (s ** 2 + 2.0 / 3.0) - np.pi / 4.0) * a * OMEGA_JW)


def jw06_streamfunction(lat, eta, a):
    """The jet's streamfunction psi, with -d psi / (a d lat) = u_0 cos^{3/2}(eta_v) sin^2(2 lat),
    as its two factors: psi = amplitude(eta) shape(lat), amplitude = -a u_0 cos^{3/2}(eta_v) and
    shape = lat / 2 - sin(4 lat) / 8."""
    eta_v = (eta - ETA_0) * np.pi / 2.0
    return -a * U_0 * np.cos(eta_v) ** 1.5, lat / 2.0 - np.sin(4.0 * lat) / 8.0


def jw06_perturbation(lat, lon, a):
    """The zonal-wind perturbation u_p exp(-(r / R)^2), r the great-circle distance to the centre."""
    cos_r = np.sin(LAT_C) * np.sin(lat) + np.cos(LAT_C) * np.cos(lat) * np.cos(lon - LON_C)
    r = a * np.arccos(np.clip(cos_r, -1.0, 1.0))
    return U_P * np.exp(-(r / (a / 10.0)) ** 2)


def rotation_matrix(alpha_degrees: float) -> np.ndarray:
    """R with R P' the test frame's Cartesian coordinates of the model's point P: a rotation by
    alpha about the y axis, which takes the model point (180 E, 90 - alpha N) to the pole."""
    a = np.radians(alpha_degrees)
    return np.array([[np.cos(a), 0.0, np.sin(a)], [0.0, 1.0, 0.0], [-np.sin(a), 0.0, np.cos(a)]])


def _xyz(lon, lat):
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)


def rotated_coordinates(lon, lat, alpha_degrees: float):
    """(lon', lat') in the test frame of the model's (lon, lat) (radians; module doc)."""
    if not alpha_degrees:
        return lon, lat
    p = _xyz(lon, lat) @ rotation_matrix(alpha_degrees).T
    return np.arctan2(p[..., 1], p[..., 0]), np.arcsin(np.clip(p[..., 2], -1.0, 1.0))


def unrotated_coordinates(lon_r, lat_r, alpha_degrees: float):
    """(lon, lat) on the model's sphere of the test frame's (lon', lat'): `rotated_coordinates`'
    inverse."""
    if not alpha_degrees:
        return lon_r, lat_r
    p = _xyz(lon_r, lat_r) @ rotation_matrix(alpha_degrees)
    return np.arctan2(p[..., 1], p[..., 0]), np.arcsin(np.clip(p[..., 2], -1.0, 1.0))


def tilted_east(lon, lat, alpha_degrees: float):
    """(east, north) components, in the model's frame, of the test frame's unit east vector at
    the model's (lon, lat)."""
    lon_r, _ = rotated_coordinates(lon, lat, alpha_degrees)
    if alpha_degrees:
        east_r = np.stack([-np.sin(lon_r), np.cos(lon_r), np.zeros_like(lon_r)], axis=-1)
        e = east_r @ rotation_matrix(alpha_degrees)             # model-frame Cartesian
    else:       # east_r @ the identity, without the slow (n, 3) @ (3, 3) product: the same values
        e = np.stack([-np.sin(lon_r) + 0.0, np.cos(lon_r), np.zeros_like(lon_r)], axis=-1)   # (-0 -> +0)
    east = np.stack([-np.sin(lon), np.cos(lon), np.zeros_like(lon)], axis=-1)
    north = np.stack([-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon), np.cos(lat)], axis=-1)
    return (e * east).sum(axis=-1), (e * north).sum(axis=-1)


def layer_eta(A, B):
    """eta = p / p0 of each layer at p_s = p0: the mean of its interfaces' (A + B p0) / p0."""
    eta_i = (A + B * P_SURFACE) / levels.P0
    return 0.5 * (eta_i[:-1] + eta_i[1:])


def layer_factors(A, B, a) -> dict:
    """The initial state's factors of the layers (every case's), from the hybrid coefficients (A,
    B) and the sphere's radius `a`: mass at p_s = p0, the temperature's (`jw06_temperature_levels`),
    eta^kappa and the streamfunction's amplitude; (N,) float64 arrays by name."""
    eta = layer_eta(A, B)
    t_bar, amplitude, cos_v = jw06_temperature_levels(eta)
    return {"mass": levels.layer_mass(A, B, np.array([P_SURFACE]), GRAVITY)[0], "t_bar": t_bar,
            "t_amplitude": amplitude, "cos_v": cos_v, "eta_kappa": eta ** (R_DRY / CP_DRY),
            "psi_amplitude": jw06_streamfunction(lat=0.0, eta=eta, a=a)[0]}


def row_factors(mesh, case: str, rotation: float = 0.0) -> dict:
    """The initial state's factors of the rows of `mesh` for `case` (one of CASES) in its frame
    tilted by `rotation` degrees: {location: {name: (rows,) float64 array}}, cells: the
    temperature's jet factors (jet_cos, jet_const) and phi_s; edges: the streamfunction's shape at
    each edge's two vertices (psi_shape_v0, psi_shape_v1) and the perturbation's normal component
    (perturbation; None for jw06_steady); vertices: f_vertex."""
    if case not in CASES:
        raise ValueError(f"case.name = {case!r}: expected one of {', '.join(CASES)}")
    if not 0.0 <= rotation <= 90.0:
        raise ValueError(f"case.rotation = {rotation}: expected degrees in [0, 90]")
    a = mesh.sphere_radius
    _, lat_cell = rotated_coordinates(mesh.lonCell, mesh.latCell, rotation)
    lon_edge, lat_edge = rotated_coordinates(mesh.lonEdge, mesh.latEdge, rotation)
    _, lat_vertex = rotated_coordinates(mesh.lonVertex, mesh.latVertex, rotation)
    jet_cos, jet_const = jw06_temperature_jet(lat_cell, a)
    shape = jw06_streamfunction(lat_vertex, eta=0.0, a=a)[1]
    perturbation = None
    if case != "jw06_steady":
        east, north = tilted_east(mesh.lonEdge, mesh.latEdge, rotation)
        normal = np.cos(mesh.angleEdge) * east + np.sin(mesh.angleEdge) * north
        perturbation = jw06_perturbation(lat_edge, lon_edge, a) * normal
    phi_s = jw06_surface_geopotential(lat_cell, a) if case != "held_suarez" else \
        np.zeros(mesh.nCells)
    return {"cell": {"jet_cos": jet_cos, "jet_const": jet_const, "phi_s": phi_s},
            "edge": {"psi_shape_v0": shape[mesh.verticesOnEdge[:, 0]],
                     "psi_shape_v1": shape[mesh.verticesOnEdge[:, 1]],
                     "perturbation": perturbation},
            "vertex": {"f_vertex": 2.0 * OMEGA_JW * np.sin(lat_vertex)}}


def state_fields(rows: dict, layers: dict, dv_edge, xp=np) -> InitialState:
    """The initial state from its factors (`row_factors` of some rows, `layer_factors`) and the
    rows' dvEdge, formed on the array module `xp` with the formulas' operations in their order
    (products, sums and quotients of a row's and a layer's factor, which round alike on every
    backend): the fields of any rows of the mesh, on NumPy or CuPy, are bitwise those rows of
    the one-process NumPy state.

        mass[c, k]       = mass[k]
        theta_mass[c, k] = mass[k] (t_bar[k] + t_amplitude[k] (jet_cos[c] cos_v[k] + jet_const[c]))
                           / eta_kappa[k]
        u[e, k]          = -(psi_amplitude[k] psi_shape_v1[e] - psi_amplitude[k] psi_shape_v0[e])
                           / dvEdge[e] + perturbation[e]

    (u: -(psi[v1] - psi[v0]) / dvEdge, as `swm.testcases.velocity_from_streamfunction`.)
    """
    lay = {name: xp.asarray(v) for name, v in layers.items()}
    cell = {name: xp.asarray(v)[:, None] for name, v in rows["cell"].items()}
    edge = {name: xp.asarray(v)[:, None] for name, v in rows["edge"].items() if v is not None}
    mass = xp.empty((cell["phi_s"].shape[0], lay["mass"].shape[0]))
    mass[...] = lay["mass"]
    theta_mass = cell["jet_cos"] * lay["cos_v"]     # in place, in the formula's order (+, x commute)
    theta_mass += cell["jet_const"]
    theta_mass *= lay["t_amplitude"]
    theta_mass += lay["t_bar"]                      # the temperature
    theta_mass /= lay["eta_kappa"]                  # theta
    theta_mass *= mass
    u = lay["psi_amplitude"] * edge["psi_shape_v1"]
    u -= lay["psi_amplitude"] * edge["psi_shape_v0"]
    xp.negative(u, out=u)
    u /= xp.asarray(dv_edge)[:, None]
    if "perturbation" in edge:
        u += edge["perturbation"]
    return InitialState(mass, theta_mass, u, cell["phi_s"][:, 0],
                        xp.asarray(rows["vertex"]["f_vertex"]))


def initial_state(mesh, case: str, A, B, rotation: float = 0.0) -> InitialState:
    """The initial state of `case` (one of CASES) on `mesh` with hybrid coefficients (A, B),
    its frame tilted by `rotation` degrees (module doc; 0: JW06 as published), in NumPy arrays."""
    return state_fields(row_factors(mesh, case, rotation), layer_factors(A, B, mesh.sphere_radius),
                        mesh.dvEdge)
