"""Convergence study of the meshops operators on refined icosahedral SCVT meshes.

For every case of `meshops.analytic.CASES` (inputs sampled from analytic fields, exact
outputs at the output location), prints the relative area-weighted l2 and the l_inf errors on
levels `--levels` (default 2..7) of `grids.icosahedral.generate_icosahedral` after `--lloyd`
Lloyd iterations, with observed orders log2(err_L / err_{L+1}); `--sweep` repeats the study for
several Lloyd iteration counts (to show how the orders depend on them) and `--markdown PATH` writes
the tables as markdown.

    python benchmarks/convergence.py [--levels 2 7] [--lloyd 200] [--sweep 0,10,50] [--markdown F]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import meshops  # noqa: E402
from grids.icosahedral import generate_icosahedral  # noqa: E402
from meshops.analytic import CASES, centroid_offset, measure, observed_orders  # noqa: E402


def study(levels, lloyd: int, cases=CASES, log=print) -> dict:
    """{"meshes": [{level, nCells, dcEdge_km, centroid_offset, seconds}], "errors": {label: [norms]}}."""
    meshes, errors = [], {label: [] for label in cases}
    for level in levels:
        t0 = time.perf_counter()
        mesh = generate_icosahedral(level, lloyd_iterations=lloyd)
        gen = time.perf_counter() - t0
        info = {"level": level, "nCells": mesh.nCells, "dcEdge_km": float(np.mean(mesh.dcEdge)) / 1e3,
                "centroid_offset": centroid_offset(mesh), "seconds": gen}
        meshes.append(info)
        log(f"  level {level}: {mesh.nCells} cells, mean dcEdge {info['dcEdge_km']:.1f} km, "
            f"SCVT offset {info['centroid_offset']:.1e}, generated in {gen:.1f} s", flush=True)
        for label, case in cases.items():
            errors[label].append(measure(mesh, case, meshops))
        del mesh
    return {"meshes": meshes, "errors": errors}


def _fmt_orders(values) -> str:
    return " ".join(f"{o:5.2f}" for o in values)


def text_report(result, lloyd: int) -> str:
    levels = [m["level"] for m in result["meshes"]]
    pairs = " ".join(f"{a}-{b}" for a, b in zip(levels[:-1], levels[1:]))
    lines = [f"Lloyd iterations {lloyd}; orders over level pairs {pairs}",
             f"{'case':28s} {'l2 (finest)':>11s}  l2 orders{'':{max(0, 6 * len(levels) - 15)}s}"
             f" {'linf (finest)':>13s}  linf orders"]
    for label, errs in result["errors"].items():
        l2 = [e["l2"] for e in errs]
        li = [e["linf"] for e in errs]
        lines.append(f"{label:28s} {l2[-1]:11.2e}  {_fmt_orders(observed_orders(l2)):{6 * len(levels) - 6}s}"
                     f" {li[-1]:13.2e}  {_fmt_orders(observed_orders(li))}")
    return "\n".join(lines)


def markdown_report(result, lloyd: int) -> str:
    levels = [m["level"] for m in result["meshes"]]
    pairs = [f"{a}→{b}" for a, b in zip(levels[:-1], levels[1:])]
    out = [f"Lloyd iterations: {lloyd}.", "",
           "| level | nCells | mean dcEdge (km) | SCVT offset |", "|---|---|---|---|"]
    for m in result["meshes"]:
        out.append(f"| {m['level']} | {m['nCells']} | {m['dcEdge_km']:.1f} | {m['centroid_offset']:.1e} |")
    out += ["", "| case | norm | error at level " + str(levels[-1]) + " | " + " | ".join(pairs) + " |",
            "|---|---|---|" + "---|" * len(pairs)]
    for label, errs in result["errors"].items():
        for norm in ("l2", "linf"):
            e = [x[norm] for x in errs]
            out.append(f"| {label} | {norm} | {e[-1]:.2e} | "
                       + " | ".join(f"{o:.2f}" for o in observed_orders(e)) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", nargs=2, type=int, default=(2, 7), metavar=("FIRST", "LAST"))
    ap.add_argument("--lloyd", type=int, default=200, help="Lloyd iterations per mesh (default 200)")
    ap.add_argument("--sweep", default="", help="comma-separated Lloyd iteration counts to compare "
                    "(on levels FIRST..min(LAST, 6))")
    ap.add_argument("--markdown", type=pathlib.Path, help="write the tables as markdown to this file")
    args = ap.parse_args(argv)
    first, last = args.levels
    if not 0 <= first < last:
        ap.error(f"--levels {first} {last}: expected 0 <= FIRST < LAST")
    md = []
    print(f"convergence study, levels {first}..{last}")
    result = study(range(first, last + 1), args.lloyd)
    print(text_report(result, args.lloyd))
    md.append(markdown_report(result, args.lloyd))
    for it in [int(s) for s in args.sweep.split(",") if s.strip()]:
        print(f"\nLloyd sweep: {it} iterations")
        res = study(range(first, min(last, 6) + 1), it)
        print(text_report(res, it))
        md.append(markdown_report(res, it))
    if args.markdown:
        tmp = args.markdown.with_name(args.markdown.name + ".tmp")
        tmp.write_text("\n\n".join(md) + "\n")
        os.replace(tmp, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
