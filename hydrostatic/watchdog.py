"""The hydrostatic core's watchdog check: is the state (mass, theta_mass, u) still plausible? On the
owned rows of every rank, on the device, one flag read back and reduced over the ranks:

    mass > 0 (a layer keeps some mass), min_theta <= theta = theta_mass / mass <= max_theta,
    |u| <= max_wind,

each false where a value is not finite. Only when it fails does the host look for the first bad
value (fields in the order mass, theta, u; then the global index, then the level), to name the
step, the field, its level (1: the lowest), the entity (its id counted from 1, as MPAS files and
tools count) and its latitude/longitude: the same one on any number of ranks.
"""
from __future__ import annotations

import numpy as np

from meshops.device.backend import array_module, to_host
from meshops.parallel.comm import is_serial
from framework.errors import ONE_BASED, WatchdogError


class StateCheck:
    """The check of one model's state on `distribution` with the limits of the config's
    `watchdog` section."""

    def __init__(self, distribution, max_wind: float, min_theta: float, max_theta: float):
        self.distribution = distribution
        self.max_wind, self.min_theta, self.max_theta = max_wind, min_theta, max_theta

    def _ranges(self, mass, theta_mass, u):
        """(name, location, values, ok) of the owned rows: `ok` the values' test (device arrays)."""
        nc, ne = self.distribution.owned["cell"], self.distribution.owned["edge"]
        m, u = mass[:nc], u[:ne]
        xp = array_module(m)
        with np.errstate(all="ignore"):
            theta = theta_mass[:nc] / m
            return (("mass", "cell", m, (m > 0) & xp.isfinite(m),
                     "not positive (a layer without mass)"),
                    ("theta", "cell", theta, (theta >= self.min_theta) & (theta <= self.max_theta),
                     f"outside [{self.min_theta:g}, {self.max_theta:g}] K (watchdog.min_theta, "
                     "watchdog.max_theta)"),
                    ("u", "edge", u, xp.abs(u) <= self.max_wind,
                     f"|u| above watchdog.max_wind = {self.max_wind:g} m/s"))

    def check(self, mass, theta_mass, u, step: int) -> None:
        """Raise WatchdogError (on every rank together) naming the first bad value."""
        ranges = self._ranges(mass, theta_mass, u)
        bad = int(to_host(sum(~ok.all() for _, _, _, ok, _ in ranges)))
        comm = self.distribution.comm
        if not is_serial(comm):
            bad = comm.allreduce(bad)
        if not bad:
            return
        found = self._first(ranges, step)
        found = [found] if is_serial(comm) else comm.allgather(found)
        raise WatchdogError(min(f for f in found if f is not None)[-1])

    def _first(self, ranges, step):
        """(field order, global index, level, message) of this rank's first bad value, or None."""
        dist, mesh = self.distribution, self.distribution.mesh
        for order, (name, loc, values, ok, what) in enumerate(ranges):
            ok = to_host(ok)
            rows = np.flatnonzero(~ok.all(axis=1))
            if rows.size:
                values = to_host(values)
                g = [dist.global_index(loc, i) for i in rows]
                i = int(rows[int(np.argmin(g))])
                k = int(np.flatnonzero(~ok[i])[0])
                what = what if np.isfinite(values[i, k]) else "not finite"
                lat, lon = (mesh.latCell, mesh.lonCell) if loc == "cell" else (mesh.latEdge, mesh.lonEdge)
                return (order, min(g), k,
                        f"step {step}: {name} = {values[i, k]:.6g} at level {k + 1} of "
                        f"{ok.shape[1]} (1: lowest), {loc} {min(g) + 1} ({ONE_BASED}; lat "
                        f"{np.degrees(lat[i]):.2f}, lon {np.degrees(lon[i]):.2f} deg): {what}")
        return None
