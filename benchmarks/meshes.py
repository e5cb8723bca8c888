"""Benchmark meshes: Morton-ordered icosahedral meshes, generated once per machine and cached as .npz.

The cache file `icosahedral-L{level}-lloyd{n}.npz` under `cache_dir` holds every MPAS field of the
mesh and its sphere radius; it is written under a temporary name and renamed, so an interrupted
run never leaves a truncated cache. Default cache directory: $MESHOPS_BENCH_CACHE, else
~/.cache/meshops-bench.
"""
from __future__ import annotations

import os
import pathlib
import time

import numpy as np

from grids.mesh import FIELD_DIMS, Mesh


def default_cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("MESHOPS_BENCH_CACHE", pathlib.Path.home() / ".cache" / "meshops-bench"))


def _save(mesh: Mesh, path: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
    np.savez(tmp, sphere_radius=np.float64(mesh.sphere_radius), **mesh.fields())
    os.replace(tmp, path)


def _load(path: pathlib.Path) -> Mesh:
    with np.load(path) as data:
        missing = [name for name in FIELD_DIMS if name not in data.files]
        if missing:
            raise ValueError(f"{path}: mesh cache lacks field {missing[0]!r}; delete the file to regenerate it")
        return Mesh(sphere_radius=float(data["sphere_radius"]), **{name: data[name] for name in FIELD_DIMS})


def icosahedral_mesh(level: int, cache_dir=None, *, lloyd_iterations: int = 0, log=print) -> Mesh:
    """The Morton-ordered icosahedral mesh of `level`, from the cache or generated and cached."""
    cache_dir = pathlib.Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = cache_dir / f"icosahedral-L{level}-lloyd{lloyd_iterations}.npz"
    t0 = time.perf_counter()
    if path.exists():
        mesh = _load(path)
        log(f"mesh level {level}: {mesh} loaded from {path} in {time.perf_counter() - t0:.1f} s")
        return mesh
    from grids.icosahedral import generate_icosahedral

    mesh = generate_icosahedral(level, lloyd_iterations=lloyd_iterations, order="morton")
    t1 = time.perf_counter()
    _save(mesh, path)
    log(f"mesh level {level}: {mesh} generated in {t1 - t0:.1f} s, cached to {path} "
        f"in {time.perf_counter() - t1:.1f} s")
    return mesh
