"""Zonal and time means of a hydrostatic history, as Held and Suarez (1994) draw a climate: layer
fields meaned over latitude bands, weighted by areaCell, and over the records from a day on,

    xbar[j, k] = sum_t sum_{i in band j} areaCell[i] x[t, i, k] / (n_t sum_{i in band j} areaCell[i])

for the bands j of equal width in latitude from 90 S to 90 N (at least 1.5 mesh spacings wide, so
that every band holds cells). The layers' pressure is meaned the same way: a section is drawn at
each band's mean layer pressure.
"""
from __future__ import annotations

import numpy as np

#: The history's variables a zonal-mean section needs (output.variables).
NEEDED = ("pressure", "temperature", "uReconstructZonal")


class ZonalMeanError(ValueError):
    """A history that cannot give the means (a missing variable, no record from the day asked)."""


def band_edges(area_cell, radius: float) -> np.ndarray:
    """The latitudes (degrees) of the band edges: equal bands from -90 to 90, each at least 1.5
    mesh spacings (sqrt of the mean cell area) wide."""
    spacing = np.degrees(np.sqrt(float(np.mean(area_cell))) / radius)
    return np.linspace(-90.0, 90.0, max(2, int(180.0 / (1.5 * spacing))) + 1)


def zonal_means(ds, names=NEEDED, from_day: float | None = None) -> dict:
    """{"latitude": band centres (deg), "days": the records meaned, name: xbar (bands, layers) for
    each of `names`} of history `ds` (an xarray Dataset with Time in days, latCell, areaCell),
    over the records at or after `from_day` (None: every record)."""
    missing = [name for name in names if name not in ds.variables]
    if missing:
        raise ZonalMeanError(f"no {', '.join(missing)}: expected a history with "
                             f"output.variables including {', '.join(names)}")
    days = np.asarray(ds["Time"].values, dtype=np.float64)
    records = np.flatnonzero(days >= (from_day if from_day is not None else -np.inf) - 1e-9)
    if records.size == 0:
        raise ZonalMeanError(f"--from-day {from_day:g}: the last record is at day {days[-1]:g}; "
                             "expected a day within the history")
    lat = np.degrees(ds["latCell"].values)
    area = ds["areaCell"].values
    edges = band_edges(area, float(ds.attrs.get("sphere_radius", 6371229.0)))
    band = np.clip(np.searchsorted(edges, lat, side="right") - 1, 0, edges.size - 2)
    weight = np.bincount(band, area, edges.size - 1)
    out = {"latitude": 0.5 * (edges[:-1] + edges[1:]), "days": days[records]}
    for name in names:
        total = 0.0
        for t in records:
            x = ds[name][t].values                                          # cells x layers
            total = total + np.stack([np.bincount(band, area * x[:, k], edges.size - 1)
                                      for k in range(x.shape[1])], axis=1)
        out[name] = total / (records.size * weight[:, None])
    return out
