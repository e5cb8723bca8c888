"""The tracer's history: q, its mass sum_c areaCell[c] q[c] and its normalised l2 error against the
exact solution (`tracer.cases.l2_error`) at every output time, gathered to rank 0 and written there
when the run ends (finished, or stopped by a signal or the watchdog: the records so far), to
NAME.partial and then renamed (a crash never leaves a half-written history under its name), with
the mesh's latCell, lonCell and areaCell."""
from __future__ import annotations

import logging
import os

import numpy as np

from framework.constants import DAY
from tracer.cases import bell, l2_error
from tracer.shared import dump, partial_path

log = logging.getLogger("tracer")


class History:
    """The history callback of a `framework.simulation.Simulation` on `schedule`: gathers q (a
    collective), keeps the record on rank 0 (where `global_mesh` is given; None elsewhere) and
    writes the file when the run ends with its records so far (not after an error or before any
    record)."""

    def __init__(self, config, distribution, global_mesh, u0: float, schedule):
        self.config, self.distribution, self.global_mesh = config, distribution, global_mesh
        self.u0, self.schedule, self.records = u0, schedule, []

    def start(self, sim) -> None:
        self(sim)

    def __call__(self, sim) -> None:
        q = sim.model.q
        q = self.distribution.gather("cell", q if isinstance(q, np.ndarray) else q.get())
        if self.global_mesh is None:
            return
        q = np.array(q, dtype=np.float64)
        mesh, case = self.global_mesh, self.config.case
        mass = float(np.sum(mesh.areaCell * q))
        error = l2_error(mesh, q, bell(mesh, self.u0, case.alpha, sim.time))
        log.info("day %.3f: mass %.17g, l2 error %.4g", sim.time / DAY, mass, error)
        self.records.append((sim.time / DAY, q, mass, error))

    def finish(self, sim, outcome: str) -> None:
        if outcome not in ("finished", "interrupted", "watchdog") or self.global_mesh is None \
                or not self.records:
            return
        if outcome != "finished":
            log.info("%s: the history holds the %d records up to day %g", self.config.output.path,
                     len(self.records), self.records[-1][0])
        import xarray

        mesh, path = self.global_mesh, self.config.output.path
        days, q, mass, error = (np.array(x) for x in zip(*self.records))
        cell = {name: ("nCells", getattr(mesh, name)) for name in ("latCell", "lonCell", "areaCell")}
        ds = xarray.Dataset(
            {"q": (("Time", "nCells"), q.astype(self.config.dtype), {"long_name": "tracer"}),
             "mass": ("Time", mass, {"long_name": "sum of areaCell * q"}),
             "l2_error": ("Time", error, {"long_name": "normalised l2 error against the exact "
                                          "solution (Williamson et al. 1992)"}), **cell},
            coords={"Time": ("Time", days, {"units": "days since 0000-01-01 00:00:00",
                                            "calendar": "noleap"})},
            attrs={"model_name": "tracer", "config": dump(self.config),
                   "sphere_radius": float(self.config.mesh.radius)})
        partial = partial_path(path)
        ds.to_netcdf(partial)
        os.replace(partial, path)
