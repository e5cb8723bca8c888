"""The pressure-level fields of the hydrostatic history by MPAS-Atmosphere's names (uzonal_850hPa,
umeridional_500hPa, temperature_250hPa, height_500hPa, ...): a real run on a level-2 mesh, in a
frame tilted by a fresh random angle, writes them with units and long names, and each equals the
direct interpolation, linear in log p, of its column in the same history (NumPy's np.interp, not
the operator the model uses)."""
import netCDF4
import numpy as np

from hydrostatic.variables import ISOBARIC, ISOBARIC_LEVELS_HPA
from tests.hydrostatic.test_run import config
from tests.swm.test_faults import ok, run_model

#: The layer field each pressure-level quantity is interpolated from, as read from the history.
LAYERS = {"uzonal": lambda ds: ds["uReconstructZonal"][-1],
          "umeridional": lambda ds: ds["uReconstructMeridional"][-1],
          "temperature": lambda ds: ds["temperature"][-1],
          "height": lambda ds: 0.5 * (ds["zgrid"][-1][:, :-1] + ds["zgrid"][-1][:, 1:])}


def column_interpolation(p, x, p_level):
    """x at p_level in every column, linear in log p, the end layer's value beyond the column."""
    return np.array([np.interp(np.log(p_level), np.log(pc[::-1]), xc[::-1])
                     for pc, xc in zip(p, x)])


def test_pressure_level_fields_equal_column_interpolation(tmp_path):
    rotation = float(np.random.default_rng().uniform(5.0, 85.0))
    names = sorted(ISOBARIC)
    variables = ["pressure", "temperature", "uReconstructZonal", "uReconstructMeridional",
                 "zgrid", *names]
    ok(run_model(config(tmp_path, "iso", case={"rotation": rotation},
                        output={"variables": variables})))
    assert {"uzonal_850hPa", "umeridional_500hPa", "temperature_250hPa", "height_500hPa"} <= set(names)
    with netCDF4.Dataset(tmp_path / "iso.nc") as ds:
        ds.set_auto_mask(False)
        p = ds["pressure"][-1]
        for name in names:
            quantity, p_level = ISOBARIC[name]
            var = ds[name]
            assert var.dimensions == ("Time", "nCells"), name
            assert var.units == {"uzonal": "m s-1", "umeridional": "m s-1", "temperature": "K",
                                 "height": "m"}[quantity]
            assert f"{p_level / 100:g} hPa" in var.long_name and "log p" in var.long_name
            expected = column_interpolation(p, LAYERS[quantity](ds), p_level)
            np.testing.assert_allclose(var[-1], expected, rtol=1e-12, atol=1e-9, err_msg=name)
            assert np.ptp(var[-1]) > 0, name          # a field, not a constant
        # the levels are where the atmosphere says: higher up, colder (on average: JW06's poles
        # have an inversion), and higher: 500 hPa at 4-6.5 km
        t = [ds[f"temperature_{level}hPa"][-1].mean() for level in ISOBARIC_LEVELS_HPA]
        z = [ds[f"height_{level}hPa"][-1] for level in ISOBARIC_LEVELS_HPA]
        assert t[0] > t[1] > t[2] and np.all(z[0] < z[1]) and np.all(z[1] < z[2])
        assert 4000 < z[1].min() and z[1].max() < 6500
