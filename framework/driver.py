"""The steps of a model run that every model takes alike: the global mesh of the config (cached
when generated), the grid file an output references, a run's pieces (`Setup`), the state of the
restart file a run resumes from, the stepping of the built Simulation and the lines that report
it. Each model's driver (`swm.driver`, `hydrostatic.driver`) builds its run with them.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from framework.constants import DAY
from framework.errors import ConfigError, WatchdogError
from framework.mesh_files import mesh_form, reference_grid
from framework.restart import read_restart

log = logging.getLogger("framework")


def build_mesh(config):
    """The global mesh of the config (rank 0 only); generated meshes come from the cache."""
    m = config.mesh
    if m.generate is not None:
        from grids.cache import cached_icosahedral

        return cached_icosahedral(m.generate.level, lloyd_iterations=m.generate.lloyd,
                                  sphere_radius=m.radius, order=m.generate.order,
                                  level_key="mesh.generate.level")
    from grids.mpas_io import read_mesh

    return read_mesh(m.file, sphere_radius=m.radius, recompute_geometry=m.recompute_geometry)


def grid_reference(config, mesh, output, key: str):
    """The grid file that output file `output` (config key `key`) references, or None when
    `output.mesh` keeps the mesh inside it (rank 0; `framework.mesh_files.mesh_form`). A generated
    mesh is referenced in the mesh cache, a mesh.file as given (its geometry recomputed: not that
    file); otherwise, or when the cache holds no file of this mesh, NAME.grid.nc is written beside
    `output` (`framework.mesh_files.reference_grid`)."""
    m = config.mesh
    if mesh_form(config.output.mesh, mesh.nCells) == "inside":
        return None
    candidate, trusted = None, False
    if m.generate is not None:
        from grids.cache import cache_path

        candidate = cache_path(m.generate.level, lloyd_iterations=m.generate.lloyd,
                               sphere_radius=m.radius, order=m.generate.order)
    elif not m.recompute_geometry:
        candidate, trusted = m.file, True
    grid = reference_grid(mesh, output, candidate, trusted=trusted, key=key)
    log.info("%s references the grid file %s (the mesh is not copied: output.mesh = %s)", output,
             grid.path, config.output.mesh)
    return grid


@dataclass
class Setup:
    """A run's pieces on this rank: communicator, array module and dtype, where the fields live
    (`framework.distribution`), the local mesh and model, the time step, steps per output and in all,
    on rank 0 the global mesh (None elsewhere), the first step (a restart's) and the run's
    fingerprint (mesh and trajectory settings, `framework.mesh_files`)."""
    comm: object
    xp: object
    dtype: np.dtype
    distribution: object
    mesh: object
    model: object
    dt: float
    per_output: int
    total: int
    global_mesh: object = None
    start: int = 0
    fingerprint: dict = None


def read_resumed(config, mesh, locations: dict, dtype, fingerprint: dict, total: int, dt: float,
                 **options) -> tuple[dict, int]:
    """({name: global field}, step) of the restart file restart.path to resume from
    (`framework.restart.read_restart` of the fields at `locations` on the global `mesh`, checked
    against the run's `fingerprint`; `options` its own); ConfigError when that step is at or past
    the run's end (`total` steps of `dt` s)."""
    saved, start = read_restart(config.restart.path, locations=locations,
                                sizes={"nCells": mesh.nCells, "nEdges": mesh.nEdges}, dtype=dtype,
                                fingerprint=fingerprint, **options)
    if start >= total:
        raise ConfigError(f"restart.resume: the restart {config.restart.path} is at day "
                          f"{start * dt / DAY:.4g}, at or past the run's end (time.days = "
                          f"{config.time.days}); expected a longer time.days to extend it")
    return saved, start


def step_through(sim, config, t0: float) -> None:
    """Prepare and run `sim` (a run of `config` set up from time `t0`): a watchdog stop logs where
    the last good state was written; any other stop abandons the loop before it finished."""
    try:
        sim.prepare()
        log.info("ready to step in %.2f s (of it the first step, computed and discarded, %.2f s; "
                 "the first records %.2f s)", time.perf_counter() - t0, sim.first_step_seconds,
                 sim.first_records_seconds)
        sim.run()
    except WatchdogError:
        if sim.comm.Get_rank() == 0:          # one line, not one per rank
            log.error("the state of step %d (day %.4f) was written to %s and %s", sim.step,
                      sim.time / DAY, config.output.path, config.restart.path)
        raise
    except BaseException:
        sim.abandon()                        # stopped before the loop's own finish
        raise


def report_run(sim, steps: int, dt: float, output_path) -> None:
    """The lines of a finished run (each rank's logger): its steps, their wall time and rate, the
    output and the time its files took to finish; on the GPU, `device_memory` of the model."""
    wall = sim.loop_seconds
    log.info("%d steps in %.2f s (%.1f steps/s, %.1f simulated days per hour); output %s (files "
             "finished in %.2f s)", steps, wall, steps / max(wall, 1e-9),
             steps * dt / DAY / max(wall, 1e-9) * 3600.0, output_path, sim.finish_seconds)
    model = sim.model
    if model.device_mesh.xp is not np:
        log.info("%s", device_memory(model))


def device_memory(model) -> str:
    """This rank's GPU memory: what CuPy's pool holds (the state, the scratch fields and the
    tables) and the mesh tables among it, also per million local cells."""
    device_mesh = model.device_mesh
    pool = device_mesh.xp.get_default_memory_pool().total_bytes()
    tables = device_mesh.nbytes()
    per = 1e6 / model.mesh.nCells / 2**30
    return (f"device memory: {pool / 2**30:.2f} GiB held ({pool * per:.3f} GiB per million cells), "
            f"of which mesh tables {tables / 2**30:.2f} GiB ({len(device_mesh.tables())} "
            f"tables, {tables * per:.3f} GiB per million cells)")
