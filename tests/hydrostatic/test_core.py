"""The hydrostatic core's discretisation on real generated meshes: JW06's steady state stays
steady, mass and mass-weighted potential temperature are conserved to round-off, the column
diagnostics satisfy their defining identities, the layers stay on the hybrid coordinate, and
the baroclinic wave starts from p_s = 1000 hPa."""
import numpy as np
import pytest

import meshops
from grids.cache import cached_icosahedral
from meshops.operators.vertical import R_DRY
from framework.constants import GRAVITY

from hydrostatic import levels, testcases
from hydrostatic.dynamics import Physics, column_diagnostics, tendencies, vertical_mass_flux
from hydrostatic.forcing import HeldSuarez
from hydrostatic.model import Model

A, B = levels.coefficients("jw06_26")
DB = B[:-1] - B[1:]


def physics(**kw):
    return Physics(p_top=float(A[-1]), dB=DB, **kw)


def state(level, case, lloyd=50):
    mesh = cached_icosahedral(level, lloyd_iterations=lloyd)
    return mesh, testcases.initial_state(mesh, case, A, B)


def perturbed(rng, mesh, s):
    """The baroclinic state with a fresh random perturbation of u, theta and p_s."""
    ps = levels.P0 + 500.0 * rng.standard_normal(mesh.nCells)
    mass = levels.layer_mass(A, B, ps, GRAVITY)
    theta = s.theta_mass / s.mass * (1.0 + 1e-3 * rng.standard_normal(s.mass.shape))
    u = s.u + rng.standard_normal(s.u.shape)
    return mass, mass * theta, u


def test_levels_table_is_jw06s():
    assert A.shape == B.shape == (27,)
    assert A[-1] == pytest.approx(219.4067) and B[0] == 1.0 and A[0] == 0.0 and B[-1] == 0.0
    assert np.all(np.diff(A + B * levels.P0) < 0)          # pressure falls upward
    assert DB.sum() == pytest.approx(1.0, abs=1e-15) and (DB >= 0).all()


def test_baroclinic_wave_starts_at_1000_hPa():
    mesh, s = state(3, "jw06_baroclinic")
    d = column_diagnostics(mesh, s.mass, s.theta_mass, s.phi_s, physics())
    np.testing.assert_allclose(d["p_i"][:, 0], 1.0e5, rtol=1e-13, atol=0)
    np.testing.assert_allclose(d["p_i"][:, -1], A[-1], rtol=1e-12)
    # the perturbation: 1 m/s at (20E, 40N), nothing far away
    lat, lon = np.degrees(mesh.latEdge), np.degrees(mesh.lonEdge)
    du = testcases.jw06_perturbation(mesh.latEdge, mesh.lonEdge, mesh.sphere_radius)
    centre = testcases.jw06_perturbation(np.radians(40.0), np.radians(20.0), mesh.sphere_radius)
    assert centre == pytest.approx(1.0, abs=1e-12) and du.max() > 0.5 and du[np.hypot(lat - 40.0, (lon - 20.0 + 180) % 360 - 180) > 60].max() < 1e-4


def test_column_diagnostics_identities(rng):
    mesh, s = state(3, "jw06_baroclinic")
    mass, theta_mass, u = perturbed(rng, mesh, s)
    d = column_diagnostics(mesh, mass, theta_mass, s.phi_s, physics())
    # interface pressure: hydrostatic sum of the layers; layer pressure their mean
    np.testing.assert_allclose(d["p_i"][:, 0] - d["p_i"][:, -1], GRAVITY * mass.sum(1), rtol=1e-13)
    np.testing.assert_allclose(d["p_i"][:, :-1] - d["p_i"][:, 1:], GRAVITY * mass, rtol=1e-11)
    np.testing.assert_allclose(d["p"], 0.5 * (d["p_i"][:, 1:] + d["p_i"][:, :-1]), rtol=1e-14)
    # ideal gas: alpha = R T / p; geopotential from the surface: d phi = alpha dp
    temperature = d["theta"] * (d["p"] / 1e5) ** (2.0 / 7.0)
    np.testing.assert_allclose(d["alpha"], R_DRY * temperature / d["p"], rtol=1e-13)
    np.testing.assert_allclose(d["phi_i"][:, 0], s.phi_s, rtol=0, atol=0)
    np.testing.assert_allclose(np.diff(d["phi_i"], axis=1), d["alpha"] * (d["p_i"][:, :-1] - d["p_i"][:, 1:]),
                               rtol=1e-10)
    np.testing.assert_allclose(d["pi"], 1004.5 * (d["p"] / 1e5) ** (2.0 / 7.0), rtol=1e-13)


def test_layers_stay_on_the_hybrid_coordinate(rng):
    """tend_mass[k] = dB[k] * (d p_s / dt) / g, W = 0 at the surface and (to round-off) the top."""
    mesh, s = state(3, "jw06_baroclinic")
    mass, theta_mass, u = perturbed(rng, mesh, s)
    tend_mass = tendencies(mesh, mass, theta_mass, u, s.phi_s, s.f_vertex, physics())[0]
    div = meshops.div_e2c(mesh, meshops.interp_c2e(mesh, mass) * u)
    W = vertical_mass_flux(mesh, div, DB)
    scale = np.abs(div).max()
    assert np.all(W[:, 0] == 0) and np.abs(W[:, -1]).max() < 1e-12 * scale * 26
    np.testing.assert_allclose(tend_mass, -DB * div.sum(1, keepdims=True), rtol=0, atol=1e-12 * scale)
    assert np.abs(tend_mass[:, DB == 0]).max() < 1e-12 * scale


def test_mass_and_theta_conserved_to_round_off(rng):
    mesh, s = state(3, "jw06_baroclinic")
    mass, theta_mass, u = perturbed(rng, mesh, s)
    model = Model(mesh, mass, theta_mass, u, s.phi_s, s.f_vertex, 1200.0, physics(visc4=1e16))
    area = mesh.areaCell[:, None]
    total = [(area * mass).sum(), (area * theta_mass).sum()]
    for _ in range(5):
        model.step()
    assert abs((area * model.mass).sum() / total[0] - 1) < 1e-14
    assert abs((area * model.theta_mass).sum() / total[1] - 1) < 1e-14
    assert np.abs(model.u - u).max() > 1e-3                    # it did move


def test_jw06_steady_state_stays_steady():
    """Level 4 (SCVT), 6 hours: the zonal jet of 35 m/s moves by less than 0.5 m/s and p_s by less
    than 0.5 hPa (the discretisation's imbalance; a sign error in any term departs by far more)."""
    mesh, s = state(4, "jw06_steady")
    model = Model(mesh, s.mass, s.theta_mass, s.u, s.phi_s, s.f_vertex, 1200.0, physics())
    for _ in range(18):
        model.step()
    assert np.abs(model.u - s.u).max() < 0.5
    ps = A[-1] + GRAVITY * model.mass.sum(1)
    assert np.abs(ps - 1e5).max() < 50.0


def test_held_suarez_relaxes_toward_equilibrium(rng):
    mesh, s = state(3, "held_suarez")
    assert not s.phi_s.any()
    forcing = HeldSuarez(mesh.latCell)
    d = column_diagnostics(mesh, s.mass, s.theta_mass, s.phi_s, physics())
    t_theta, t_u = forcing.tendencies(mesh, d, s.mass, s.u)
    # friction only below sigma_b = 0.7, opposing u
    sigma_e = meshops.interp_c2e(mesh, d["p"] / d["p_i"][:, :1])
    assert np.all(t_u[sigma_e <= 0.7] == 0) and np.all(t_u * s.u <= 0)
    assert (t_u != 0).any()
    # temperature relaxed: hotter than T_eq cools; the rate at most k_s
    t_eq_theta = d["theta"] + t_theta / (s.mass / (4 * 86400.0))
    assert np.all(t_theta / s.mass * 4 * 86400.0 >= -(d["theta"] - 150.0))
    warmer = d["theta"] > t_eq_theta + 1e-9
    assert np.all(t_theta[warmer] < 0) and warmer.any()


def test_float32_step_follows_float64(rng):
    mesh, s = state(3, "jw06_baroclinic")
    fields = perturbed(rng, mesh, s)
    out = {}
    for dtype in (np.float64, np.float32):
        cast = [f.astype(dtype) for f in fields]
        model = Model(mesh, *cast, s.phi_s.astype(dtype), s.f_vertex.astype(dtype), 1200.0,
                      Physics(p_top=float(A[-1]), dB=DB.astype(dtype)))
        model.step()
        assert model.mass.dtype == model.theta_mass.dtype == model.u.dtype == dtype
        out[dtype] = model.u
    assert np.abs(out[np.float32] - out[np.float64]).max() < 1e-2


@pytest.mark.parametrize("alpha", [30.0, 45.0, 90.0])
def test_rotated_cases_are_the_cases_about_a_tilted_axis(rng, alpha):
    """The rotated JW06 states (Lauritzen et al. 2010): at random model points the test frame's
    coordinates invert; the surface geopotential, the temperature and the Coriolis parameter are
    the unrotated case's at the test-frame latitude; the reconstructed wind, turned into the test
    frame, is the jet's (within the reconstruction's error); the rotated steady state starts as
    balanced as the unrotated one; rotation 0 is the published case bitwise."""
    mesh = cached_icosahedral(4, lloyd_iterations=50)
    lon, lat = rng.uniform(-np.pi, np.pi, 50), rng.uniform(-1.5, 1.5, 50)
    back = testcases.unrotated_coordinates(*testcases.rotated_coordinates(lon, lat, alpha), alpha)
    np.testing.assert_allclose(np.exp(1j * back[0]), np.exp(1j * lon), atol=1e-12)
    np.testing.assert_allclose(back[1], lat, atol=1e-12)
    plain = testcases.initial_state(mesh, "jw06_baroclinic", A, B)
    same = testcases.initial_state(mesh, "jw06_baroclinic", A, B, 0.0)
    for name in ("mass", "theta_mass", "u", "phi_s", "f_vertex"):
        assert np.array_equal(getattr(plain, name), getattr(same, name)), name
    s = testcases.initial_state(mesh, "jw06_steady", A, B, alpha)
    _, lat_r = testcases.rotated_coordinates(mesh.lonCell, mesh.latCell, alpha)
    np.testing.assert_allclose(s.phi_s, testcases.jw06_surface_geopotential(lat_r, mesh.sphere_radius))
    _, lat_v = testcases.rotated_coordinates(mesh.lonVertex, mesh.latVertex, alpha)
    np.testing.assert_allclose(s.f_vertex, 2 * testcases.OMEGA_JW * np.sin(lat_v))
    eta = testcases.layer_eta(A, B)
    zonal, meridional = meshops.reconstruct_zonal_meridional_e2c(mesh, s.u)
    east, north = testcases.tilted_east(mesh.lonCell, mesh.latCell, alpha)
    u_test = east[:, None] * zonal + north[:, None] * meridional
    eta_v = (eta - testcases.ETA_0) * np.pi / 2
    jet = testcases.U_0 * np.cos(eta_v)[None, :] ** 1.5 * np.sin(2 * lat_r)[:, None] ** 2
    assert np.abs(u_test - jet).max() < 0.05 * testcases.U_0
    p = physics()
    imbalance = [np.abs(tendencies(mesh, c.mass, c.theta_mass, c.u, c.phi_s, c.f_vertex, p)[2]).max()
                 for c in (testcases.initial_state(mesh, "jw06_steady", A, B), s)]
    assert imbalance[1] < 5 * imbalance[0], imbalance


@pytest.mark.parametrize("case, alpha", [("jw06_baroclinic", 0.0), ("jw06_steady", 45.0),
                                          ("held_suarez", 0.0)])
def test_the_state_of_any_rows_is_the_global_states_rows_bitwise(rng, case, alpha):
    """A rank forms its state from its rows' factors (`row_factors` scattered, `state_fields`):
    random rows in a random order give those rows of the global state bitwise (signs of zero
    included), and the temperature's factored form is JW06's formula (module doc) to rounding."""
    mesh = cached_icosahedral(4, lloyd_iterations=50)
    whole = testcases.initial_state(mesh, case, A, B, alpha)
    rows = testcases.row_factors(mesh, case, alpha)
    picked = {"cell": rng.permutation(mesh.nCells)[:97], "edge": rng.permutation(mesh.nEdges)[:211],
              "vertex": rng.permutation(mesh.nVertices)[:53]}
    part = testcases.state_fields(
        {loc: {name: None if v is None else v[picked[loc]] for name, v in fields.items()}
         for loc, fields in rows.items()},
        testcases.layer_factors(A, B, mesh.sphere_radius), mesh.dvEdge[picked["edge"]])
    for name, loc in (("mass", "cell"), ("theta_mass", "cell"), ("u", "edge"), ("phi_s", "cell"),
                      ("f_vertex", "vertex")):
        assert np.array_equal(getattr(part, name).view(np.uint64),
                              getattr(whole, name)[picked[loc]].view(np.uint64)), name
    lat = rng.uniform(-1.5, 1.5, 40)[:, None]
    eta = testcases.layer_eta(A, B)[None, :]
    s, c = np.sin(lat), np.cos(lat)
    eta_v = (eta - testcases.ETA_0) * np.pi / 2
    t_bar = testcases.T_0 * eta ** (R_DRY * testcases.LAPSE / GRAVITY) + np.where(
        eta < testcases.ETA_T, testcases.DELTA_T * np.clip(testcases.ETA_T - eta, 0, None) ** 5, 0)
    amplitude = 0.75 * eta * np.pi * testcases.U_0 / R_DRY * np.sin(eta_v) * np.cos(eta_v) ** 0.5
    published = t_bar + amplitude * (
        (-2 * s**6 * (c**2 + 1 / 3) + 10 / 63) * 2 * testcases.U_0 * np.cos(eta_v) ** 1.5
        + (1.6 * c**3 * (s**2 + 2 / 3) - np.pi / 4) * mesh.sphere_radius * testcases.OMEGA_JW)
    np.testing.assert_allclose(testcases.jw06_temperature(lat, eta, mesh.sphere_radius), published,
                               rtol=1e-14)


def test_rotation_is_refused_where_it_has_no_meaning():
    from framework.errors import ConfigError
    from meshrun.config import load_config

    with pytest.raises(ConfigError, match=r"case.rotation = 45.0: held_suarez is not rotated"):
        load_config("configs/held_suarez_l4.yaml", ["case.rotation=45"])
    with pytest.raises(ConfigError, match=r"case.rotation"):
        load_config("configs/jw06_steady_l5.yaml", ["case.rotation=120"])
    with pytest.raises(ValueError, match=r"case.rotation = -1: expected degrees in \[0, 90\]"):
        testcases.initial_state(cached_icosahedral(2), "jw06_steady", A, B, -1)
