"""Compare two `bench_operators.py --json` tables row by row: time ratio (after / before) per
(operator, dtype, nlev, pass), the rows beyond a tolerance, and the geometric mean per pass.

    python benchmarks/compare_tables.py before.json after.json [--tolerance 0.03] [--markdown]
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib


def rows_by_key(doc) -> dict:
    return {(r["op"], r["dtype"], r["nlev"], r["pass"]): r for r in doc["rows"] if r.get("ms")}


def compare(before: dict, after: dict) -> list[tuple]:
    """[(key, before ms, after ms, ratio)] for the rows both tables timed, sorted by key."""
    a, b = rows_by_key(before), rows_by_key(after)
    return [(key, a[key]["ms"], b[key]["ms"], b[key]["ms"] / a[key]["ms"]) for key in sorted(a.keys() & b.keys())]


def geometric_mean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before", type=pathlib.Path, help="bench_operators.py --json output (reference)")
    p.add_argument("after", type=pathlib.Path, help="bench_operators.py --json output (to compare)")
    p.add_argument("--tolerance", type=float, default=0.03,
                   help="relative change reported as a difference (default 0.03: 3%%)")
    p.add_argument("--markdown", action="store_true", help="print every row as a Markdown table")
    args = p.parse_args(argv)
    before, after = (json.loads(path.read_text()) for path in (args.before, args.after))
    rows = compare(before, after)
    if args.markdown:
        print("| operator | dtype | nlev | pass | before ms | after ms | after / before |")
        print("|---|---|---|---|---|---|---|")
        for (op, dtype, nlev, kind), t0, t1, ratio in rows:
            print(f"| {op} | {dtype} | {nlev} | {kind} | {t0:.4g} | {t1:.4g} | {ratio:.3f} |")
    for kind in sorted({key[3] for key, *_ in rows}):
        ratios = [r for key, _, _, r in rows if key[3] == kind]
        print(f"{kind}: {len(ratios)} rows, geometric mean after/before {geometric_mean(ratios):.3f}, "
              f"range {min(ratios):.3f}-{max(ratios):.3f}")
    beyond = [(key, t0, t1, r) for key, t0, t1, r in rows if abs(r - 1) > args.tolerance]
    print(f"{len(beyond)} of {len(rows)} rows differ by more than {args.tolerance:.0%}:")
    for (op, dtype, nlev, kind), t0, t1, ratio in beyond:
        print(f"  {op} {dtype} nlev {nlev} {kind}: {t0:.4g} -> {t1:.4g} ms ({ratio:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
