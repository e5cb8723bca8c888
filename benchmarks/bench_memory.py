"""Device memory of the mesh tables: every registered operator's forward and both adjoints run
once at nlev 1 and 32, float64 then float32, on one DeviceMesh per table policy.

On the GPU (default) it prints the CuPy pool bytes in use after each dtype and the bytes of every
table the DeviceMesh holds. With --host no GPU is needed: the CuPy code path runs with its
kernel launches skipped (the tables it asks for are built, nothing is computed) on a small mesh,
and each table's bytes are scaled to --levels by its row count (the widths of the tables are the
same at every level of the icosahedral meshes; --check-levels shows it).

    python benchmarks/bench_memory.py --levels 9 10 --json mem.json            # GPU
    python benchmarks/bench_memory.py --host --levels 9 10 --json mem-host.json
"""
from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import sys
import types

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import meshops  # noqa: E402
from meshops.device.tables import CATALOGUE, SIZE_OF  # noqa: E402
from meshops.registry import OPERATORS  # noqa: E402

POLICIES = ("fast", "lean")
DTYPES = ("float64", "float32")
NLEVS = (1, 32)


def icosahedral_sizes(level: int) -> dict[str, int]:
    """Cells, edges and vertices of the icosahedral mesh of `level`."""
    return {"cell": 10 * 4**level + 2, "edge": 30 * 4**level, "vertex": 20 * 4**level}


def run_every_operator(dmesh, xp, dtype, nlev, rng) -> None:
    """Each registered horizontal operator's forward and both adjoints once on random fields (the
    vertical ones hold no mesh tables)."""
    n = {"cell": dmesh.nCells, "edge": dmesh.nEdges, "vertex": dmesh.nVertices}

    def field(loc):
        shape = (n[loc],) if nlev == 1 else (n[loc], nlev)
        return xp.asarray(rng.standard_normal(shape).astype(dtype))

    for name, spec in sorted((n, s) for n, s in OPERATORS.items() if not s.vertical):
        x = [field(loc) for loc in spec.domain]
        y = [field(loc) for loc in spec.range]
        spec.forward(dmesh, *x)
        for mode in ("atomic", "deterministic"):
            spec.adjoint(dmesh, *(() if spec.linear else x), *y, mode=mode)


def measure(mesh, xp, policy, rng, after_dtype=lambda dtype: None) -> dict:
    """{"tables": {key: bytes}, "after": {dtype: bytes of the tables held}} for one policy."""
    dmesh = meshops.DeviceMesh(mesh, xp, tables=policy)
    after = {}
    for dtype in DTYPES:
        for nlev in NLEVS:
            run_every_operator(dmesh, xp, dtype, nlev, rng)
        after[dtype] = dmesh.nbytes()
        after_dtype(dtype)
    return {"tables": dmesh.tables(), "after": after, "dmesh": dmesh}


@contextlib.contextmanager
def cupy_path_without_kernels():
    """Route NumPy stand-ins for device arrays down the CuPy code path, launches skipped (through
    the public hooks `backend.use_device_module` and `kernels.use_launcher`; the launcher stands
    for an H200, so the tables taken are those of its tuning)."""
    import meshops.device.backend as backend
    import meshops.device.kernels as kernels

    class Device(np.ndarray):
        pass

    def dev(a):
        return np.ascontiguousarray(a).view(Device)

    module = types.SimpleNamespace(
        get_array_module=lambda *arrays: module if any(isinstance(a, Device) for a in arrays) else np,
        empty=lambda *a, **k: dev(np.empty(*a, **k)), zeros=lambda *a, **k: dev(np.zeros(*a, **k)),
        empty_like=lambda a: dev(np.empty_like(np.asarray(a))),
        zeros_like=lambda a: dev(np.zeros_like(np.asarray(a))),
        asarray=dev, ascontiguousarray=dev,
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    h200 = kernels.DeviceProperties(index=0, architecture="sm_90", multiprocessors=132,
                                    threads_per_sm=2048)

    def skip(grid, block, args):
        pass

    launcher = kernels.Launcher(device=lambda: h200, address=lambda a: a.ctypes.data,
                                compile=lambda module: {name: skip for name in module.names})
    with backend.use_device_module(module), kernels.use_launcher(launcher):
        yield module


def scaled(tables: dict, mesh, level: int) -> dict:
    """Per-table bytes of `tables` (measured on `mesh`) on the icosahedral mesh of `level`."""
    sizes = icosahedral_sizes(level)
    out = {}
    for key, nbytes in tables.items():
        loc = CATALOGUE[key.split(" ")[0]].location
        rows = getattr(mesh, SIZE_OF[loc])
        out[key] = nbytes // rows * sizes[loc]
    return out


def widths(tables: dict, mesh) -> dict:
    """Bytes per row of each table (level-independent on icosahedral meshes)."""
    return {key: nbytes / getattr(mesh, SIZE_OF[CATALOGUE[key.split(" ")[0]].location])
            for key, nbytes in tables.items()}


#: Tables of the code before the device mesh ("family.table") -> the catalogue table holding them now.
BEFORE_NAMES = {
    "curl.edgesOnVertex": "edgesOnVertex", "curl.coef_circulation": "circulationCoef",
    "curl.coef_curl": "curlCoef", "curl.verticesT": "edgesOnVertexT",
    "curl.coefT_circulation": "circulationCoefT", "curl.coefT_curl": "curlCoefT",
    "divergence.edgesOnCell": "edgesOnCell", "divergence.cellCoef": "divCoef",
    "divergence.cellsOnEdge": "cellsOnEdge", "divergence.edgeCoef": "divAdjCoef",
    "gradient.ends_c": "cellsOnEdge", "gradient.invLength_c": "invDcEdge",
    "gradient.edgesT_c": "cellsOnEdgeT", "gradient.coefT_c": "gradCellCoefT",
    "gradient.ends_v": "verticesOnEdge", "gradient.invLength_v": "invDvEdge",
    "gradient.edgesT_v": "verticesOnEdgeT", "gradient.coefT_v": "gradVertexCoefT",
    "interpolation.idx_c2e": "cellsOnEdge", "interpolation.idxT_c2e": "cellsOnEdgeT",
    "interpolation.idx_v2e": "verticesOnEdge", "interpolation.idxT_v2e": "verticesOnEdgeT",
    "interpolation.idx_c2v": "cellsOnVertex", "interpolation.coef_c2v": "c2vCoef",
    "interpolation.idxT_c2v": "verticesOnCell", "interpolation.coefT_c2v": "c2vCoefT",
    "interpolation.idx_v2c": "verticesOnCell", "interpolation.coef_v2c": "v2cCoef",
    "interpolation.idxT_v2c": "cellsOnVertex", "interpolation.coefT_v2c": "v2cCoefT",
    "kinetic_energy.edgesOnCell": "edgesOnCell", "kinetic_energy.cellCoef": "keCoef",
    "kinetic_energy.cellCoef2": "keCoef2", "kinetic_energy.cellsOnEdge": "cellsOnEdge",
    "kinetic_energy.edgeCoef": "keAdjCoef",
    "laplacian.cellsAcross": "cellsAcross", "laplacian.w": "laplacianWeight",
    "laplacian.invAreaCell": "invAreaCell", "laplacian.cellsOnEdge": "cellsOnEdge",
    "laplacian.verticesOnEdge": "verticesOnEdge", "laplacian.edgesOnCell": "edgesOnCell",
    "laplacian.edgesOnVertex": "edgesOnVertex", "laplacian.invDcEdge": "invDcEdge",
    "laplacian.invDvEdge": "invDvEdge", "laplacian.dcEdge": "dcEdge", "laplacian.dvEdge": "dvEdge",
    "laplacian.cellCoef": "divCoef", "laplacian.vertexCoef": "lapVertexCoef",
    "laplacian.cellCoefAdj": "lapCellCoefAdj", "laplacian.vertexCoefAdj": "lapVertexCoefAdj",
    "laplacian_composed.edgesOnEdgeDel2": "edgesOnEdgeDel2", "laplacian_composed.coefDel2": "coefDel2",
    "laplacian_composed.coefDel2T": "coefDel2T",
    "reconstruct.edgesOnCell": "edgesOnCell", "reconstruct.cellsOnEdge": "cellsOnEdge",
    "reconstruct.coeffs_reconstruct": "coeffsReconstruct",
    "reconstruct.coeffs_zonal_meridional": "coeffsZonalMeridional",
    "reconstruct.coeffsOnEdge_reconstruct": "coeffsReconstructOnEdge",
    "reconstruct.coeffsOnEdge_zonal_meridional": "coeffsZonalMeridionalOnEdge",
    "trisk.edgesOnEdge": "edgesOnEdge", "trisk.weightsOnEdge": "weightsOnEdge",
    "trisk.edgesOnEdgeT": "edgesOnEdgeT", "trisk.weightsOnEdgeT": "weightsOnEdgeT",
}


def _row_key(key: str) -> str:
    """"name [dtype] (slot-major)" -> "name (slot-major)"."""
    name = key.split(" ")[0]
    return name + (" (slot-major)" if "slot-major" in key else "")


def compare_markdown(before: dict, after: dict, levels) -> str:
    """A markdown table of MiB per catalogue table (float64 + float32 copies together), before
    (`before`: the pre-device-mesh json at level 9; level 10 scaled by rows) and per policy after."""
    def mib(n):
        return f"{n / 2**20:,.0f}" if n else "-"

    old_level = before["level"]
    rows: dict[str, dict] = {}
    for key, nbytes in before["tables"].items():
        old = key.split(" ")[0]
        row = BEFORE_NAMES[old] + (" (slot-major)" if "slot-major" in key else "")
        for level in levels:
            scale = icosahedral_sizes(level)["edge"] / icosahedral_sizes(old_level)["edge"]
            cell = rows.setdefault(row, {}).setdefault(("before", level), [0, 0])
            cell[0] += int(nbytes * scale)
            cell[1] += 1
    for policy, per_level in after["policies"].items():
        for level, r in per_level.items():
            for key, nbytes in r["tables"].items():
                cell = rows.setdefault(_row_key(key), {}).setdefault((policy, int(level)), [0, 0])
                cell[0] += nbytes
                cell[1] += 1
    policies = list(after["policies"])
    head = ["table"] + [f"{who} L{level}" for level in levels for who in ("before", *policies)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = sorted(rows, key=lambda r: -rows[r].get(("before", levels[0]), [0])[0])
    for row in order:
        cells = [f"`{row}`"]
        for level in levels:
            for who in ("before", *policies):
                n, copies = rows[row].get((who, level), (0, 0))
                cells.append(mib(n) + (f" ({copies}x)" if copies > 2 else ""))
        lines.append("| " + " | ".join(cells) + " |")
    totals = {}
    for level in levels:
        f64 = sum(v for k, v in before["tables"].items() if "[float64]" in k)
        f32 = sum(v for k, v in before["tables"].items() if "[float32]" in k)
        scale = icosahedral_sizes(level)["edge"] / icosahedral_sizes(old_level)["edge"]
        totals[("before", level)] = (f64 * scale, f32 * scale)
        for policy in policies:
            r = after["policies"][policy][level if level in after["policies"][policy] else str(level)]
            totals[(policy, level)] = (r["after_float64"], r["float32_more"])
    for label, pick in (("**tables after float64**", lambda t: t[0]),
                        ("**float32 adds**", lambda t: t[1]), ("**total**", sum)):
        cells = [label] + [f"**{pick(totals[(who, level)]) / 2**30:.2f} GiB**"
                           for level in levels for who in ("before", *policies)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def gib(n) -> str:
    return f"{n / 2**30:.2f} GiB"


def host_main(args) -> dict:
    from grids.icosahedral import generate_icosahedral

    results = {}
    meshes = {lvl: generate_icosahedral(lvl, order="morton") for lvl in sorted({args.host_level,
                                                                               *args.check_levels})}
    with cupy_path_without_kernels() as xp:
        for policy in POLICIES:
            per_level = {lvl: measure(m, xp, policy, np.random.default_rng(0))
                         for lvl, m in meshes.items()}
            base = per_level[args.host_level]
            for lvl in args.check_levels:
                w0, w1 = widths(base["tables"], meshes[args.host_level]), widths(
                    per_level[lvl]["tables"], meshes[lvl])
                diff = {k: (w0[k], w1.get(k)) for k in w0 if w0[k] != w1.get(k)}
                print(f"[{policy}] bytes per row at level {lvl} vs {args.host_level}: "
                      f"{'the same for every table' if not diff else diff}")
            mesh = meshes[args.host_level]
            results[policy] = {}
            for level in args.levels:
                tables = scaled(base["tables"], mesh, level)
                f64 = sum(v for k, v in tables.items() if "[float32]" not in k)
                f32 = sum(v for k, v in tables.items() if "[float32]" in k)
                results[policy][level] = {"tables": tables, "after_float64": f64,
                                          "float32_more": f32, "total": f64 + f32}
                print(f"[{policy}] level {level} (computed): {len(tables)} tables, after float64 "
                      f"{gib(f64)}, float32 adds {gib(f32)}, total {gib(f64 + f32)}")
                if args.verbose:
                    for key, nbytes in sorted(tables.items(), key=lambda kv: -kv[1]):
                        print(f"    {nbytes / 2**20:9.1f} MiB  {key}")
    return {"computed": True, "host_level": args.host_level, "policies": results}


def gpu_main(args) -> dict:
    import cupy

    from meshes import icosahedral_mesh

    pool = cupy.get_default_memory_pool()
    results = {}
    for level in args.levels:
        mesh = icosahedral_mesh(level, args.cache)
        for policy in args.policies:
            pool.free_all_blocks()
            used = {}

            def after(dtype):
                cupy.cuda.Device().synchronize()
                used[dtype] = pool.used_bytes()
                print(f"[{policy}] level {level} after {dtype}: pool used {gib(used[dtype])}", flush=True)

            r = measure(mesh, cupy, policy, np.random.default_rng(0), after)
            tables = r["tables"]
            print(f"[{policy}] level {level}: {len(tables)} tables, {gib(sum(tables.values()))}")
            if args.verbose:
                for key, nbytes in sorted(tables.items(), key=lambda kv: -kv[1]):
                    print(f"    {nbytes / 2**20:9.1f} MiB  {key}")
            results.setdefault(policy, {})[level] = {"pool_used": used, "tables": tables,
                                                     "total": sum(tables.values())}
            r["dmesh"].release()
            del r
            pool.free_all_blocks()
    return {"computed": False, "policies": results}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--levels", type=int, nargs="+", default=[9, 10])
    p.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    p.add_argument("--host", action="store_true", help="compute the bytes without a GPU")
    p.add_argument("--host-level", type=int, default=5, help="mesh level the --host run builds")
    p.add_argument("--check-levels", type=int, nargs="*", default=[6],
                   help="levels whose bytes per row --host compares with --host-level's")
    p.add_argument("--cache", help="mesh cache directory (benchmarks/meshes.py)")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("-v", "--verbose", action="store_true", help="print every table")
    p.add_argument("--compare", help="with --host: print a markdown table against this json of the "
                                     "code before the device mesh (per-table bytes at one level)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    results = host_main(args) if args.host else gpu_main(args)
    if args.compare:
        print(compare_markdown(json.loads(pathlib.Path(args.compare).read_text()), results, args.levels))
    if args.json:
        path = pathlib.Path(args.json)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(results, indent=1))
        tmp.replace(path)


if __name__ == "__main__":
    main()
