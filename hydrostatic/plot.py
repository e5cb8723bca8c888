"""PNG maps of a hydrostatic history (as JW06's figures): surface pressure (hPa) and 850 hPa
temperature (K) at a chosen day, on the cells' polygons (`swm.plot.draw_map`).

    python -m hydrostatic.plot jw06_baroclinic_l5.nc [--day 9] [--out DIR] [--grid GRID]
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

from swm.output import OutputError, open_history
from swm.plot import PlotError, draw_map, map_geometry

#: name -> (scale, label, colour map) of the maps drawn where the history holds the field.
MAPS = {"surface_pressure": (0.01, "surface pressure (hPa)", "viridis"),
        "temperature_850hPa": (1.0, "850 hPa temperature (K)", "inferno")}


def plot_file(path, day: float | None = None, out_dir=None, grid=None) -> list[pathlib.Path]:
    """Write the maps of MAPS at the record nearest `day` (None: the last) of history `path`;
    returns their paths. PlotError names a missing output directory, a day outside the file,
    or a file without the fields."""
    path = pathlib.Path(path)
    out_dir = pathlib.Path(out_dir) if out_dir is not None else path.parent
    if not out_dir.is_dir():
        raise PlotError(f"--out {out_dir}: no such directory")
    try:
        ds = open_history(path, grid, decode_times=False)
    except OutputError as exc:
        raise PlotError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise PlotError(f"{path}: not a readable netCDF file ({exc})") from None
    written = []
    with ds:
        names = [name for name in MAPS if name in ds.variables]
        if "Time" not in ds.variables or not names:
            raise PlotError(f"{path}: no Time or none of {', '.join(MAPS)}; expected a history "
                            "of the hydrostatic core (output.variables)")
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
    p = argparse.ArgumentParser(prog="python -m hydrostatic.plot", description=__doc__.splitlines()[0])
    p.add_argument("file", help="a history file of the hydrostatic core")
    p.add_argument("--day", type=float, help="the day to draw (default: the last record)")
    p.add_argument("--out", help="directory of the PNG files (default: beside the history file)")
    p.add_argument("--grid", help="the MPAS grid file of a history that references one")
    args = p.parse_args(argv)
    if not pathlib.Path(args.file).is_file():
        print(f"python -m hydrostatic.plot: error: {args.file}: no such file", file=sys.stderr)
        return 2
    try:
        written = plot_file(args.file, args.day, args.out, args.grid)
    except PlotError as exc:
        print(f"python -m hydrostatic.plot: error: {exc}", file=sys.stderr)
        return 2
    for target in written:
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
