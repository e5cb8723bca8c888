"""Analytic fields on the sphere for the Laplacian, reconstruction and nonlinear-operator tests.

Harmonic homogeneous polynomials P of degree l restricted to the unit sphere are spherical harmonics
(Laplace-Beltrami eigenvalue -l(l+1)); on the sphere of radius a the eigenvalue is -l(l+1)/a^2 and the
surface gradient is (I - p p^T) grad P(p) / a. Rotating the argument (P(Q p)) keeps both properties
and moves the pattern off the mesh's symmetry axes.
"""
from __future__ import annotations

import numpy as np

#: Harmonic polynomials by degree l: (value(p), R^3 gradient(p)) on (n, 3) points.
HARMONICS = {
    1: (lambda p: p[:, 2],
        lambda p: np.stack([0 * p[:, 0], 0 * p[:, 0], 1 + 0 * p[:, 0]], 1)),
    2: (lambda p: p[:, 0] * p[:, 1],
        lambda p: np.stack([p[:, 1], p[:, 0], 0 * p[:, 0]], 1)),
    3: (lambda p: p[:, 0] * p[:, 1] * p[:, 2],
        lambda p: np.stack([p[:, 1] * p[:, 2], p[:, 0] * p[:, 2], p[:, 0] * p[:, 1]], 1)),
    4: (lambda p: p[:, 0] ** 4 - 6 * p[:, 0] ** 2 * p[:, 1] ** 2 + p[:, 1] ** 4,
        lambda p: np.stack([4 * p[:, 0] ** 3 - 12 * p[:, 0] * p[:, 1] ** 2,
                            4 * p[:, 1] ** 3 - 12 * p[:, 0] ** 2 * p[:, 1], 0 * p[:, 0]], 1)),
}


def _unit(x, y, z):
    p = np.stack([x, y, z], 1).astype(np.float64)
    return p / np.linalg.norm(p, axis=1)[:, None]


def cell_points(mesh):
    return _unit(mesh.xCell, mesh.yCell, mesh.zCell)


def edge_points(mesh):
    return _unit(mesh.xEdge, mesh.yEdge, mesh.zEdge)


def vertex_points(mesh):
    return _unit(mesh.xVertex, mesh.yVertex, mesh.zVertex)


def dot(p, q):
    return np.einsum("ij,ij->i", p, q)


def tangent(p, v):
    """Part of v (n, 3) tangent to the unit sphere at p (n, 3)."""
    return v - dot(p, v)[:, None] * p


def edge_normals(mesh):
    """Unit MPAS normals at the edge points: along the great circle cellsOnEdge[e,0] -> [e,1]."""
    pc, pe = cell_points(mesh), edge_points(mesh)
    n = np.cross(np.cross(pc[mesh.cellsOnEdge[:, 0]], pc[mesh.cellsOnEdge[:, 1]]), pe)
    return n / np.linalg.norm(n, axis=1)[:, None]


def edge_tangents(mesh):
    """Unit tangents k x n at the edge points (from verticesOnEdge[e,0] towards [e,1])."""
    return np.cross(edge_points(mesh), edge_normals(mesh))


def random_rotation(rng):
    """A random proper rotation matrix."""
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def harmonic(l, Q):
    """(value, unit-sphere surface gradient) of the degree-l harmonic rotated by Q: P(Q p)."""
    value, grad3 = HARMONICS[l]
    return (lambda p: value(p @ Q.T)), (lambda p: tangent(p, grad3(p @ Q.T) @ Q))


def solid_body(omega_vector):
    """Velocity of the solid-body rotation U(x) = Omega x x at positions x (n, 3) in metres."""
    omega_vector = np.asarray(omega_vector, dtype=np.float64)
    return lambda x: np.cross(omega_vector, x)


def rel_l2(weights, approx, exact):
    """sqrt(sum w |approx - exact|^2 / sum w |exact|^2); rows of (n, 3) arrays are vectors."""
    err, ref = np.asarray(approx) - exact, np.asarray(exact)
    if err.ndim == 2:
        err, ref = np.linalg.norm(err, axis=1), np.linalg.norm(ref, axis=1)
    return float(np.sqrt(np.sum(weights * err**2) / np.sum(weights * ref**2)))


def rel_linf(approx, exact):
    err, ref = np.asarray(approx) - exact, np.asarray(exact)
    if err.ndim == 2:
        err, ref = np.linalg.norm(err, axis=1), np.linalg.norm(ref, axis=1)
    return float(np.abs(err).max() / np.abs(ref).max())


def mesh_spacing(mesh):
    """Mean cell spacing sqrt(4 pi a^2 / nCells) (m)."""
    return float(np.sqrt(4 * np.pi * mesh.sphere_radius**2 / mesh.nCells))


def orders(spacings, errors):
    """Observed orders log(e_i / e_{i+1}) / log(h_i / h_{i+1}) between successive meshes."""
    h, e = np.asarray(spacings), np.asarray(errors)
    return np.log(e[:-1] / e[1:]) / np.log(h[:-1] / h[1:])
