"""`python -m grids`: generate, check and reorder MPAS mesh files.

    python -m grids generate --level 6 --lloyd 200 -o x1.40962.grid.nc [--radius R]
                             [--format NETCDF4] [--order morton] [--progress]
    python -m grids check FILE [--radius R]
    python -m grids reorder IN OUT [--method morton] [--format F]

`check` exits with status 0 when the mesh is valid and 1 when it is not (the message names the
file, field, first bad index, value and what was expected). `reorder` records where each entity
came from in indexToCellID / indexToEdgeID / indexToVertexID (see `reorder_keeping_ids`).
"""
from __future__ import annotations

import argparse
import sys
import time

from .mesh import EARTH_RADIUS
from .mpas_io import FORMATS, read_mesh, reorder_keeping_ids, write_mesh
from .validate import MeshError, validate_mesh


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m grids", description="MPAS mesh files: generate, "
                                "check, reorder.")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="icosahedral Voronoi mesh (10 * 4**level + 2 cells)")
    g.add_argument("--level", type=int, required=True, help="bisection level (2 -> 162 cells)")
    g.add_argument("--lloyd", type=int, default=0, help="Lloyd iterations (default 0)")
    g.add_argument("-o", "--output", required=True, help="output MPAS mesh file")
    g.add_argument("--radius", type=float, default=EARTH_RADIUS,
                   help=f"sphere radius in m (default {EARTH_RADIUS})")
    g.add_argument("--format", default="NETCDF3_64BIT_OFFSET", choices=FORMATS)
    g.add_argument("--order", default="morton", help="cell order: morton, hilbert or none")
    g.add_argument("--progress", action="store_true", help="print each stage's wall time")
    c = sub.add_parser("check", help="sizes, spacing, quality and validity of a mesh file")
    c.add_argument("file")
    c.add_argument("--radius", type=float, default=None,
                   help="scale to this sphere radius in m (default: the file's)")
    r = sub.add_parser("reorder", help="renumber cells, edges and vertices along a curve")
    r.add_argument("input")
    r.add_argument("output")
    r.add_argument("--method", default="morton", help="morton or hilbert (default morton)")
    r.add_argument("--format", default="NETCDF3_64BIT_OFFSET", choices=FORMATS)
    return p


def _spacing_km(mesh, radius_arg) -> str:
    """dcEdge range in km; a unit-sphere file (no --radius) is reported on Earth's radius."""
    scale, note = 1.0, ""
    if radius_arg is None and mesh.sphere_radius == 1.0:
        scale, note = EARTH_RADIUS, f" (unit-sphere file, shown on radius {EARTH_RADIUS / 1e3:g} km)"
    lo, hi = mesh.dcEdge.min() * scale / 1e3, mesh.dcEdge.max() * scale / 1e3
    return f"dcEdge min {lo:.4g} km, max {hi:.4g} km, max/min {hi / lo:.4f}{note}"


def _sizes(mesh) -> str:
    return (f"nCells {mesh.nCells}, nEdges {mesh.nEdges}, nVertices {mesh.nVertices}, "
            f"maxEdges {mesh.maxEdges}")


def generate(args) -> int:
    from .icosahedral import generate_icosahedral

    start = time.perf_counter()
    try:
        mesh = generate_icosahedral(args.level, lloyd_iterations=args.lloyd,
                                    sphere_radius=args.radius, order=args.order,
                                    progress=args.progress)
    except ValueError as exc:
        print(f"generate: {exc}", file=sys.stderr)
        return 2
    write_mesh(mesh, args.output, format=args.format)
    print(f"wrote {args.output} ({args.format}): icosahedral level {args.level}, "
          f"{args.lloyd} Lloyd iterations, order {args.order}, radius {args.radius:g} m")
    print(f"  {_sizes(mesh)}")
    print(f"  {_spacing_km(mesh, args.radius)}")
    print(f"  {time.perf_counter() - start:.2f} s")
    return 0


def check(args) -> int:
    from .geometry import mesh_quality

    try:
        mesh = read_mesh(args.file, sphere_radius=args.radius, validate=False)
    except (MeshError, FileNotFoundError) as exc:
        print(f"invalid: {exc}")
        return 1
    print(f"{args.file}: sphere_radius {mesh.sphere_radius:.10g} m")
    print(f"  {_sizes(mesh)}")
    print(f"  {_spacing_km(mesh, args.radius)}")
    try:
        validate_mesh(mesh, source=args.file)
    except MeshError as exc:
        print(f"invalid: {exc}")
        return 1
    print("  quality:")
    for key, value in mesh_quality(mesh).items():
        if key in ("nCells", "nEdges", "nVertices"):
            continue
        print(f"    {key}: {value:.6g}" if isinstance(value, float) else f"    {key}: {value}")
    print("valid")
    return 0


def reorder(args) -> int:
    try:
        mesh = read_mesh(args.input)
        new, _ = reorder_keeping_ids(mesh, args.method)
    except (MeshError, FileNotFoundError) as exc:
        print(f"invalid: {exc}")
        return 1
    except ValueError as exc:
        print(f"reorder: {exc}", file=sys.stderr)
        return 2
    write_mesh(new, args.output, format=args.format)
    print(f"wrote {args.output}: {args.input} reordered by {args.method} ({_sizes(new)}); "
          "new entity i came from input ID indexToCellID[i] / indexToEdgeID[i] / "
          "indexToVertexID[i] (1-based)")
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    return {"generate": generate, "check": check, "reorder": reorder}[args.command](args)
