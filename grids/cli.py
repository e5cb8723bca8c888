"""`python -m grids`: generate, check and reorder MPAS mesh files.

    python -m grids generate --level 6 --lloyd 200 -o x1.40962.grid.nc [--radius R]
                             [--format NETCDF4] [--compress yes] [--order morton]
                             [--progress]
    python -m grids check FILE [--radius R] [--recompute-geometry]
    python -m grids reorder IN OUT [--method morton] [--format F]
    python -m grids --version

`generate` refuses a level whose generation needs more memory than the machine has available
(`grids.memory`), before any work, with one line naming --level, the memory needed and available.
`check` exits with status 0 when the mesh is valid and 1 when it is not, with one line on stderr
naming the file, field, first bad index, value and what was expected; 2 for bad arguments. Output
paths are checked before any work. A unit-sphere file is shown on the Earth's radius (lengths in km,
labelled). `reorder` records where each entity
came from in indexToCellID / indexToEdgeID / indexToVertexID (see `reorder_keeping_ids`). Every
written file's `history` attribute gets a line with the command line. `--version` prints the
installed meshops version ("unknown" when the distribution is not installed).
"""
from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time

from .mesh import EARTH_RADIUS
from .mpas_io import FORMATS, read_mesh, reorder_keeping_ids, write_mesh
from . import __version__
from .validate import MeshError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m grids", description="MPAS mesh files: generate, "
                                "check, reorder. Errors go to stderr; the exit status is 0 on "
                                "success, 1 for a bad mesh file, 2 for bad arguments or an "
                                "unwritable output.")
    p.add_argument("--version", action="version", version=f"meshops {__version__}",
                   help="print the meshops version and exit")
    sub = p.add_subparsers(dest="command", required=True)
    fmt_help = f"netCDF format of the output file (default %(default)s; one of {', '.join(FORMATS)})"
    g = sub.add_parser("generate", help="icosahedral Voronoi mesh (10 * 4**level + 2 cells)")
    g.add_argument("--level", type=int, required=True, help="bisection level (2 -> 162 cells)")
    g.add_argument("--lloyd", type=int, default=0, help="Lloyd iterations (default 0)")
    g.add_argument("-o", "--output", required=True,
                   help="output MPAS mesh file (its directory must exist; written atomically)")
    g.add_argument("--radius", type=float, default=EARTH_RADIUS,
                   help=f"sphere radius in m (default {EARTH_RADIUS})")
    g.add_argument("--format", default="NETCDF4", choices=FORMATS, metavar="FORMAT",
                   help=fmt_help + "; NETCDF4 writes 3x faster than the classic formats, has no "
                   "4 GiB per-variable limit and allows --compress")
    g.add_argument("--order", default="morton", help="cell order: morton, hilbert or none "
                   "(default %(default)s)")
    g.add_argument("--progress", action="store_true", help="print each stage's wall time")
    g.add_argument("--compress", default="yes", choices=["yes", "no", "connectivity"],
                   help="netCDF-4 formats: zlib level 1 for the counts, signs and ids (yes, the "
                   "default), for none (no), or for the index fields too (connectivity: a third "
                   "smaller, slower to load)")
    c = sub.add_parser("check", help="sizes, spacing, quality and validity of a mesh file",
                       description="Read an MPAS mesh file and check it: complete (not truncated), "
                       "no fill values, MPAS dimensions and shapes, 1-based indices in range, "
                       "topology, counter-clockwise order, normal/tangent and sign conventions, "
                       "positions on the sphere, and the stored dcEdge, dvEdge, areas, angleEdge, "
                       "weightsOnEdge and Coriolis parameters against those derived from the "
                       "positions and connectivity. Exit status 0 when valid, 1 with one line on "
                       "stderr when not.")
    c.add_argument("file", help="MPAS mesh file (netCDF) to check")
    c.add_argument("--radius", type=float, default=None,
                   help="scale to this sphere radius in m (default: the file's)")
    c.add_argument("--recompute-geometry", action="store_true",
                   help="derive dcEdge, dvEdge, areas, angles and weights from the positions and "
                   "connectivity instead of checking the file's values against them")
    r = sub.add_parser("reorder", help="renumber cells, edges and vertices along a curve")
    r.add_argument("input", help="MPAS mesh file (netCDF) to read")
    r.add_argument("output", help="MPAS mesh file to write (its directory must exist; written "
                   "atomically)")
    r.add_argument("--method", default="morton", help="morton or hilbert (default morton)")
    r.add_argument("--format", default="NETCDF3_64BIT_OFFSET", choices=FORMATS, metavar="FORMAT",
                   help=fmt_help)
    return p


def _error(command: str, text) -> None:
    print(f"{command}: {text}", file=sys.stderr)


def _output_problem(path: str) -> str | None:
    """Why `path` cannot be written as an output file (None when it can), checked before the work."""
    if not path:
        return "empty output path"
    if os.path.isdir(path):
        return f"{path}: is a directory; expected a file name"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"{path}: directory {directory} does not exist"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{path}: directory {directory} is not writable"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return f"{path}: file exists and is not writable"
    return None


#: --compress choices -> write_icosahedral's `compress`.
COMPRESS_CHOICES = {"yes": True, "no": False, "connectivity": "connectivity"}

#: The command line of this run, recorded in the history of each written file (set by `main`).
_COMMAND_LINE: list = []


def _write(mesh, path: str, fmt: str, command: str) -> bool:
    what = "python -m grids " + shlex.join(_COMMAND_LINE) if _COMMAND_LINE else f"python -m grids {command}"
    try:
        write_mesh(mesh, path, format=fmt, history=what)
    except OSError as exc:
        _error(command, f"cannot write {path}: {exc.strerror or exc}")
        return False
    return True


def _display_scale(mesh, radius_arg) -> tuple[float, str]:
    """(factor from the mesh's metres to displayed metres, note): a unit-sphere file read without
    --radius is shown on the Earth's radius, every length and area alike."""
    if radius_arg is None and mesh.sphere_radius == 1.0:
        return EARTH_RADIUS, (f"unit-sphere file: lengths shown on the Earth's radius "
                              f"{EARTH_RADIUS / 1e3:g} km")
    return 1.0, f"lengths on the sphere of radius {mesh.sphere_radius / 1e3:.10g} km"


def _spacing_km(mesh, scale: float) -> str:
    lo, hi = mesh.dcEdge.min() * scale / 1e3, mesh.dcEdge.max() * scale / 1e3
    return f"dcEdge min {lo:.4g} km, max {hi:.4g} km, max/min {hi / lo:.4f}"


def _sizes(mesh) -> str:
    return (f"nCells {mesh.nCells}, nEdges {mesh.nEdges}, nVertices {mesh.nVertices}, "
            f"maxEdges {mesh.maxEdges}")


def generate(args) -> int:
    from .icosahedral import MAX_LEVEL, write_icosahedral
    from .memory import check_memory

    problem = _output_problem(args.output)
    if problem:
        _error("generate", problem)
        return 2
    start = time.perf_counter()
    what = "python -m grids " + shlex.join(_COMMAND_LINE) if _COMMAND_LINE else "python -m grids generate"
    try:
        if 0 <= args.level <= MAX_LEVEL:      # refused before any work when it cannot fit
            check_memory(args.level, key="--level")
        write_icosahedral(args.level, args.output, lloyd_iterations=args.lloyd,
                          sphere_radius=args.radius, order=args.order, format=args.format,
                          compress=COMPRESS_CHOICES[args.compress], history=what,
                          progress=args.progress)
    except (ValueError, MeshError) as exc:
        _error("generate", exc)
        return 2
    except OSError as exc:
        _error("generate", f"cannot write {args.output}: {exc.strerror or exc}")
        return 2
    sizes, dc_min, dc_max = _written_summary(args.output)
    print(f"wrote {args.output} ({args.format}): icosahedral level {args.level}, "
          f"{args.lloyd} Lloyd iterations, order {args.order}, radius {args.radius:g} m")
    print(f"  nCells {sizes['nCells']}, nEdges {sizes['nEdges']}, nVertices {sizes['nVertices']}, "
          f"maxEdges {sizes['maxEdges']}")
    print(f"  dcEdge min {dc_min / 1e3:.4g} km, max {dc_max / 1e3:.4g} km, "
          f"max/min {dc_max / dc_min:.4f}")
    print(f"  wall time {time.perf_counter() - start:.2f} s")
    return 0


def _written_summary(path: str):
    """(dimension sizes, dcEdge min, dcEdge max) of a mesh file just written."""
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        sizes = {name: len(d) for name, d in ds.dimensions.items()}
        dc = ds["dcEdge"][...]
    return sizes, float(dc.min()), float(dc.max())


#: mesh_quality keys holding lengths (shown in km); the other rows are ratios or counts.
_LENGTH_KEYS = ("dcEdge_min", "dcEdge_max", "dvEdge_min", "dvEdge_max")


def check(args) -> int:
    from .geometry import mesh_quality

    if args.radius is not None and not (math.isfinite(args.radius) and args.radius > 0):
        _error("check", f"--radius {args.radius!r}: expected a finite positive radius in m")
        return 2
    try:
        mesh = read_mesh(args.file, sphere_radius=args.radius, validate=True,
                         recompute_geometry=args.recompute_geometry)
    except FileNotFoundError as exc:
        _error("check", f"invalid: {exc}")
        return 1
    except MeshError as exc:
        _error("check", f"invalid: {exc}")
        return 1
    scale, note = _display_scale(mesh, args.radius)
    print(f"{args.file}: sphere_radius {mesh.sphere_radius:.10g} m ({note})")
    print(f"  {_sizes(mesh)}")
    print(f"  {_spacing_km(mesh, scale)}")
    print("  quality (lengths in km, other rows dimensionless):")
    for key, value in mesh_quality(mesh).items():
        if key in ("nCells", "nEdges", "nVertices"):
            continue
        if key in _LENGTH_KEYS:
            print(f"    {key}: {value * scale / 1e3:.6g} km")
        else:
            print(f"    {key}: {value:.6g}" if isinstance(value, float) else f"    {key}: {value}")
    print("valid")
    return 0


def reorder(args) -> int:
    problem = _output_problem(args.output)
    if problem:
        _error("reorder", problem)
        return 2
    try:
        mesh = read_mesh(args.input)
        new, _ = reorder_keeping_ids(mesh, args.method)
    except (MeshError, FileNotFoundError) as exc:
        _error("reorder", f"invalid: {exc}")
        return 1
    except ValueError as exc:
        _error("reorder", exc)
        return 2
    if not _write(new, args.output, args.format, "reorder"):
        return 2
    print(f"wrote {args.output}: {args.input} reordered by {args.method} ({_sizes(new)}); "
          "new entity i came from input ID indexToCellID[i] / indexToEdgeID[i] / "
          "indexToVertexID[i] (1-based)")
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _COMMAND_LINE[:] = argv
    args = _parser().parse_args(argv)
    try:
        status = {"generate": generate, "check": check, "reorder": reorder}[args.command](args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader of our output went away (`... | head -1`). Every command prints only after its
        # work is done (file written, mesh validated), so stop quietly with success; stdout is
        # pointed at devnull so the interpreter's final flush raises nothing.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return status
