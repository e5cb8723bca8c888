"""Figures of the test cases to compare with published solutions, from history files written by
run_model.py: Williamson case 5 (the range of h and h + b each day, a map of h + b), case 6 (h;
the wavenumber-4 pattern's amplitude, eastward drift and the amplitude at other wavenumbers), the
Galewsky jet without its perturbation (departure from the initial state and its largest zonal
wavenumber, each record) and with it (relative vorticity). Prints Markdown tables and writes a PNG
map of the record at --day (default: the last).

    python benchmarks/published_cases.py case5 w5.nc [--images docs/images --name williamson5_l6]
    python benchmarks/published_cases.py case6 w6.nc
    python benchmarks/published_cases.py steady-jet galewsky_unperturbed.nc
    python benchmarks/published_cases.py jet galewsky.nc
    python benchmarks/published_cases.py difference coarse.nc fine.nc --day 15

`difference` interpolates h of the finer run linearly to the coarser run's cell centres and prints
the normalised l1, l2 and linf norms of the coarse run's difference from it at --day (Williamson
et al. 1992, eq. 82-84): the coarse run's error, if the finer one were exact.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

from swm import analysis, testcases
from framework.constants import DAY

NH_BAND, SH_BAND = (np.radians(20.0), np.radians(50.0)), (np.radians(-50.0), np.radians(-20.0))
JET_BAND = (np.radians(20.0), np.radians(70.0))


def load(path):
    """The history file's mesh and fields as NumPy arrays (level 0), with its record times (days);
    a history that references its grid file is read with it
    (`framework.mesh_files.open_history`)."""
    from framework.mesh_files import open_history

    with open_history(path, decode_times=False) as ds:
        out = {name: ds[name].values for name in ("latCell", "lonCell", "areaCell", "dcEdge", "dvEdge")}
        for name in ("h", "u", "vorticity"):
            if name in ds.variables:
                out[name] = ds[name].values[:, :, 0]
        out["h_s"] = ds["h_s"].values if "h_s" in ds.variables else np.zeros(out["areaCell"].size)
        stamps = [bytes(row).decode().strip() for row in ds["xtime"].values]
    out["days"] = np.array([_days(s) for s in stamps])
    return out


def _days(stamp: str) -> float:
    """Days since the start of an xtime stamp written by framework.dates.xtime."""
    date, clock = stamp.split("_")
    day = int(date.split("-")[-1]) - 1
    hours, minutes, seconds = (int(x) for x in clock.split(":"))
    return day + (hours * 3600 + minutes * 60 + seconds) / DAY


def _map(ax, d, values, *, cmap, clim=None, contours=None, lat_range=(-90, 90)):
    """Cell polygons coloured by `values` (cell field) on `ax`, optional contour lines."""
    from matplotlib.collections import PolyCollection
    import matplotlib.tri as mtri

    polygons, owners = _polygons(d)
    collection = PolyCollection(polygons, array=values[owners], cmap=cmap, edgecolors="face",
                                linewidths=0.3, antialiaseds=False)
    if clim is not None:
        collection.set_clim(*clim)
    ax.add_collection(collection)
    if contours is not None:
        lon = np.degrees(np.angle(np.exp(1j * d["lonCell"])))
        tri = mtri.Triangulation(lon, np.degrees(d["latCell"]))
        # drop the triangles that span the +-180 seam
        xs = lon[tri.triangles]
        tri.set_mask(xs.max(axis=1) - xs.min(axis=1) > 180.0)
        ax.tricontour(tri, values, levels=contours, colors="k", linewidths=0.5)
    ax.set(xlim=(-180, 180), ylim=lat_range, xlabel="longitude (deg)", ylabel="latitude (deg)")
    ax.set_aspect("equal")
    return collection


_POLYGONS = {}


def _polygons(d):
    """Cell polygons of the history file (framework.plot.cell_polygons), once per file."""
    if d["path"] not in _POLYGONS:
        from framework.mesh_files import open_history
        from framework.plot import cell_polygons

        with open_history(d["path"], decode_times=False) as ds:
            _POLYGONS[d["path"]] = cell_polygons(ds)
    return _POLYGONS[d["path"]]


def _record(d, day):
    """Index of the record at `day` (the last record when day is None)."""
    if day is None:
        return len(d["days"]) - 1
    r = int(np.argmin(np.abs(d["days"] - day)))
    if abs(d["days"][r] - day) > 1e-6:
        raise ValueError(f"--day {day}: no record at that day in {d['path']} (records: {d['days'].tolist()})")
    return r


def _save(fig, images, name):
    images = pathlib.Path(images)
    images.mkdir(parents=True, exist_ok=True)
    target = images / f"{name}.png"
    fig.savefig(target, bbox_inches="tight")
    print(f"wrote {target}")


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["axes.titlesize"] = 9

    return plt.subplots(figsize=(10, 5), dpi=100)


def case5(d, args):
    record = _record(d, args.day)
    surface = d["h"][record] + d["h_s"]
    print("| day | h min | h max | h + b min | h + b max |\n|---|---|---|---|---|")
    for r in range(len(d["days"])):
        s = d["h"][r] + d["h_s"]
        print(f"| {d['days'][r]:g} | {d['h'][r].min():.1f} | {d['h'][r].max():.1f} | {s.min():.1f} | {s.max():.1f} |")
    fig, ax = _figure()
    levels = np.arange(np.floor(surface.min() / 100) * 100, surface.max() + 100, 100.0)
    c = _map(ax, d, surface, cmap="viridis", contours=levels)
    fig.colorbar(c, ax=ax, shrink=0.7, label="surface height h + b (m)")
    ax.set_title(f"Williamson case 5, day {d['days'][record]:g}: h + b from {surface.min():.0f} to "
                 f"{surface.max():.0f} m ({len(d['latCell'])} cells; contours every 100 m)")
    _save(fig, args.images, args.name or "williamson5")


def case6(d, args):
    nu = testcases.williamson6_angular_velocity()
    days = d["days"]
    amplitudes = {band: np.array([analysis.zonal_amplitudes(d["latCell"], d["lonCell"], d["areaCell"],
                                                            d["h"][r], band, np.arange(1, 13))
                                  for r in range(len(days))]) for band in (NH_BAND, SH_BAND)}
    crest = np.array([analysis.pattern_longitude(a[3], 4) for a in amplitudes[NH_BAND]])
    drift = analysis.unwrap_drift(crest, 4)
    print("| day | h min | h max | |A4| NH (m) | |A4| SH (m) | other m / |A4| NH | largest other m | "
          "drift (deg) | nondivergent drift (deg) |\n|---|---|---|---|---|---|---|---|---|")
    others = [m - 1 for m in range(1, 13) if m % 4]
    for r in range(len(days)):
        a = amplitudes[NH_BAND][r]
        ratio = np.sqrt(np.sum(np.abs(a[others]) ** 2)) / abs(a[3])
        worst = 1 + others[int(np.argmax(np.abs(a[others])))]
        print(f"| {days[r]:g} | {d['h'][r].min():.1f} | {d['h'][r].max():.1f} | {abs(a[3]):.1f} | "
              f"{abs(amplitudes[SH_BAND][r][3]):.1f} | {ratio:.3f} | {worst} | {np.degrees(drift[r]):.1f} | "
              f"{np.degrees(nu * days[r] * DAY):.1f} |")
    speed = np.polyfit(days * DAY, drift, 1)[0]
    print(f"mean drift {np.degrees(speed * DAY):.2f} deg/day; nondivergent nu = {np.degrees(nu * DAY):.2f} deg/day")
    fig, ax = _figure()
    record = _record(d, args.day)
    h = d["h"][record]
    c = _map(ax, d, h, cmap="viridis", contours=np.arange(np.floor(h.min() / 200) * 200, h.max() + 200, 200.0))
    fig.colorbar(c, ax=ax, shrink=0.7, label="thickness h (m)")
    ax.set_title(f"Williamson case 6, day {days[record]:g}: h from {h.min():.0f} to {h.max():.0f} m "
                 f"({len(d['latCell'])} cells; contours every 200 m)")
    _save(fig, args.images, args.name or "williamson6")


def steady_jet(d, args):
    days = d["days"]
    weight_u = d["dcEdge"] * d["dvEdge"]
    print("| day | max abs(h - h0) (m) | rel. l2 h | max abs(u - u0) (m/s) | rel. l2 u | "
          "largest zonal wavenumber of h - h0, 20-70N (amplitude m) |\n|---|---|---|---|---|---|")
    for r in range(len(days)):
        dh = analysis.departure(d["h"][r], d["h"][0], d["areaCell"])
        du = analysis.departure(d["u"][r], d["u"][0], weight_u)
        a = np.abs(analysis.zonal_amplitudes(d["latCell"], d["lonCell"], d["areaCell"],
                                             d["h"][r] - d["h"][0], JET_BAND, np.arange(1, 11)))
        print(f"| {days[r]:g} | {dh['max_abs']:.3g} | {dh['rel_l2']:.2e} | {du['max_abs']:.3g} | "
              f"{du['rel_l2']:.2e} | {1 + int(np.argmax(a))} ({a.max():.2g}) |")
    fig, ax = _figure()
    record = _record(d, args.day)
    dh = d["h"][record] - d["h"][0]
    limit = float(np.abs(dh).max()) or 1.0
    c = _map(ax, d, dh, cmap="RdBu_r", clim=(-limit, limit), lat_range=(-10, 90))
    fig.colorbar(c, ax=ax, shrink=0.7, label="h - h(day 0) (m)")
    ax.set_title(f"Galewsky jet without perturbation, day {days[record]:g}: h - h0 ({len(d['latCell'])} cells)")
    _save(fig, args.images, args.name or "galewsky_unperturbed")


def jet(d, args):
    from swm.plot import cell_vorticity

    days = d["days"]
    print("| day | vorticity min (1/s) | vorticity max (1/s) | h min | h max |\n|---|---|---|---|---|")
    for r in range(len(days)):
        v = d["vorticity"][r]
        print(f"| {days[r]:g} | {v.min():.3e} | {v.max():.3e} | {d['h'][r].min():.1f} | {d['h'][r].max():.1f} |")
    from framework.mesh_files import open_history

    with open_history(d["path"], decode_times=False) as ds:
        record = _record(d, args.day)
        zeta = cell_vorticity(ds, d["vorticity"][record])
    fig, ax = _figure()
    limit = float(np.abs(zeta).max())
    c = _map(ax, d, zeta, cmap="RdBu_r", clim=(-limit, limit), lat_range=(0, 90),
             contours=[x for x in np.arange(-2e-4, 2.01e-4, 2e-5) if abs(x) > 1e-12])
    fig.colorbar(c, ax=ax, shrink=0.5, pad=0.02, label="relative vorticity (1/s)")
    ax.set_title(f"Galewsky jet, day {days[record]:g}: relative vorticity ({len(d['latCell'])} cells; "
                 "contours every 2e-5 1/s, zero omitted)")
    _save(fig, args.images, args.name or "galewsky_vorticity")


def difference(coarse, fine, day):
    """Normalised l1, l2, linf of h (coarse) - h (fine, interpolated to the coarse cells) at `day`."""
    from framework.mesh_files import history_mesh

    fine_mesh = history_mesh(fine["path"])
    rc, rf = (int(np.argmin(np.abs(d["days"] - day))) for d in (coarse, fine))
    if abs(coarse["days"][rc] - day) > 1e-6 or abs(fine["days"][rf] - day) > 1e-6:
        raise ValueError(f"--day {day}: both files need a record at that day "
                         f"(have {coarse['days'].tolist()} and {fine['days'].tolist()})")
    lat, lon = coarse["latCell"], coarse["lonCell"]
    points = np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    exact = analysis.interp_c2points(fine_mesh, fine["h"][rf], points)
    err = coarse["h"][rc] - exact
    w = coarse["areaCell"]
    return {"l1": float(np.sum(w * np.abs(err)) / np.sum(w * np.abs(exact))),
            "l2": float(np.sqrt(np.sum(w * err ** 2) / np.sum(w * exact ** 2))),
            "linf": float(np.abs(err).max() / np.abs(exact).max())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("case", choices=["case5", "case6", "steady-jet", "jet", "difference"])
    p.add_argument("file", help="history file written by run_model.py")
    p.add_argument("fine", nargs="?", help="difference: the finer run's history file")
    p.add_argument("--day", type=float, help="the record's day (maps: default the last record)")
    p.add_argument("--images", default="docs/images", help="directory of the PNG maps")
    p.add_argument("--name", help="PNG file name without .png (default: from the case)")
    args = p.parse_args(argv)
    if not pathlib.Path(args.file).is_file():
        print(f"{args.file}: no such file", file=sys.stderr)
        return 2
    try:
        return _run(args, p)
    except ValueError as exc:
        print(f"published_cases.py: error: {exc}", file=sys.stderr)
        return 2


def _run(args, p) -> int:
    d = load(args.file)
    d["path"] = args.file
    if args.case == "difference":
        if args.fine is None or args.day is None:
            p.error("difference needs the finer run's file and --day")
        fine = load(args.fine)
        fine["path"] = args.fine
        norms = difference(d, fine, args.day)
        print(f"day {args.day:g}: {len(d['latCell'])} vs {len(fine['latCell'])} cells: "
              + ", ".join(f"{k} {v:.3e}" for k, v in norms.items()))
        return 0
    {"case5": case5, "case6": case6, "steady-jet": steady_jet, "jet": jet}[args.case](d, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
