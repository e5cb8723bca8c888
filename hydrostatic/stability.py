"""The time step a hydrostatic run can take, told to the user at start (as MPAS and DYNAMICO users
expect): the Courant number of the fastest wave and a suggested dt, and the explicit limits of
the fourth-order diffusion, so that a config above them is warned of before it blows up and a
watchdog stop it causes is blamed on the right key.

Waves: the fastest signal of the hydrostatic equations is the Lamb wave, sqrt(gamma R T) (about
340 m/s at 288 K, gamma = cp / cv), carried by the wind; its Courant number on the smallest cell
distance is

    CFL = (sqrt(gamma R max T) + max |u|) dt / min(dcEdge),

stable up to CFL_LIMIT with RK4: JW06 ran at 1.46 (level 3, 4 days) and 1.40 (level 5, dt 720
s, 30 days) and blew up at 1.58 (level 3) and 1.75 (level 5, dt 900 s). The suggested dt is the largest divisor of the output
interval under it.

Diffusion: tend_u = -visc4 del4_e2e(u) (and tend_theta = -visc4_theta del4_c2c(theta)) is stable
with RK4 while dt visc4 lambda_max <= DIFFUSION_LIMIT (RK4's reach on the negative real axis,
2.785, less a margin), lambda_max the largest eigenvalue of the mesh's del4 (about (8 /
min(dcEdge)^2)^2 up to a factor of the mesh's shape): found by power iteration on the run's
device, its halo rows exchanged as the state's, the same on any number of ranks.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

import meshops
from meshops.device.backend import array_module, to_host
from meshops.operators.vertical import CP_DRY, R_DRY
from meshops.parallel.comm import is_serial

log = logging.getLogger("hydrostatic")

#: Largest Courant number (Lamb wave + wind) of a stable RK4 step (module doc).
CFL_LIMIT = 1.45
#: Largest dt visc4 lambda_max(del4) of a stable RK4 step (module doc).
DIFFUSION_LIMIT = 2.7
#: cp / cv of dry air: the Lamb wave's speed is sqrt(GAMMA R T).
GAMMA = CP_DRY / (CP_DRY - R_DRY)
#: Power iterations of lambda_max (its estimate is within a few per cent after them).
ITERATIONS = 40


@dataclass(frozen=True)
class Diffusion:
    """A fourth-order diffusion's config key, its value, the largest eigenvalue of its operator
    on the mesh and the largest stable value at time step dt."""
    key: str
    value: float
    lambda_max: float
    dt: float

    @property
    def largest_stable(self) -> float:
        return DIFFUSION_LIMIT / (self.dt * self.lambda_max)

    @property
    def number(self) -> float:
        """dt value lambda_max: stable up to DIFFUSION_LIMIT."""
        return self.dt * self.value * self.lambda_max

    def too_large(self) -> bool:
        return self.number > DIFFUSION_LIMIT

    def describe(self) -> str:
        return (f"{self.key} = {self.value:.4g} is above the stable limit for time.dt = "
                f"{self.dt:g} s (dt {self.key.split('.')[-1]} lambda_max = {self.number:.3g} > "
                f"{DIFFUSION_LIMIT}, lambda_max of the mesh's del4 {self.lambda_max:.4g} m-4); "
                f"expected {self.key} <= {self.largest_stable:.3g}")


@dataclass(frozen=True)
class Stability:
    """What the start of a run tells: the smallest dcEdge (m), the fastest wave speed (m/s) and
    its parts, the Courant number at dt, the suggested dt (s) and the diffusions."""
    dt: float
    dc_edge_min: float
    lamb_speed: float
    max_wind: float
    suggested_dt: float
    diffusions: tuple

    @property
    def speed(self) -> float:
        return self.lamb_speed + self.max_wind

    @property
    def cfl(self) -> float:
        return self.speed * self.dt / self.dc_edge_min

    def lines(self) -> list[str]:
        """The log lines at start: the Courant number and the suggested dt, and each diffusion's
        number against its limit."""
        out = [f"time step: dt {self.dt:g} s, CFL {self.cfl:.3g} (stable up to {CFL_LIMIT}) of the "
               f"fastest wave {self.speed:.0f} m/s (Lamb wave sqrt(gamma R T) "
               f"{self.lamb_speed:.0f} m/s + max |u| {self.max_wind:.1f} m/s) on the smallest "
               f"dcEdge {self.dc_edge_min / 1e3:.1f} km; suggested dt <= {self.suggested_dt:g} s"]
        out += [f"diffusion: dt {d.key.split('.')[-1]} lambda_max = {d.number:.3g} (stable up to "
                f"{DIFFUSION_LIMIT}; {d.key} <= {d.largest_stable:.3g})"
                for d in self.diffusions if d.value]
        return out

    def warnings(self) -> list[str]:
        """A line per setting above its stable limit, naming the key and the value to use."""
        out = []
        if self.cfl > CFL_LIMIT:
            out.append(f"time.dt = {self.dt:g} s is above the stable limit: CFL {self.cfl:.3g} > "
                       f"{CFL_LIMIT} of the fastest wave ({self.speed:.0f} m/s on the smallest "
                       f"dcEdge {self.dc_edge_min / 1e3:.1f} km); expected time.dt <= "
                       f"{self.suggested_dt:g} s (suggested)")
        out += [d.describe() for d in self.diffusions if d.too_large()]
        return out

    def too_much_diffusion(self) -> list[Diffusion]:
        return [d for d in self.diffusions if d.too_large()]


def suggested_dt(dt_max: float, interval: float) -> float:
    """The largest dt <= dt_max that divides the output interval `interval` (s) into whole steps,
    a whole number of seconds where one within a factor 2 of dt_max does."""
    first = math.ceil(interval / dt_max - 1e-9)
    for n in range(first, 2 * first + 1):
        dt = interval / n
        if abs(dt - round(dt)) < 1e-9 * dt:
            return float(round(dt))
    return interval / first


def lambda_max(distribution, operator, location: str, xp, exchange=None, columns: int = 1,
               dtype=np.float64) -> float:
    """The largest eigenvalue of `operator` (a field at `location` -> the same) by power
    iteration on `columns` start vectors at once, the largest of their estimates. The start
    vectors are a hash of each entity's position, and `exchange(field)` (None: one process) fills
    the halo rows before each application, so the estimate is the same on any number of ranks.
    `dtype`: the state's (the exchange's)."""
    mesh, n = distribution.mesh, distribution.owned[location]
    lat, lon = (xp.asarray(np.asarray(a, dtype=np.float64)) for a in (
        (mesh.latCell, mesh.lonCell) if location == "cell" else (mesh.latEdge, mesh.lonEdge)))
    v = xp.empty((lat.shape[0], columns), dtype=dtype)
    for k in range(1, columns + 1):     # on the run's device, one column's temporaries at a time
        v[:, k - 1] = (xp.sin(lat * 1.0e3 * k + lon * 7.0e2 + k) * 43758.5453) % 1.0 - 0.5
    comm = distribution.comm
    total = (lambda x: x) if is_serial(comm) else (lambda x: comm.allreduce(x, op=_sum_op()))
    estimate = np.zeros(columns)
    norm = np.sqrt(total(to_host((v[:n] ** 2).sum(axis=0))))
    for _ in range(ITERATIONS):
        v = v / xp.asarray(np.where(norm > 0, norm, 1.0), dtype=dtype)
        if exchange is not None:
            exchange(v)
        v = operator(v)
        estimate = np.sqrt(total(to_host((v[:n] ** 2).sum(axis=0))))
        norm = estimate                      # the next iteration's: the same owned rows' norm
    return float(estimate.max())


def _sum_op():
    from mpi4py import MPI

    return MPI.SUM


def _max_op():
    from mpi4py import MPI

    return MPI.MAX


def _global_max(comm, value: float) -> float:
    return value if is_serial(comm) else comm.allreduce(value, op=_max_op())


def _exchange(model, location: str):
    """exchange(field) of a field of the state's shape at `location` through the model's state
    exchange (the other fields zeros), or None on one process."""
    if model.distribution is None:
        return None
    xp = array_module(model.u)
    cells, edges = xp.zeros_like(model.mass), xp.zeros_like(model.u)
    if location == "edge":
        return lambda v: model.distribution.exchange(cells, cells.copy(), v)
    return lambda v: model.distribution.exchange(v, cells, edges)


def assess(config, model, distribution) -> Stability:
    """The `Stability` of a run's first state (every rank): the smallest dcEdge, the largest
    temperature and wind of the owned rows, lambda_max of del4 on edges (and on cells with
    visc4_theta)."""
    from hydrostatic.output import fields_of

    comm, mesh = distribution.comm, distribution.mesh
    ne, nc = distribution.owned["edge"], distribution.owned["cell"]
    xp = array_module(model.u)
    dc_min = -_global_max(comm, -float(np.min(np.asarray(mesh.dcEdge)[:ne])))
    if model.distribution is not None:              # the temperature's stencils read halo rows
        model.distribution.exchange(model.mass, model.theta_mass, model.u)
    temperature = fields_of(model, ["temperature"])["temperature"]
    t_max = _global_max(comm, float(to_host(temperature[:nc].max())))
    wind = _global_max(comm, float(to_host(xp.abs(model.u[:ne]).max())))
    lamb = math.sqrt(GAMMA * R_DRY * t_max)
    dt = model.dt
    interval = config.output.interval_hours * 3600.0
    device_mesh, nlev = model.device_mesh, model.mass.shape[1]
    diffusions = []
    for key, value, operator, location in (
            ("diffusion.visc4", config.diffusion.visc4, meshops.del4_e2e, "edge"),
            ("diffusion.visc4_theta", config.diffusion.visc4_theta, meshops.del4_c2c, "cell")):
        if value:
            lam = lambda_max(distribution, lambda v, op=operator: op(device_mesh, v), location, xp,
                             _exchange(model, location), columns=nlev, dtype=model.u.dtype)
            diffusions.append(Diffusion(key, value, lam, dt))
    return Stability(dt, dc_min, lamb, wind,
                     suggested_dt(CFL_LIMIT * dc_min / (lamb + wind), interval), tuple(diffusions))


def report(stability: Stability) -> None:
    """Log the start's lines (rank 0's logger) and warn of each setting above its limit."""
    for line in stability.lines():
        log.info("%s", line)
    for line in stability.warnings():
        log.warning("%s", line)
