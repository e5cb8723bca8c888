"""The shallow-water model's files: its history (`History`: `framework.history.History` with the
bottom topography h_s(nCells), written once as MPAS's shallow-water core does, and per output
time the fields of `swm.variables.FIELDS` (Time, nCells|nEdges|nVertices, nVertLevels) and the
diagnostics' time series) and the namelist options of its files (`mpas_namelist`). The restart
file is `framework.restart.write_restart`'s with the state (h, u) of `swm.callbacks.STATE`.
"""
from __future__ import annotations

import numpy as np

from framework import history
from framework.dates import MPAS_CALENDAR, start_of
from meshops.device.tables import SIZE_OF
from swm.variables import DIAGNOSTICS, FIELDS

#: The shallow-water core's `core_name` in its files (MPAS's).
CORE_NAME = "sw"
#: Attributes of the history's bottom topography h_s(nCells) (MPAS's name), written once.
TOPOGRAPHY = {"units": "m", "long_name": "bottom topography (height of the surface below the fluid)"}

#: MPAS shallow-water core's config_test_case of the cases it has.
MPAS_TEST_CASES = {"williamson2": 2, "williamson5": 5, "williamson6": 6}


def mpas_namelist(config, dt: float, n_steps: int) -> dict:
    """The sw core's namelist options that MPAS writes as ``config_*`` global attributes of its
    output (Registry names), as this run sets them: time integration, dt, calendar, start time,
    run duration ("D_hh:mm:ss"), and config_test_case for the Williamson cases."""
    seconds = round(dt * n_steps)
    days, rest = divmod(seconds, 86400)
    out = {"config_time_integration": "RK4", "config_dt": float(dt),
           "config_calendar_type": MPAS_CALENDAR, "config_start_time": start_of(config),
           "config_stop_time": "none",
           "config_run_duration": f"{days}_{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"}
    if config.case.name in MPAS_TEST_CASES:
        out["config_test_case"] = MPAS_TEST_CASES[config.case.name]
    return out


class History(history.History):
    """The shallow-water history on rank 0 (`framework.history.History`: grows under NAME.partial
    on the writer thread, continued by a resumed run): a new one holds the topography h_s and a
    variable per output field and per diagnostic."""

    core_name = CORE_NAME

    def _contents(self, ds, dtype, nlev, topography) -> None:
        """The model's part of a new history `ds` (its mesh part, Time and nVertLevels made): the
        topography h_s, a variable per output field and per diagnostic."""
        h_s = ds.createVariable("h_s", np.dtype(dtype), ("nCells",))
        h_s.setncatts(TOPOGRAPHY)
        h_s[:] = 0.0 if topography is None else np.asarray(topography).reshape(-1)
        for name in self.variables:
            field = FIELDS[name]
            var = ds.createVariable(name, np.dtype(dtype), ("Time", SIZE_OF[field.location],
                                                            "nVertLevels"))
            var.setncatts(field.attributes())
        for name in self.diagnostics:
            ds.createVariable(name, np.float64, ("Time",)).setncatts(DIAGNOSTICS[name].attributes())
