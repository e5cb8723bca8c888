"""Cost functions of a hydrostatic run and their gradients with respect to its state (mass,
theta_mass, u), for the sensitivity run (`hydrostatic.sensitivity`).

A cost is a sum over steps, J = sum_k J_k(x_k): `value(k, state)` is J_k (the same number on
every rank), `gradient(k, state)` is [dJ_k/dmass, dJ_k/dtheta_mass, dJ_k/du] as local arrays of
the run's backend, zero on halo rows (or None at a step without a term). Boxes, windows and sums
over ranks are `adjoint.costs`'s: with w_i the areaCell of the owned cells whose centres lie in a
latitude-longitude box, W = sum_i w_i over all ranks and the window's n_w steps (the final step by
default), a_i = w_i / (W n_w) (`adjoint.costs.box_weights`), and each J_k the correctly rounded
sum of its terms over all ranks (`Context.exact_sum`), values and gradients are the same bitwise
on any number of ranks. Diagnostics as `hydrostatic.dynamics.column_diagnostics` (layers k from
the surface up, g gravity, p_top the model top's pressure):

    p_i = p_top + g sum_layers_from_top_l2i(mass)   interface pressure, p_s = p_i[0] (Pa)
    p = avg_i2l(p_i),  theta = theta_mass / mass,  T = theta exner(p)     layer pressure, temperature

surface_pressure (Pa): the box mean of the surface pressure,

    J_k = sum_i a_i p_s[i],     dJ_k/dmass[i, k] = g a_i

kinetic_energy (J m-2): the box mean of the kinetic energy of layers k0..k1 (1-based, both
included) per unit area, ke = ke_e2c(u),

    J_k = sum_i a_i sum_{k=k0}^{k1} mass[i, k] ke[i, k]
    dJ_k/dmass[i, k] = a_i ke[i, k],   dJ_k/du = ke_e2c_adj(u, G),  G[i, k] = a_i mass[i, k]

where ke on an owned cell reads the halo edges of its polygon and u_adj on an owned edge gathers
G on both its cells, halo ones too: both need the state exchanged first (as the vorticity of
`swm.costs.RegionCost`), and the a_i of halo cells (`box_weights`' local weights).

minimum_surface_pressure (Pa): a smooth minimum of the surface pressure in the box (the central
pressure of a low), softness tau (Pa), with m the least p_s of the box's cells on every rank
(an exact MIN: the shift leaves J unchanged) and n_w the window's steps,

    J_k = (m - tau log(n_w S)) / n_w,   S = sum_i a_i e_i,   e_i = exp(-(p_s[i] - m) / tau)
    dJ_k/dp_s[i] = a_i e_i / (n_w S),   dJ_k/dmass[i, k] = g dJ_k/dp_s[i]

the box mean's weights turned toward the lowest cells: J_k is within tau log(1 / a_min) of the
least p_s (a_min the smallest normalised weight), and the box mean as tau grows.

temperature_850hPa (K): the box mean of T interpolated in log p to 850 hPa
(`meshops.interp_level_l2p`),

    J_k = sum_i a_i T850[i],  T850 = interp_level_l2p(p, T)

with the gradient by the adjoints of interp_level_l2p, exner, avg_i2l and sum_layers_from_top_l2i
(`temperature_adj`).

misfit (1): squared misfits to observations of the surface pressure (y_o at cell c_o and step
k_o, error s_o) and of the temperature (at cell c_o, layer l_o, step k_o),

    J = sum_o (p_s[c_o] - y_o)^2 / (2 s_o^2) + sum_o (T[c_o, l_o] - y_o)^2 / (2 s_o^2)

with dJ/dp_s[c] = (p_s - y_o) / s_o^2 and dJ/dT[c, l] = (T - y_o) / s_o^2 taken back to the state
by `surface_pressure_adj` and `temperature_adj`.

Observation files (netCDF; `write_observations`) hold one or both tables, each of its own
dimension: surface pressure (nObsSurfacePressure: `surface_pressure_cell` (1-based global index),
`surface_pressure_time` (s since the run's start), `surface_pressure` (Pa),
`surface_pressure_error` (Pa)) and temperature (nObsTemperature: `temperature_cell`,
`temperature_level` (1-based, 1 the lowest layer), `temperature_time`, `temperature` (K),
`temperature_error` (K)). Values a variable marks as missing are left out; any other impossible
value is refused in one line naming the file, the variable and the value
(`adjoint.costs.read_observation_table`).
"""
from __future__ import annotations

import math

import numpy as np

import meshops
from adjoint.costs import Context, CostError, ObservationTable, box_weights, read_observation_table
from meshops.device.backend import array_module, to_host

__all__ = ["KineticEnergyCost", "MinimumSurfacePressureCost", "ObservationCost",
           "SurfacePressureCost", "Temperature850Cost", "COST_UNITS", "OBSERVATION_TABLES",
           "SOFTNESS", "make_cost", "surface_pressure", "surface_pressure_adj", "temperature",
           "temperature_adj", "write_observations"]

#: The default softness (Pa) of the minimum_surface_pressure cost.
SOFTNESS = 100.0

#: The units of each cost kind (`sensitivity.cost.kind`).
COST_UNITS = {"surface_pressure": "Pa", "minimum_surface_pressure": "Pa", "kinetic_energy": "J m-2",
              "temperature_850hPa": "K", "misfit": "1"}


# -- column diagnostics and their adjoints ---------------------------------------------------------

def surface_pressure(mesh, mass, physics):
    """p_s = p_top + g sum_layers_from_top_l2i(mass)[0]: (n, N) -> (n,) (Pa)."""
    return (physics.p_top + physics.gravity * meshops.sum_layers_from_top_l2i(mesh, mass))[:, 0]


def surface_pressure_adj(mesh, mass, physics, g):
    """Adjoint of `surface_pressure` (linear in mass): column field g -> mass_adj[i, k] = g g[i]
    for every layer k (sum_layers_from_top_l2i_adj of g at the surface interface)."""
    xp = array_module(mass)
    g_i = xp.zeros((mass.shape[0], mass.shape[1] + 1), mass.dtype)
    g_i[:, 0] = g
    return physics.gravity * meshops.sum_layers_from_top_l2i_adj(mesh, g_i)


def temperature(mesh, mass, theta_mass, physics):
    """(p, theta, T) on layers: p = avg_i2l(p_top + g sum_layers_from_top_l2i(mass)), theta =
    theta_mass / mass, T = theta exner(p) (Pa, K, K), as the history's `pressure`, `theta` and
    `temperature`."""
    p_i = physics.p_top + physics.gravity * meshops.sum_layers_from_top_l2i(mesh, mass)
    p = meshops.avg_i2l(mesh, p_i)
    theta = theta_mass / mass
    return p, theta, theta * meshops.exner(mesh, p)


def temperature_adj(mesh, mass, theta_mass, physics, p_adj, T_adj):
    """(mass_adj, theta_mass_adj) of layer fields p_adj and T_adj given to (p, T) of
    `temperature`:

        theta_adj = T_adj exner(p),   p_adj += exner_adj(p, T_adj theta)
        theta_mass_adj = theta_adj / mass,   mass_adj = -theta_adj theta / mass
                         + g sum_layers_from_top_l2i_adj(avg_i2l_adj(p_adj))
    """
    p, theta, _ = temperature(mesh, mass, theta_mass, physics)
    theta_adj = T_adj * meshops.exner(mesh, p)
    p_adj = p_adj + meshops.exner_adj(mesh, p, T_adj * theta)
    mass_adj = (physics.gravity * meshops.sum_layers_from_top_l2i_adj(
        mesh, meshops.avg_i2l_adj(mesh, p_adj)) - theta_adj * theta / mass)
    return mass_adj, theta_adj / mass


# -- costs over a box ------------------------------------------------------------------------------

class _BoxCost:
    """The box and window of a box mean: `weights` a_i on the owned cells in the box (zero
    elsewhere), `local_weights` on the owned and halo cells, `rows` the owned cells in the box
    (a device index) and `steps`."""

    units = ""

    def __init__(self, context: Context, physics, box, window_hours, key: str):
        self.context, self.physics = context, physics
        self.local_weights, self.weights, self.steps = box_weights(context, "cell", box,
                                                                   window_hours, key)
        rows = np.flatnonzero(to_host(self.weights))
        self.rows = context.xp.asarray(rows)

    def _sum(self, column) -> float:
        """sum_i a_i column[i] over the box's owned cells of every rank, correctly rounded."""
        return self.context.exact_sum(to_host(self.weights[self.rows] * column[self.rows]))

    def _zero_halo(self, *fields):
        owned = self.context.owned
        for field, location in zip(fields, ("cell", "cell", "edge")):
            field[owned[location]:] = 0
        return list(fields)

    def _exchanged(self, state):
        """Copies of the state with valid halo rows (`Context.exchange`)."""
        copies = [x.copy() for x in state]
        self.context.exchange(*copies)
        return copies


class SurfacePressureCost(_BoxCost):
    """The area-weighted mean surface pressure in a box over a window (module docstring), Pa."""

    units = COST_UNITS["surface_pressure"]

    def value(self, k: int, state) -> float:
        if k not in self.steps:
            return 0.0
        return self._sum(surface_pressure(self.context.device_mesh, state[0], self.physics))

    def gradient(self, k: int, state):
        if k not in self.steps:
            return None
        mass, theta_mass, u = state
        xp = self.context.xp
        mass_adj = surface_pressure_adj(self.context.device_mesh, mass, self.physics,
                                        self.weights.astype(mass.dtype))
        return self._zero_halo(mass_adj, xp.zeros_like(theta_mass), xp.zeros_like(u))


class MinimumSurfacePressureCost(_BoxCost):
    """A smooth minimum of the surface pressure in a box over a window, softness `softness` (Pa)
    (module docstring), Pa."""

    units = COST_UNITS["minimum_surface_pressure"]

    def __init__(self, context: Context, physics, box, window_hours, softness: float, key: str):
        if not (np.isfinite(softness) and softness > 0):
            raise CostError(f"{key}.softness = {softness}: expected a positive pressure (Pa)")
        super().__init__(context, physics, box, window_hours, key)
        self.softness = float(softness)

    def _terms(self, mass):
        """(m, e_i on the box's owned cells, S) of the state's surface pressure."""
        p_s = surface_pressure(self.context.device_mesh, mass, self.physics)[self.rows]
        m = self.context.minimum(float(p_s.min()) if p_s.size else np.inf)
        e = self.context.xp.exp(-(p_s - m) / self.softness)
        return m, e, self.context.exact_sum(to_host(self.weights[self.rows] * e))

    def value(self, k: int, state) -> float:
        if k not in self.steps:
            return 0.0
        m, _, S = self._terms(state[0])
        n_w = len(self.steps)
        return (m - self.softness * math.log(n_w * S)) / n_w

    def gradient(self, k: int, state):
        if k not in self.steps:
            return None
        mass, theta_mass, u = state
        xp = self.context.xp
        _, e, S = self._terms(mass)
        g = xp.zeros(mass.shape[0], mass.dtype)
        g[self.rows] = self.weights[self.rows] * e / (len(self.steps) * S)
        mass_adj = surface_pressure_adj(self.context.device_mesh, mass, self.physics, g)
        return self._zero_halo(mass_adj, xp.zeros_like(theta_mass), xp.zeros_like(u))


class KineticEnergyCost(_BoxCost):
    """The area-weighted mean kinetic energy of layers `layers` = (k0, k1) (1-based, from the
    surface, both included) per unit area in a box over a window (module docstring), J m-2."""

    units = COST_UNITS["kinetic_energy"]

    def __init__(self, context: Context, physics, box, window_hours, layers, nlev: int, key: str):
        k0, k1 = layers
        if not (isinstance(k0, (int, np.integer)) and isinstance(k1, (int, np.integer))
                and 1 <= k0 <= k1 <= nlev):
            raise CostError(f"{key}.layers = {list(layers)}: expected 1 <= bottom <= top <= {nlev} "
                            "(1-based layers from the surface, vertical.nVertLevels)")
        super().__init__(context, physics, box, window_hours, key)
        self.levels = slice(int(k0) - 1, int(k1))

    def _ke(self, state):
        """(the exchanged state, ke_e2c of its u)."""
        state = self._exchanged(state)
        return state, meshops.ke_e2c(self.context.device_mesh, state[2])

    def value(self, k: int, state) -> float:
        if k not in self.steps:
            return 0.0
        (mass, _, _), ke = self._ke(state)
        return self._sum((mass[:, self.levels] * ke[:, self.levels]).sum(axis=1))

    def gradient(self, k: int, state):
        if k not in self.steps:
            return None
        (mass, theta_mass, u), ke = self._ke(state)
        xp, levels = self.context.xp, self.levels
        mass_adj, G = xp.zeros_like(mass), xp.zeros_like(mass)
        mass_adj[:, levels] = self.weights.astype(mass.dtype)[:, None] * ke[:, levels]
        G[:, levels] = self.local_weights.astype(mass.dtype)[:, None] * mass[:, levels]
        u_adj = meshops.ke_e2c_adj(self.context.device_mesh, u, G)
        return self._zero_halo(mass_adj, xp.zeros_like(theta_mass), u_adj)


class Temperature850Cost(_BoxCost):
    """The area-weighted mean 850 hPa temperature in a box over a window (module docstring), K."""

    units = COST_UNITS["temperature_850hPa"]

    def value(self, k: int, state) -> float:
        if k not in self.steps:
            return 0.0
        mesh = self.context.device_mesh
        p, _, T = temperature(mesh, state[0], state[1], self.physics)
        return self._sum(meshops.interp_level_l2p(mesh, p, T))

    def gradient(self, k: int, state):
        if k not in self.steps:
            return None
        mass, theta_mass, u = state
        mesh = self.context.device_mesh
        p, _, T = temperature(mesh, mass, theta_mass, self.physics)
        p_adj, T_adj = meshops.interp_level_l2p_adj(mesh, p, T, self.weights.astype(mass.dtype))
        mass_adj, theta_mass_adj = temperature_adj(mesh, mass, theta_mass, self.physics, p_adj,
                                                   T_adj)
        return self._zero_halo(mass_adj, theta_mass_adj, self.context.xp.zeros_like(u))


# -- observations ----------------------------------------------------------------------------------

#: The values an observation can take (its units): surface pressure from the deepest lows to
#: the strongest highs, temperature from the coldest stratosphere to the hottest surface. A file
#: in hPa or degrees Celsius falls outside them.
PLAUSIBLE = {"surface_pressure": (3.0e4, 1.1e5), "temperature": (150.0, 350.0)}


def _table(prefix: str, name: str, units: str, what: str, levels: int | None = None):
    expected = {f"{prefix}_cell": "a 1-based cell index"}
    if levels is not None:
        expected[f"{prefix}_level"] = "a 1-based layer"
    expected.update({f"{prefix}_time": "a finite time (s)", prefix: f"a finite {what} > 0 {units}",
                     f"{prefix}_error": f"a finite error > 0 {units}"})
    unit_of = {f"{prefix}_cell": "", f"{prefix}_level": "", f"{prefix}_time": " s",
               prefix: f" {units}", f"{prefix}_error": f" {units}"}
    return ObservationTable(
        f"{prefix}_cell", f"{prefix}_time",
        {prefix: f"a {what} > 0 {units}", f"{prefix}_error": f"a positive observation error ({units})"},
        expected, unit_of, dimension=name,
        indices=None if levels is None else {f"{prefix}_level": (levels, "layer (1: the lowest)")},
        plausible={prefix: PLAUSIBLE[prefix]})


def observation_tables(nlev: int) -> dict:
    """{value variable: `adjoint.costs.ObservationTable`} of the hydrostatic observation files."""
    return {"surface_pressure": _table("surface_pressure", "nObsSurfacePressure", "Pa",
                                       "surface pressure"),
            "temperature": _table("temperature", "nObsTemperature", "K", "temperature", nlev)}


#: The tables' value variables and time variables (the config's check of observation times).
OBSERVATION_TABLES = {"surface_pressure": "surface_pressure_time", "temperature": "temperature_time"}


class ObservationCost:
    """The squared misfit of the surface pressure and the temperature to the observations of a
    netCDF file (module docstring), a number (units 1)."""

    units = COST_UNITS["misfit"]

    def __init__(self, context: Context, physics, nlev: int, path,
                 key: str = "sensitivity.cost.observations"):
        import netCDF4

        self.context, self.physics = context, physics
        try:
            with netCDF4.Dataset(path) as ds:
                present = [name for name in OBSERVATION_TABLES if name in ds.variables]
        except OSError as exc:
            raise CostError(f"{key} = {str(path)!r}: cannot open the observation file: "
                            f"{exc}") from None
        if not present:
            raise CostError(f"{path}: neither variable 'surface_pressure' nor 'temperature' (expected "
                            "one or both observation tables: surface_pressure_cell, _time, "
                            "surface_pressure, surface_pressure_error; temperature_cell, _level, "
                            "_time, temperature, temperature_error)")
        tables = observation_tables(nlev)
        lookup = {int(g): i for i, g in enumerate(context.global_cells[:context.owned["cell"]])}
        self.obs, steps = {}, set()
        for name in present:
            kept = read_observation_table(path, context, key, tables[name])
            step = np.rint(kept[f"{name}_time"] / context.dt).astype(np.int64)
            steps.update(int(s) for s in step)
            mine = np.array([int(c) in lookup for c in kept[f"{name}_cell"]], dtype=bool)
            self.obs[name] = dict(
                cell=np.array([lookup[int(c)] for c in kept[f"{name}_cell"][mine]], dtype=np.int64),
                level=kept[f"{name}_level"][mine] if name == "temperature" else None,
                step=step[mine], value=kept[name][mine],
                inverse_variance=1.0 / kept[f"{name}_error"][mine] ** 2)
        self.steps = frozenset(steps)

    def _innovations(self, k, state):
        """{table: (rows of its observations at step k, model minus observed)} on this rank."""
        mass, theta_mass, _ = state
        mesh, out = self.context.device_mesh, {}
        for name, obs in self.obs.items():
            rows = np.flatnonzero(obs["step"] == k)
            if not rows.size:
                continue
            if name == "surface_pressure":
                model = to_host(surface_pressure(mesh, mass, self.physics))[obs["cell"][rows]]
            else:
                T = to_host(temperature(mesh, mass, theta_mass, self.physics)[2])
                model = T[obs["cell"][rows], obs["level"][rows]]
            out[name] = rows, model.astype(np.float64) - obs["value"][rows]
        return out

    def value(self, k: int, state) -> float:
        if k not in self.steps:
            return 0.0
        terms = [0.5 * d * d * self.obs[name]["inverse_variance"][rows]
                 for name, (rows, d) in self._innovations(k, state).items()]
        return self.context.exact_sum(np.concatenate(terms) if terms else [])

    def gradient(self, k: int, state):
        if k not in self.steps:
            return None
        mass, theta_mass, u = state
        xp, mesh = self.context.xp, self.context.device_mesh
        mass_adj, theta_mass_adj = xp.zeros_like(mass), xp.zeros_like(theta_mass)
        for name, (rows, d) in self._innovations(k, state).items():
            obs = self.obs[name]
            if name == "surface_pressure":
                g = np.zeros(mass.shape[0])
                np.add.at(g, obs["cell"][rows], d * obs["inverse_variance"][rows])
                mass_adj += surface_pressure_adj(mesh, mass, self.physics,
                                                 xp.asarray(g, dtype=mass.dtype))
            else:
                g = np.zeros(mass.shape)
                np.add.at(g, (obs["cell"][rows], obs["level"][rows]),
                          d * obs["inverse_variance"][rows])
                m_adj, t_adj = temperature_adj(mesh, mass, theta_mass, self.physics,
                                               xp.zeros_like(mass), xp.asarray(g, dtype=mass.dtype))
                mass_adj += m_adj
                theta_mass_adj += t_adj
        owned = self.context.owned
        mass_adj[owned["cell"]:] = 0
        theta_mass_adj[owned["cell"]:] = 0
        return [mass_adj, theta_mass_adj, xp.zeros_like(u)]


def write_observations(path, surface_pressure=None, temperature=None) -> None:
    """An observation file, atomically: `surface_pressure` = (cell, time, value, error) and
    `temperature` = (cell, level, time, value, error), cells and levels 0-based given (written
    1-based), either table None to leave it out."""
    from grids.atomic import atomic_path
    from grids.netcdf_files import dataset

    specs = {"surface_pressure": (("cell", "i4", "1", "observed cell (1-based index)"),
                                  ("time", "f8", "s", "seconds since the start of the run"),
                                  (None, "f8", "Pa", "observed surface pressure"),
                                  ("error", "f8", "Pa", "observation error standard deviation")),
             "temperature": (("cell", "i4", "1", "observed cell (1-based index)"),
                             ("level", "i4", "1", "observed layer (1-based, 1: the lowest)"),
                             ("time", "f8", "s", "seconds since the start of the run"),
                             (None, "f8", "K", "observed temperature"),
                             ("error", "f8", "K", "observation error standard deviation"))}
    dims = {"surface_pressure": "nObsSurfacePressure", "temperature": "nObsTemperature"}
    with atomic_path(path) as tmp:
        with dataset(tmp, "w") as ds:
            for name, table in (("surface_pressure", surface_pressure), ("temperature", temperature)):
                if table is None:
                    continue
                ds.createDimension(dims[name], len(table[0]))
                for (suffix, dtype, units, text), values in zip(specs[name], table):
                    values = np.asarray(values)
                    if suffix in ("cell", "level"):
                        values = values + 1
                    var = ds.createVariable(name if suffix is None else f"{name}_{suffix}", dtype,
                                            (dims[name],))
                    var[:] = values
                    var.units, var.long_name = units, text


def make_cost(context: Context, physics, nlev: int, cost_config, key: str = "sensitivity.cost"):
    """The cost of a `hydrostatic.applications.CostConfig`."""
    if cost_config.kind == "misfit":
        return ObservationCost(context, physics, nlev, cost_config.observations,
                               f"{key}.observations")
    box = (tuple(cost_config.box.lat), tuple(cost_config.box.lon))
    if cost_config.kind == "kinetic_energy":
        return KineticEnergyCost(context, physics, box, cost_config.window_hours,
                                 tuple(cost_config.layers or (1, nlev)), nlev, key)
    if cost_config.kind == "minimum_surface_pressure":
        return MinimumSurfacePressureCost(context, physics, box, cost_config.window_hours,
                                          cost_config.softness or SOFTNESS, key)
    kind = {"surface_pressure": SurfacePressureCost, "temperature_850hPa": Temperature850Cost}
    return kind[cost_config.kind](context, physics, box, cost_config.window_hours, key)
