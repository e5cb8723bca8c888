"""PNG maps of a hydrostatic history (as JW06's figures): surface pressure (hPa) and 850 hPa
temperature (K) at a chosen day, on the cells' polygons (`swm.plot`: the file opened, the maps
drawn and the command line as the shallow-water model's).

    python -m hydrostatic.plot jw06_baroclinic_l5.nc [--day 9] [--out DIR] [--grid GRID]
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

from swm.plot import PlotError, command, draw_map, map_geometry, open_map_file

#: name -> (scale, label, colour map) of the maps drawn where the history holds the field.
MAPS = {"surface_pressure": (0.01, "surface pressure (hPa)", "viridis"),
        "temperature_850hPa": (1.0, "850 hPa temperature (K)", "inferno")}


def plot_file(path, day: float | None = None, out_dir=None, grid=None) -> list[pathlib.Path]:
    """Write the maps of MAPS at the record nearest `day` (None: the last) of history `path`;
    returns their paths. PlotError names a missing output directory, a day outside the file,
    or a file without the fields."""
    path = pathlib.Path(path)
    expected = "expected a history of the hydrostatic core (output.variables)"
    ds, out_dir = open_map_file(path, grid, out_dir, expected)
    written = []
    with ds:
        names = [name for name in MAPS if name in ds.variables]
        if "Time" not in ds.variables or not names:
            raise PlotError(f"{path}: no Time or none of {', '.join(MAPS)}; {expected}")
        days = np.asarray(ds["Time"].values, dtype=np.float64)
        record = days.size - 1 if day is None else int(np.argmin(np.abs(days - day)))
        if day is not None and abs(days[record] - day) > 1e-6:
            raise PlotError(f"--day {day}: {path} has records at days "
                            f"{', '.join(f'{d:g}' for d in days)}; expected one of them")
        geometry = map_geometry(ds)
        for name in names:
            scale, label, cmap = MAPS[name]
            target = out_dir / f"{path.stem}.{name}.day{days[record]:g}.png"
            draw_map(geometry, ds[name][record].values * scale, cmap,
                     f"{path.name}: {label}, day {days[record]:g}", target)
            written.append(target)
    return written


def main(argv=None) -> int:
    def options(p):
        p.add_argument("--day", type=float, help="the day to draw (default: the last record)")
    return command("python -m hydrostatic.plot", __doc__.splitlines()[0],
                   "a history file of the hydrostatic core", options,
                   lambda args: plot_file(args.file, args.day, args.out, args.grid), argv)


if __name__ == "__main__":
    sys.exit(main())
