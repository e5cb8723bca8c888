"""Diagnostics that compare model states with published solutions of the test cases: zonal Fourier
amplitudes of a cell field in a latitude band (the Rossby-Haurwitz wave's wavenumber 4, or the
wavenumber 5 the icosahedral mesh imprints), the longitude of a wavenumber-m pattern, and how far a
state has moved from a steady one.

The functions take NumPy arrays of a global mesh's cells (latCell, lonCell in radians, areaCell)
or the mesh itself, and work on one process (a gathered history file or a serial model).
"""
from __future__ import annotations

import numpy as np


def zonal_amplitudes(lat, lon, area, field, band, wavenumbers, degree: int = 6):
    """Complex zonal Fourier amplitudes of a cell field over the cells with band[0] <= lat <
    band[1], from an area-weighted least-squares fit of the field there by

        f(lon, lat) ~ sum_{k <= degree} P_k(s) (c_k + sum_{m=1}^{M} (a_mk cos m lon + b_mk sin m lon))

    (P_k Legendre polynomials of s, the latitude scaled to [-1, 1] over the band; M the largest
    wavenumber asked for): A_m is the band's area-weighted mean of a_m(lat) - i b_m(lat), so a field
    a cos(m (lon - lon0)) gives A_m = a exp(-i m lon0) (|A_m| = a). Fitting the zonal mean's
    variation with latitude keeps it from leaking into the other wavenumbers, as a plain quadrature
    over scattered cells would. Returns an array of A_m for each m in `wavenumbers` (1 <= m)."""
    lat, lon, area, field = (np.asarray(a, dtype=np.float64) for a in (lat, lon, area, field))
    if not band[0] < band[1]:
        raise ValueError(f"band = {band!r}: expected (south, north) latitudes in radians, south < north")
    wavenumbers = np.asarray(wavenumbers, dtype=np.int64)
    if wavenumbers.size == 0 or wavenumbers.min() < 1:
        raise ValueError(f"wavenumbers = {wavenumbers.tolist()}: expected integers >= 1")
    inside = (lat >= band[0]) & (lat < band[1])
    M = int(wavenumbers.max())
    unknowns = (degree + 1) * (2 * M + 1)
    if inside.sum() < 2 * unknowns:
        raise ValueError(f"band = {band!r}: {int(inside.sum())} cells, expected at least {2 * unknowns} "
                         f"for wavenumbers up to {M} and degree {degree} (a wider band or a finer mesh)")
    w, f, lam = area[inside], field[inside], lon[inside]
    s = 2.0 * (lat[inside] - band[0]) / (band[1] - band[0]) - 1.0
    legendre = np.polynomial.legendre.legvander(s, degree)                   # (n, degree + 1)
    m = np.arange(1, M + 1)
    cos, sin = np.cos(np.outer(lam, m)), np.sin(np.outer(lam, m))            # (n, M)
    columns = [legendre] + [legendre * cos[:, [j]] for j in range(M)] + [legendre * sin[:, [j]] for j in range(M)]
    basis = np.concatenate(columns, axis=1)
    root = np.sqrt(w / w.sum())
    coef = np.linalg.lstsq(basis * root[:, None], f * root, rcond=None)[0]
    a = coef[degree + 1:(M + 1) * (degree + 1)].reshape(M, degree + 1)
    b = coef[(M + 1) * (degree + 1):].reshape(M, degree + 1)
    mean_p = (w @ legendre) / w.sum()                                         # band means of P_k
    amplitudes = a @ mean_p - 1j * (b @ mean_p)
    return amplitudes[wavenumbers - 1]


def pattern_longitude(amplitude, wavenumber: int) -> float:
    """Longitude (rad, in (-pi / m, pi / m]) of a crest of the wavenumber-m pattern whose complex
    amplitude is `amplitude` (a cos(m (lon - lon0)) has A_m = a exp(-i m lon0): lon0 = -arg(A_m) / m)."""
    return float(-np.angle(amplitude) / wavenumber)


def unwrap_drift(longitudes, wavenumber: int) -> np.ndarray:
    """Cumulative eastward drift (rad) of a wavenumber-m pattern from its crest longitudes at
    successive times, each step taken as the shortest move (the pattern repeats every 2 pi / m):
    the times must be close enough that it moves by less than pi / m between them."""
    period = 2.0 * np.pi / wavenumber
    steps = np.diff(np.asarray(longitudes, dtype=np.float64))
    steps = (steps + 0.5 * period) % period - 0.5 * period
    return np.concatenate([[0.0], np.cumsum(steps)])


def interp_c2points(mesh, field, points):
    """Linear interpolation of a cell field to points on the sphere (shape (n, 3), any radius) in
    the Delaunay triangles of the cell centres (the triangles cellsOnVertex): the weights are the
    barycentric coordinates of the point's central projection onto the triangle's plane, taken in
    the triangle around the nearest cell centre whose smallest weight is largest (the one that
    contains the point)."""
    from scipy.spatial import cKDTree

    field = np.asarray(field)
    if field.shape[:1] != (mesh.nCells,):
        raise ValueError(f"field: shape {field.shape}, expected ({mesh.nCells},) (a cell field of the mesh)")
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"points: shape {points.shape}, expected (n, 3) Cartesian positions")
    centres = np.column_stack([mesh.xCell, mesh.yCell, mesh.zCell]).astype(np.float64)
    centres /= np.linalg.norm(centres, axis=1)[:, None]
    points = points / np.linalg.norm(points, axis=1)[:, None]
    nearest = cKDTree(centres).query(points)[1]
    best = np.full(points.shape[0], -np.inf)
    weights = np.zeros((points.shape[0], 3))
    cells = np.zeros((points.shape[0], 3), dtype=np.int64)
    for j in range(mesh.verticesOnCell.shape[1]):
        vertex = mesh.verticesOnCell[nearest, j]
        ok = (j < mesh.nEdgesOnCell[nearest]) & (vertex >= 0)
        tri = mesh.cellsOnVertex[np.maximum(vertex, 0)]
        ok &= (tri >= 0).all(axis=1)
        corners = np.stack([centres[np.maximum(tri[:, k], 0)] for k in range(3)], axis=2)
        w = np.linalg.solve(corners, points[:, :, None])[:, :, 0]
        w /= w.sum(axis=1)[:, None]
        better = ok & (w.min(axis=1) > best)
        best[better], weights[better], cells[better] = w.min(axis=1)[better], w[better], tri[better]
    return np.sum(weights * field[cells], axis=1)


def departure(value, reference, weight) -> dict:
    """How far `value` is from a steady `reference`: max |value - reference| and the weighted
    relative l2 norm sqrt(sum w (value - reference)^2 / sum w reference^2)."""
    value, reference, weight = (np.asarray(a, dtype=np.float64) for a in (value, reference, weight))
    diff = value - reference
    return {"max_abs": float(np.abs(diff).max()),
            "rel_l2": float(np.sqrt(np.sum(weight * diff ** 2) / np.sum(weight * reference ** 2)))}
