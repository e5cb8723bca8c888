"""Accuracy of the operators on refined icosahedral SCVT meshes against analytic fields, and
discrete identities to round-off.

Errors are relative, area-weighted l2 and l_inf (`analytic.error_norms`); the observed order is
log2(err_L / err_{L+1}) since the mesh spacing halves per level. Inputs are point values at the
MPAS locations (u . n at xEdge, scalars at cell centres / vertices), except the "[mean flux]" and
"[mean circulation]" cases that feed exact edge means. The bounds below are the measured orders
(benchmarks/convergence.py, 200 Lloyd iterations; benchmarks/RESULTS.md "## Convergence") less a
margin; where an operator is not second order the measured figures are given next to the bound.
The default run uses levels 2..5; levels 2..7 are marked slow.
"""
import numpy as np
import pytest

import meshops
from grids.icosahedral import generate_icosahedral

from meshops import analytic as A

#: Lloyd iterations of every mesh here: the SCVT residual (`centroid_offset`) is 6e-7 at level 4,
#: 2e-4 at level 5, 1e-3 at level 6, 1.5e-3 at level 7. Up to level 5 the orders with 200 and 1000
#: iterations agree within 0.02; from level 6 on, the second-order cases need more (1000 iterations
#: restore 2.00 for div_e2c[mean flux] over 5->6, which 200 give as 1.98 / 1.80).
LLOYD = 200
CI_LEVELS = (2, 3, 4, 5)
SLOW_LEVELS = (2, 3, 4, 5, 6, 7)

# (min l2 order, min linf order or None, max linf error or None) over the last level pair (the
# linf error bound on both levels of the pair, for operators whose linf error stalls).
# Measured orders over levels 4->5 / 5->6 (200 iterations) in the comments.
CI_BOUNDS = {
    # u.n sampled at xEdge (the cell-to-cell midpoint), not at the Voronoi-edge midpoint: the edge
    # offset stays 0.088 dvEdge on the 60 pentagon edges of an SCVT, so l_inf does not converge
    # next to the pentagons (7e-2 at every level) and l2 falls to first order (1.16 / 1.04, 0.99
    # over 6->7). Below the "about 2": with exact fluxes (next case) div_e2c is second
    # order in both norms.
    "div_e2c": (1.0, None, 0.1),
    "div_e2c[mean flux]": (1.9, 1.9, None),                  # l2 2.00 / 1.98, linf 1.99 / 1.80
    # curl on the Delaunay triangles is first order: the vertex (circumcentre) is O(h) away from
    # the triangle's centroid and the triangles are not centrally symmetric, so neither the point
    # value at the vertex nor exact circulations give more (l2 1.02 / 1.03, linf 1.03 / 1.03).
    "curl_e2v": (0.9, 0.9, None),
    "curl_e2v[mean circulation]": (0.9, 0.9, None),          # l2 1.19 / 1.10, linf 1.04 / 1.03
    "grad_c2e": (1.9, 1.9, None),                            # l2 2.00 / 2.01, linf 2.01 / 1.96
    # (psi[v1]-psi[v0])/dvEdge is centred at the Voronoi-edge midpoint, not at xEdge: l_inf is first
    # order (1.17 / 1.11) near the pentagons, l2 stays near 2 (1.97 / 1.88).
    "grad_v2e": (1.8, 1.0, None),
    "interp_c2e": (1.9, 1.9, None),                          # l2 2.00 / 1.99, linf 1.99 / 1.94
    "interp_v2e": (1.8, 0.9, None),                          # l2 1.97 / 2.00, linf 1.05 / 1.05
    # kite-weighted cell -> vertex average at the circumcentre: first order (l2 1.19 / 1.04).
    "interp_c2v": (0.9, 0.9, None),
    "interp_v2c": (1.9, 1.8, None),                          # l2 2.00 / 2.01, linf 1.98 / 1.72
    # TRiSK weights: l2 near 2 (1.97 / 1.84), l_inf stalls at 7e-3 from level 5 (0.80 / 0.01).
    "tangential_e2e": (1.8, None, 0.015),
    # div(grad): l2 decays towards first order (1.72 / 1.42), l_inf stalls near 9e-3 (0.06 / 0.02).
    "laplacian_c2c": (1.5, None, 0.015),
    # grad(div) - grad(curl) of point-sampled u: not consistent on these meshes, l2 ~0.22 and
    # l_inf ~0.47 at every level (orders 0.01 / 0.01, -0.12 / -0.26).
    "vector_laplacian_e2e": (-0.1, None, 0.6),
    "reconstruct_e2c": (1.9, 1.2, None),                     # l2 1.99 / 1.99, linf 1.43 / 1.24
    # MPAS kinetic energy sum 0.25 dcEdge dvEdge u^2 / areaCell: l2 1.59 / 1.31, l_inf stalls at 1.7e-2.
    "ke_e2c": (1.4, None, 0.025),
}

# The same over levels 6 -> 7 with 200 Lloyd iterations (measured l2 / linf orders, or the stalled
# linf error, in the comments). Some second-order cases fall there because level 7 is further from
# an SCVT (residual 1.5e-3), not because of the operators: see RESULTS.md for 1000 iterations.
SLOW_BOUNDS = {
    "div_e2c": (0.9, None, 0.1),                   # 0.99 / linf 7.4e-2
    "div_e2c[mean flux]": (1.7, 1.3, None),        # 1.83 / 1.44
    "curl_e2v": (0.9, 0.85, None),                 # 0.99 / 0.93
    "curl_e2v[mean circulation]": (0.7, 0.9, None),  # 0.80 / 1.01
    "grad_c2e": (1.9, 1.85, None),                 # 2.00 / 1.94
    "grad_v2e": (1.5, 0.95, None),                 # 1.62 / 1.05
    "interp_c2e": (1.9, 1.8, None),                # 1.99 / 1.90
    "interp_v2e": (1.8, 0.9, None),                # 1.89 / 1.01
    "interp_c2v": (0.7, 0.85, None),               # 0.82 / 0.96
    "interp_v2c": (1.8, 1.0, None),                # 1.92 / 1.12
    "tangential_e2e": (1.4, None, 0.01),           # 1.48 / linf 6.8e-3
    "laplacian_c2c": (1.0, None, 0.01),            # 1.14 / linf 8.8e-3
    "vector_laplacian_e2e": (-0.1, None, 0.8),     # -0.03 / linf 0.70
    "reconstruct_e2c": (1.85, 1.0, None),          # 1.95 / 1.11
    "ke_e2c": (1.0, None, 0.025),                  # 1.10 / linf 1.7e-2
}


def _meshes(levels):
    return {level: generate_icosahedral(level, lloyd_iterations=LLOYD) for level in levels}


@pytest.fixture(scope="module")
def scvt_meshes():
    return _meshes(CI_LEVELS)


def _errors(meshes, case):
    return [A.measure(meshes[level], case, meshops) for level in sorted(meshes)]


def _check(label, errs, bounds):
    l2_min, linf_min, linf_max = bounds
    l2 = [e["l2"] for e in errs]
    linf = [e["linf"] for e in errs]
    o2, oi = A.observed_orders(l2), A.observed_orders(linf)
    msg = f"{label}: l2 {l2} orders {np.round(o2, 2)}; linf {linf} orders {np.round(oi, 2)}"
    assert o2[-1] >= l2_min, msg
    if linf_min is not None:
        assert oi[-1] >= linf_min, msg
    if linf_max is not None:
        assert max(linf[-2:]) <= linf_max, msg


def test_meshes_are_near_scvt(scvt_meshes):
    for level, mesh in scvt_meshes.items():
        assert A.centroid_offset(mesh) < 1e-3, f"level {level}: {A.centroid_offset(mesh)}"


@pytest.mark.parametrize("label", sorted(A.CASES))
def test_convergence_order(label, scvt_meshes):
    _check(label, _errors(scvt_meshes, A.CASES[label]), CI_BOUNDS[label])


def test_bounds_cover_every_case():
    assert set(CI_BOUNDS) == set(A.CASES) == set(SLOW_BOUNDS)


@pytest.mark.slow
def test_convergence_order_levels_2_to_7():
    meshes = _meshes(SLOW_LEVELS)
    failures = []
    for label, case in A.CASES.items():
        try:
            _check(label, _errors(meshes, case), SLOW_BOUNDS[label])
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, "\n".join(failures)


# -- the analytic fields themselves ------------------------------------------------------------

def _random_frames(rng, n):
    """Random unit vectors p with two orthonormal tangents t1, t2 (t1 x t2 = p)."""
    p = rng.standard_normal((n, 3))
    p /= np.linalg.norm(p, axis=1)[:, None]
    t1 = A.tangent_projection(p, rng.standard_normal((n, 3)))
    t1 /= np.linalg.norm(t1, axis=1)[:, None]
    return p, t1, np.cross(p, t1)


def _geodesic(p, t, s):
    return np.cos(s) * p + np.sin(s) * t


def _scalar_fields():
    Q = A.rotation(7)
    return [A.smooth_scalar(), A.smooth_scalar(Q), A.xyz_field(), A.sectoral_field(4, times_z=True),
            A.exp_field([0.6, -0.3, 0.8]).rotated(Q)]


@pytest.mark.parametrize("k", range(5))
def test_scalar_field_derivatives(k, rng):
    """grad and Laplace-Beltrami against geodesic finite differences (radius a, h = 1e-4 rad)."""
    f, a, h = _scalar_fields()[k], 6.0e6 * (1 + rng.random()), 1e-4
    p, t1, t2 = _random_frames(rng, 50)
    g = f.grad(p, a)
    lap_fd = np.zeros(p.shape[0])
    for t in (t1, t2):
        fp, fm = f.value(_geodesic(p, t, h)), f.value(_geodesic(p, t, -h))
        d1 = (fp - fm) / (2 * h * a)
        np.testing.assert_allclose(np.einsum("ij,ij->i", g, t), d1, rtol=1e-6,
                                   atol=1e-7 * np.abs(d1).max())
        lap_fd += (fp - 2 * f.value(p) + fm) / (h * a) ** 2
    lap = f.laplacian(p, a)
    np.testing.assert_allclose(lap, lap_fd, rtol=1e-5, atol=1e-5 * np.abs(lap).max())
    # the gradient of the Laplacian, where given
    gl = A.tangent_projection(p, f.lap_grad3(p)) / a
    for t in (t1, t2):
        d1 = (f.lap(_geodesic(p, t, h)) - f.lap(_geodesic(p, t, -h))) / (2 * h * a)
        np.testing.assert_allclose(np.einsum("ij,ij->i", gl, t), d1, rtol=1e-6,
                                   atol=1e-7 * np.abs(d1).max())


@pytest.mark.parametrize("which", ["tc2", "rh4", "divergent", "mixed"])
def test_velocity_field_derivatives(which, rng):
    """Divergence and vorticity against flux and circulation through small geodesic circles; the
    vector Laplacian against finite differences of both; the fields are tangent to the sphere."""
    a, Q = 6.371229e6, A.rotation(int(rng.integers(1, 1000)))
    field = {"tc2": A.solid_body_flow(a, alpha=rng.random()), "rh4": A.rossby_haurwitz_flow(a, Q),
             "divergent": A.divergent_flow(Q=Q), "mixed": A.mixed_flow(a, Q)}[which]
    p, t1, t2 = _random_frames(rng, 20)
    u = field.vector(p)
    assert np.abs(np.einsum("ij,ij->i", u, p)).max() <= 1e-12 * np.abs(u).max()
    r, m = 1e-4, 256
    flux = np.zeros(p.shape[0])
    circ = np.zeros(p.shape[0])
    for th in 2 * np.pi * (np.arange(m) + 0.5) / m:
        radial = np.cos(th) * t1 + np.sin(th) * t2
        q = _geodesic(p, radial, r)
        out = -np.sin(r) * p + np.cos(r) * radial  # outward normal of the circle at q
        along = np.cross(q, out)                   # counter-clockwise tangent
        uq = field.vector(q)
        flux += np.einsum("ij,ij->i", uq, out) * 2 * np.pi * np.sin(r) * a / m
        circ += np.einsum("ij,ij->i", uq, along) * 2 * np.pi * np.sin(r) * a / m
    area = 2 * np.pi * (1 - np.cos(r)) * a * a
    scale = field.U / a
    for approx, exact in ((flux / area, field.divergence(p, a)), (circ / area, field.vorticity(p, a))):
        np.testing.assert_allclose(approx, exact, atol=1e-6 * max(np.abs(exact).max(), scale))
    # (grad div + k x grad vort) . t = d(div)/dt - d(vort)/ds with s = k x t
    h = 1e-4
    lap = field.vector_laplacian(p, a)
    for t in (t1, t2):
        s = np.cross(p, t)
        ddiv = field.divergence(_geodesic(p, t, h), a) - field.divergence(_geodesic(p, t, -h), a)
        dvort = field.vorticity(_geodesic(p, s, h), a) - field.vorticity(_geodesic(p, s, -h), a)
        np.testing.assert_allclose(np.einsum("ij,ij->i", lap, t), (ddiv - dvort) / (2 * h * a),
                                   atol=1e-6 * scale / a)


def test_edge_frames_follow_mpas_signs(scvt_meshes):
    """The analytic normal points from cellsOnEdge[e,0] to [e,1], the tangent k x n from
    verticesOnEdge[e,0] to [e,1]."""
    mesh = scvt_meshes[3]
    pc, pv = A.cell_points(mesh), A.vertex_points(mesh)
    n, t = A.edge_normals(mesh), A.edge_tangents(mesh)
    dc = pc[mesh.cellsOnEdge[:, 1]] - pc[mesh.cellsOnEdge[:, 0]]
    dv = pv[mesh.verticesOnEdge[:, 1]] - pv[mesh.verticesOnEdge[:, 0]]
    assert np.all(np.einsum("ij,ij->i", n, dc) > 0)
    assert np.all(np.einsum("ij,ij->i", t, dv) > 0)


# -- discrete identities to round-off, over the levels ---------------------------------------------

ROUNDOFF = 1e-13


def _vertex_abs(mesh, g):
    """sum_i dcEdge |g| / areaTriangle over edgesOnVertex: the size of the terms of curl_e2v(g)."""
    e = mesh.edgesOnVertex
    return (mesh.dcEdge[e] * np.abs(g[e])).sum(axis=1) / mesh.areaTriangle


@pytest.mark.parametrize("level", CI_LEVELS)
def test_curl_of_grad_vanishes(level, scvt_meshes, rng):
    mesh = scvt_meshes[level]
    phi = rng.standard_normal(mesh.nCells) * 1e3
    g = meshops.grad_c2e(mesh, phi)
    curl = meshops.curl_e2v(mesh, g)
    # grad_c2e rounds its two terms +-phi / dcEdge, so the round-off scales with |phi|, not |g|
    # (three nearly equal phi around a vertex give a tiny g with an error of eps |phi| / dcEdge)
    c = mesh.cellsOnEdge
    g_terms = (np.abs(phi[c[:, 0]]) + np.abs(phi[c[:, 1]])) / mesh.dcEdge
    ratio = np.abs(curl) / _vertex_abs(mesh, g_terms)
    assert ratio.max() <= ROUNDOFF, f"level {level}: max |curl grad| / terms = {ratio.max():.2e}"


@pytest.mark.parametrize("level", CI_LEVELS)
def test_global_integral_of_div_vanishes(level, scvt_meshes, rng):
    mesh = scvt_meshes[level]
    F = rng.standard_normal(mesh.nEdges) * 10.0
    total = np.sum(mesh.areaCell * meshops.div_e2c(mesh, F))
    scale = 2.0 * np.sum(mesh.dvEdge * np.abs(F))  # every edge enters twice
    assert abs(total) <= ROUNDOFF * scale, f"level {level}: {total:.3e} vs terms {scale:.3e}"


@pytest.mark.parametrize("level", CI_LEVELS)
def test_pv_flux_is_energy_neutral(level, scvt_meshes, rng):
    """sum_e dcEdge dvEdge F[e] pv_flux_e2e(F, q)[e] = 0 (F = h u at edges), relative to the sum of
    the absolute values of its terms dcEdge dvEdge |F[e] w_j F[eoe_j] (q[e] + q[eoe_j]) / 2|."""
    mesh = scvt_meshes[level]
    F = rng.standard_normal(mesh.nEdges) * 1e4 + 5e4
    q = rng.standard_normal(mesh.nEdges) * 1e-8 + 1e-8
    total = np.sum(mesh.dcEdge * mesh.dvEdge * F * meshops.pv_flux_e2e(mesh, F, q))
    eoe = mesh.edgesOnEdge
    live = (np.arange(eoe.shape[1])[None, :] < mesh.nEdgesOnEdge[:, None]) & (eoe >= 0)
    e2 = np.where(live, eoe, 0)
    terms = np.where(live, np.abs(mesh.weightsOnEdge * F[e2] * 0.5 * (q[:, None] + q[e2])), 0.0)
    scale = np.sum(mesh.dcEdge * mesh.dvEdge * np.abs(F) * terms.sum(axis=1))
    assert abs(total) <= ROUNDOFF * scale, f"level {level}: {total:.3e} vs terms {scale:.3e}"
