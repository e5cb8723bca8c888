"""Benchmark meshes: Morton-ordered icosahedral meshes from the package's mesh cache
(`grids.cache`: MPAS grid files, generated once per machine and parameter set, shared with the
model's runs). `cache_dir` overrides the cache directory ($MESHOPS_CACHE_DIR, else
~/.cache/meshops/meshes)."""
from __future__ import annotations

import time

from grids.cache import cached_icosahedral
from grids.mesh import Mesh


def icosahedral_mesh(level: int, cache_dir=None, *, lloyd_iterations: int = 0, log=print) -> Mesh:
    """The Morton-ordered icosahedral mesh of `level`, from the cache or generated and cached."""
    t0 = time.perf_counter()
    mesh = cached_icosahedral(level, lloyd_iterations=lloyd_iterations, order="morton",
                              cache_dir=cache_dir)
    log(f"mesh level {level}: {mesh} in {time.perf_counter() - t0:.1f} s (grids.cache)")
    return mesh
