"""The comparison diagnostics of swm.analysis on generated meshes, against fields whose zonal
spectrum and values are known exactly."""
import numpy as np
import pytest

from grids.icosahedral import generate_icosahedral
from swm import analysis
from framework.constants import EARTH_RADIUS


@pytest.fixture(scope="module")
def meshes():
    return {level: generate_icosahedral(level, lloyd_iterations=50, sphere_radius=EARTH_RADIUS)
            for level in (3, 4, 5)}


def test_zonal_amplitudes_recover_random_waves(meshes, rng):
    """f = a zonal mean varying with latitude + a cos(m (lon - lon0)) + a second wave b sin(k lon)
    whose amplitude varies with latitude: the fit represents them, so |A_m| = a, the crest
    longitude lon0 and A_k to round-off, and the other wavenumbers vanish (a plain quadrature over
    the scattered cells would leak the zonal mean into them at about 1e-3 of its range)."""
    m, k = rng.choice(np.arange(1, 9), size=2, replace=False)
    a, b, lon0 = rng.uniform(50.0, 500.0), rng.uniform(5.0, 50.0), rng.uniform(-np.pi / m, np.pi / m)
    band = (np.radians(rng.uniform(-60.0, 10.0)), 0.0)
    band = (band[0], band[0] + np.radians(30.0))
    mesh = meshes[4]
    lat, lon = mesh.latCell, mesh.lonCell
    s = 2.0 * (lat - band[0]) / (band[1] - band[0]) - 1.0
    f = 9000.0 + 800.0 * s ** 2 + a * np.cos(m * (lon - lon0)) + b * (1.0 + 0.5 * s) * np.sin(k * lon)
    amps = analysis.zonal_amplitudes(lat, lon, mesh.areaCell, f, band, np.arange(1, 9))
    inside = (lat >= band[0]) & (lat < band[1])
    mean_factor = np.sum(mesh.areaCell[inside] * (1.0 + 0.5 * s[inside])) / np.sum(mesh.areaCell[inside])
    assert abs(abs(amps[m - 1]) / a - 1) < 1e-9
    assert abs(np.angle(np.exp(1j * m * (analysis.pattern_longitude(amps[m - 1], m) - lon0)))) < 1e-9
    assert abs(amps[k - 1] - (-1j) * b * mean_factor) < 1e-9 * b
    assert np.abs(np.delete(amps, [m - 1, k - 1])).max() < 1e-9 * a


def test_unwrap_drift_follows_a_pattern_around_the_globe(rng):
    """Crest longitudes of a wave-4 pattern moving east by less than pi / 4 per sample, wrapped
    into (-pi / 4, pi / 4]: the cumulative drift is recovered exactly."""
    steps = rng.uniform(0.0, 0.7, 40)
    true = np.concatenate([[0.0], np.cumsum(steps)]) + 0.1
    wrapped = (true + np.pi / 4) % (np.pi / 2) - np.pi / 4
    np.testing.assert_allclose(analysis.unwrap_drift(wrapped, 4), true - true[0], atol=1e-12)


def test_interp_c2points_is_second_order(meshes, rng):
    """A smooth function of position sampled at cell centres, interpolated to random points: the
    largest error falls by about 4 as the spacing halves."""
    points = rng.standard_normal((3000, 3))
    unit = points / np.linalg.norm(points, axis=1)[:, None]
    k = rng.uniform(1.0, 3.0, 3)

    def f(p):
        return np.sin(k[0] * p[:, 0]) + np.cos(k[1] * p[:, 1]) * p[:, 2] + k[2] * p[:, 0] * p[:, 1]

    errors = []
    for level in (3, 4, 5):
        mesh = meshes[level]
        centres = np.column_stack([mesh.xCell, mesh.yCell, mesh.zCell]) / mesh.sphere_radius
        errors.append(np.abs(analysis.interp_c2points(mesh, f(centres), points) - f(unit)).max())
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(rates > 1.8), (errors, rates)


def test_bad_input_names_the_argument(meshes):
    mesh = meshes[3]
    with pytest.raises(ValueError, match="band"):
        analysis.zonal_amplitudes(mesh.latCell, mesh.lonCell, mesh.areaCell, mesh.latCell, (1.0, 0.5), [4])
    with pytest.raises(ValueError, match="wavenumbers"):
        analysis.zonal_amplitudes(mesh.latCell, mesh.lonCell, mesh.areaCell, mesh.latCell, (0.1, 0.5), [0, 4])
    with pytest.raises(ValueError, match="cells"):
        analysis.zonal_amplitudes(mesh.latCell, mesh.lonCell, mesh.areaCell, mesh.latCell, (0.1, 0.11), [4])
    with pytest.raises(ValueError, match="field"):
        analysis.interp_c2points(mesh, np.zeros(mesh.nCells + 1), np.ones((2, 3)))
    with pytest.raises(ValueError, match="points"):
        analysis.interp_c2points(mesh, np.ones(mesh.nCells), np.ones((2, 2)))
