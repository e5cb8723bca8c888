"""Zonal and time means of a hydrostatic history (hydrostatic.zonal_mean) on real meshes: bands
of at least 1.5 mesh spacings that each hold cells, area-weighted band means of fresh random
fields exact, records meaned from the day asked; and `python -m hydrostatic.plot --zonal-mean` on
a real Held-Suarez run, with wrong uses refused in one line."""
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from grids.cache import cached_icosahedral
from hydrostatic.zonal_mean import ZonalMeanError, band_edges, zonal_means

from .test_run import config
from tests.swm.test_faults import env, ok, run_model


@pytest.mark.parametrize("level", [2, 3, 4])
def test_every_band_holds_cells_and_is_at_least_one_and_a_half_spacings(level):
    mesh = cached_icosahedral(level, lloyd_iterations=20)
    edges = band_edges(mesh.areaCell, mesh.sphere_radius)
    spacing = np.degrees(np.sqrt(mesh.areaCell.mean()) / mesh.sphere_radius)
    assert edges[0] == -90.0 and edges[-1] == 90.0 and np.all(np.diff(edges) >= 1.5 * spacing)
    counts = np.histogram(np.degrees(mesh.latCell), edges)[0]
    assert counts.min() > 0 and counts.sum() == mesh.nCells


def _history(mesh, fields: dict, days) -> xr.Dataset:
    dims = ("Time", "nCells", "nVertLevels")
    return xr.Dataset({"Time": ("Time", np.asarray(days, dtype=float)),
                       "latCell": ("nCells", mesh.latCell), "areaCell": ("nCells", mesh.areaCell),
                       **{name: (dims, x) for name, x in fields.items()}},
                      attrs={"sphere_radius": mesh.sphere_radius})


def test_band_means_are_area_weighted_over_the_records_from_the_day(rng):
    mesh = cached_icosahedral(3, lloyd_iterations=20)
    edges = band_edges(mesh.areaCell, mesh.sphere_radius)
    band = np.clip(np.searchsorted(edges, np.degrees(mesh.latCell), side="right") - 1, 0,
                   edges.size - 2)
    days, nlev = [0.0, 1.0, 2.0, 3.0], 4
    per_band = rng.uniform(200.0, 300.0, (edges.size - 1, nlev))
    scale = rng.uniform(0.5, 1.5, len(days))
    # constant on each band (times a factor per record): its band mean is the constant itself
    constant = np.stack([s * per_band[band] for s in scale])
    # zero mean over each band with the area weights: its band mean is zero
    noise = rng.standard_normal((len(days), mesh.nCells, nlev))
    for j in range(edges.size - 1):
        cells = band == j
        w = mesh.areaCell[cells]
        noise[:, cells] -= (w[:, None] * noise[:, cells]).sum(axis=1, keepdims=True) / w.sum()
    ds = _history(mesh, {"temperature": constant, "pressure": noise,
                         "uReconstructZonal": constant + noise}, days)
    means = zonal_means(ds, from_day=1.0)
    assert list(means["days"]) == [1.0, 2.0, 3.0]
    np.testing.assert_allclose(means["latitude"], 0.5 * (edges[:-1] + edges[1:]))
    expected = scale[1:].mean() * per_band
    np.testing.assert_allclose(means["temperature"], expected, rtol=1e-13)
    np.testing.assert_allclose(means["uReconstructZonal"], expected, rtol=1e-12)
    assert np.abs(means["pressure"]).max() < 1e-12
    np.testing.assert_allclose(zonal_means(ds)["temperature"], scale.mean() * per_band, rtol=1e-13)
    with pytest.raises(ZonalMeanError, match=r"--from-day 4: the last record is at day 3"):
        zonal_means(ds, from_day=4.0)
    with pytest.raises(ZonalMeanError, match=r"no uReconstructZonal: expected a history with "
                                             r"output.variables including"):
        zonal_means(ds.drop_vars("uReconstructZonal"))


def _plot(*args, cache=None):
    return subprocess.run([sys.executable, "-m", "hydrostatic.plot", *map(str, args)],
                          env=env(cache), capture_output=True, text=True, timeout=120)


def test_a_held_suarez_run_draws_its_zonal_means(tmp_path):
    ok(run_model(config(tmp_path, "hs", case={"name": "held_suarez"},
                        time={"days": 0.25, "dt": 1800})))
    out = _plot(tmp_path / "hs.nc", "--zonal-mean", "--from-day", "0.125",
                cache=tmp_path / "cache")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "hs.zonal_mean.png").stat().st_size > 1000
    with xr.open_dataset(tmp_path / "hs.nc", decode_times=False) as ds:
        means = zonal_means(ds, from_day=0.125)
    u, T, lat = means["uReconstructZonal"], means["temperature"], means["latitude"]
    assert 25.0 < u.max() < 45.0 and 25.0 < abs(lat[np.argmax(u.max(axis=1))]) < 60.0  # the jets
    assert 180.0 < T.min() and T.max() < 320.0
    for args, message in [(("--from-day", "1"), "--from-day goes with --zonal-mean"),
                          (("--zonal-mean", "--day", "0.125"), "--day draws the maps"),
                          (("--zonal-mean", "--from-day", "3"),
                           "--from-day 3: the last record is at day 0.25")]:
        out = _plot(tmp_path / "hs.nc", *args, cache=tmp_path / "cache")
        assert out.returncode == 2 and out.stderr.startswith("python -m hydrostatic.plot: error: ")
        assert message in out.stderr and out.stderr.count("\n") == 1, out.stderr
