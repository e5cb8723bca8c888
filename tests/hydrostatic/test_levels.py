"""A choice of vertical levels (`hydrostatic.levels`, config vertical.levels, nVertLevels, top_pa):
WRF's hybrid coordinate generated for 10, 26 and 50 layers runs a JW06 wave stably at level 3
(run_model.py in a subprocess); its coefficients are monotone for any count and top; bad counts
and tops are one line naming the key; the default (the JW06 set) is unchanged and leaves the
restart fingerprint as it was, so restarts written before the choice existed still resume."""
import numpy as np
import pytest

from hydrostatic import levels
from hydrostatic.config import HydrostaticConfig
from tests.hydrostatic.test_run import config, history
from tests.swm.test_faults import ok, refused, run_model

LEVEL3 = {"mesh": {"generate": {"level": 3, "lloyd": 20}}, "time": {"days": 0.125, "dt": 1800},
          "diffusion": {"visc4": 1.0e16},
          "output": {"interval_hours": 1.5, "variables": ["theta", "surface_pressure", "u"]}}


@pytest.mark.parametrize("count, top_pa", [(10, None), (26, 1000.0), (50, 219.4)])
def test_generated_levels_run_a_jw06_wave_stably(tmp_path, count, top_pa):
    """6 steps of 1800 s at level 3 (3 records): the history holds the generated hyai, hybi and
    `count` layers; the state stays finite and physical (theta, p_s near 1000 hPa, winds below
    100 m/s)."""
    vertical = {"levels": "wrf_hybrid", "nVertLevels": count}
    if top_pa is not None:
        vertical["top_pa"] = top_pa
    ok(run_model(config(tmp_path, "h", vertical=vertical, **LEVEL3)))
    out = history(tmp_path / "h.nc")
    A, B = levels.coefficients("wrf_hybrid", count, top_pa)
    assert np.array_equal(out["hyai"], A) and np.array_equal(out["hybi"], B)
    assert out["theta"].shape == (3, 642, count) and out["u"].shape[2] == count
    assert np.isfinite(out["theta"]).all() and 150 < out["theta"].min()
    assert np.all(np.abs(out["surface_pressure"] - 1.0e5) < 5.0e3)
    assert np.abs(out["u"]).max() < 100.0


@pytest.mark.parametrize("count", [2, 3, 10, 26, 50, 137])
@pytest.mark.parametrize("top_pa", [1.0, levels.JW06_TOP, 1.0e3, 5.0e4, 9.9e4])
def test_generated_coefficients_are_monotone(count, top_pa):
    """B falls from 1 at the surface to 0 (and stays 0 up to eta_c), A = 0 at the surface and
    p_top at the top, and the interface pressures fall strictly upward for any p_s up to 1100 hPa
    above p0 - (p0 - p_top) / 1.7 (module doc: B' is at most 1.68; 415 hPa for JW06's top)."""
    A, B = levels.coefficients("wrf_hybrid", count, top_pa)
    assert A.shape == B.shape == (count + 1,)
    assert (B[0], B[-1], A[0], A[-1]) == (1.0, 0.0, 0.0, top_pa)
    assert np.all(np.diff(B) <= 0) and np.all(A >= 0)
    for ps in np.linspace(levels.P0 - (levels.P0 - top_pa) / 1.7, 1.1e5, 27):
        assert np.all(np.diff(levels.interface_pressure(A, B, np.array([ps]))[0]) < 0), ps


def test_wrf_b_is_the_documented_cubic():
    """B(eta_c) = B'(eta_c) = 0 and B(1) = B'(1) = 1 (Skamarock et al. 2019, section 2.1)."""
    h = 1e-6
    b = lambda eta: float(levels.wrf_b(np.array([eta]))[0])  # noqa: E731
    for eta, value, slope in ((levels.ETA_C, 0.0, 0.0), (1.0, 1.0, 1.0)):
        assert abs(b(eta) - value) < 1e-12
        assert abs((b(eta + h) - b(eta - h)) / (2 * h) - slope) < 1e-6 + (eta == levels.ETA_C)


@pytest.mark.parametrize("vertical, words", [
    ({"levels": "wrf_hybrid", "nVertLevels": 1}, ["vertical.nVertLevels", "1", "2"]),
    ({"levels": "wrf_hybrid", "nVertLevels": 10, "top_pa": 0}, ["vertical.top_pa", "0"]),
    ({"levels": "wrf_hybrid", "nVertLevels": 10, "top_pa": -5.0}, ["vertical.top_pa", "-5"]),
    ({"levels": "wrf_hybrid", "nVertLevels": 10, "top_pa": 1.0e5}, ["vertical.top_pa", "100000"]),
    ({"levels": "wrf_hybrid", "nVertLevels": 10, "top_pa": 2.0e5}, ["vertical.top_pa", "200000"]),
    ({"levels": "jw06_26", "nVertLevels": 10}, ["vertical.nVertLevels = 10", "jw06_26 has 26",
                                                 "wrf_hybrid"]),
    ({"top_pa": 500.0}, ["vertical.top_pa = 500.0", "jw06_26 has its own top", "unset"]),
    ({"levels": "sigma"}, ["vertical.levels", "sigma", "wrf_hybrid"]),
])
def test_bad_levels_are_refused_naming_the_key(tmp_path, vertical, words):
    out = run_model(config(tmp_path, "bad", vertical=vertical))
    refused(out, 2, *words)
    assert not (tmp_path / "bad.nc").exists()


def tree(**vertical) -> dict:
    return {"model": "hydrostatic", "mesh": {"generate": {"level": 2}},
            "case": {"name": "jw06_baroclinic"}, "time": {"days": 1, "dt": 1800},
            **({"vertical": vertical} if vertical else {})}


def test_the_default_is_the_jw06_set_and_leaves_the_fingerprint_as_it_was():
    """The default config's coefficients are the JW06 table bitwise, and its trajectory settings
    hold vertical.levels alone (as before the choice existed: its restarts resume); a generated
    scheme's count and top are in them."""
    from grids import generate_icosahedral
    from hydrostatic.output import fingerprint

    default = HydrostaticConfig.model_validate(tree())
    A, B = default.vertical.coefficients()
    assert np.array_equal(A, np.array(levels.HYAI_26[::-1]) * 1.0e5)
    assert np.array_equal(B, np.array(levels.HYBI_26[::-1]))
    mesh = generate_icosahedral(1)
    settings = fingerprint(default, mesh, 1800.0)["settings"]
    assert [k for k in settings if k.startswith("vertical")] == ["vertical.levels"]
    generated = HydrostaticConfig.model_validate(tree(levels="wrf_hybrid", nVertLevels=30))
    settings = fingerprint(generated, mesh, 1800.0)["settings"]
    assert (settings["vertical.levels"], settings["vertical.nVertLevels"],
            settings["vertical.top_pa"]) == ("wrf_hybrid", 30, None)
