"""The hydrostatic core against a peer: Jablonowski and Williamson (2006, QJRMS 132, 2943; JW06)
baroclinic wave and steady state, our core (`hydrostatic/`) beside dinosaur (NeuralGCM's JAX
spectral primitive-equation core, https://github.com/neuralgcm/dinosaur), both in float64 on
JW06's 26 CAM3 hybrid levels. Each subcommand writes one small .npz into --out; `table` reads them
all and prints Markdown. dinosaur is imported here only (never by the package).

On one H200 (JAX CUDA and CuPy), in two device calls (each well inside 10 minutes; estimates, not
yet measured: the reference about 4 minutes, our runs about 5, meshes generated on the way; level 8
would need 8640 steps, past one call):

    python benchmarks/jw06_validation.py reference --truncation 170 --days 9 --out $OUT/jw06 &&
    python benchmarks/jw06_validation.py reference --truncation 170 --days 30 --case jw06_steady --out $OUT/jw06

    for L in 5 6 7; do python benchmarks/jw06_validation.py model --level $L --days 9 --backend cupy --out $OUT/jw06 || exit 1; done &&
    python benchmarks/jw06_validation.py model --level 5 --days 30 --case jw06_steady --backend cupy --out $OUT/jw06

then, anywhere (NumPy only), on the files of both calls gathered in one directory:

    python benchmarks/jw06_validation.py table --out jw06

The steady state at levels 5-7 over 30 days, each kinetic energy's form, the departure's zonal
spectrum, and the figure of l2 against time (decision 0030):

    python benchmarks/jw06_validation.py model --level L --days 30 --case jw06_steady --backend cupy --kinetic-energy K --out $OUT/jw06
    python benchmarks/jw06_validation.py model --level 6 --days 9 --backend cupy --rotation 45 --out $OUT/jw06
    python benchmarks/jw06_validation.py table --out jw06 --figure jw06_steady_l2.png

On a CPU, small: `reference --truncation 21 --days 0.5`, `model --level 3 --days 0.5 --backend
numpy`, `table` (tests/benchmarks/test_jw06_validation.py runs these).

reference: dinosaur's `PrimitiveEquationsHybrid` (Simmons and Burridge 1981 vertical
discretisation) on JW06's 26 hybrid levels (`hydrostatic.levels`, the same A and B as our core:
dinosaur has hybrid levels, so no sigma stand-in is needed), its JW06 steady state
(`steady_state_jw`, with our core's parameters passed explicitly) with the balancing surface
geopotential (truncated spectrally) and, for the wave, `baroclinic_perturbation_jw` with our
perturbation (1 m/s, radius a / 10, at (20E, 40N): `hydrostatic.testcases.U_P, LON_C, LAT_C`), JW06's
constants (a = 6371229 m, Omega = 7.29212e-5 s-1, R = 287, cp = 1004.5, g = 9.80616), the IMEX
SIL3 Runge-Kutta step, dt = 300 s at T170 (`default_dt`), and a del4 diffusion of vorticity,
divergence and temperature applied after each step as the exact decay of each spherical harmonic,
exp(-K4 (n (n + 1) / a^2)^2 dt), with CAM3 EUL's coefficient K4 for the truncation (`CAM_K4`:
1.5e14 m4 s-1 at T170; `--filter exponential` uses dinosaur's own exponential filter instead).
Surface pressure is evaluated spectrally (the truncated series, exactly) on the common grid.

model: our core in-process as `hydrostatic.driver.setup` builds it for one process (Lloyd-100
mesh from the mesh cache, dt = 720 s * 2^(5 - level), visc4 = 5e15 * 2^(-3.2 (level - 5)) m4 s-1,
the shipped configs' values), stepped with no history; it synchronises only at the daily records.
Surface pressure goes to the common grid by linear (barycentric, gnomonic) interpolation on the
Delaunay triangles of the cell centres (each triangle the three cells around a mesh vertex,
`cellsOnVertex`). Per record: total mass sum(areaCell mass) and total energy

    E = sum_i areaCell_i [ sum_k mass_ik (K_ik + cp T_ik) + p_s,i phi_s,i / g ]

(K = ke_e2c(u), T = theta exner(p): the hydrostatic energy with a constant-pressure top in its
enthalpy form, Dubos et al. 2015, GMD 8, 3131, as dinosaur's tests check theirs); the wave's
relative drift of E reports what RK4 and the hyperviscosity remove (without hyperviscosity, level 4,
one day: about 2e-10 whatever dt, 1440 to 360 s: the semi-discrete budget of this E is closed to
that, not to round-off).

Common grid: 1 degree, longitudes 0..359 E, latitudes -89.5..89.5 (180 x 360), weighted by
cos(lat). Steady state (JW06 section 5): the zonal mean of the zonal wind on each model level, u_bar
(lat, level, t), against its own t = 0 value:

    l2(t) = sqrt( sum_j,k (u_bar(t) - u_bar(0))^2 cos(lat_j) d_eta_k / sum_j,k cos(lat_j) d_eta_k )
    linf(t) = max_j,k |u_bar(t) - u_bar(0)|,   d_eta_k = dA_k / p0 + dB_k

(our cells' zonal wind from `reconstruct_zonal_meridional_e2c`, interpolated to the grid as p_s;
dinosaur's from its modal u cos(lat), evaluated on the grid).
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib
import resource
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from hydrostatic import levels, testcases  # noqa: E402
from hydrostatic.terms import KINETIC_ENERGIES  # noqa: E402
from meshops.operators.vertical import CP_DRY, R_DRY  # noqa: E402
from framework.constants import DAY, EARTH_RADIUS, GRAVITY  # noqa: E402

CASES = ("jw06_baroclinic", "jw06_steady")
#: Days whose surface pressure is kept (the last day of a run always is).
PS_DAYS = (7.0, 8.0, 9.0)
#: The common grid: 1-degree longitudes 0..359 and latitudes -89.5..89.5.
LON = np.arange(360.0)
LAT = np.arange(180.0) - 89.5
#: CAM3 EUL's default del4 coefficients (m4 s-1) by truncation, which JW06's EUL runs used (to be
#: verified against JW06's table of model parameters); other truncations: 1e15 (85 / T)^log2(10).
CAM_K4 = {42: 1.0e16, 85: 1.0e15, 170: 1.5e14, 340: 1.5e13}
#: Our core's level-5 time step (s) and hyperviscosity (m4 s-1), and the exponent of its scaling.
DT_L5, VISC4_L5, VISC4_EXPONENT = 720.0, 5.0e15, 3.2
#: JW06's figures as remembered, NOT verified against the paper (QJRMS 132, 2943-2975).
PUBLISHED = {
    "ps_uncertainty": "JW06 section 6 (reference-solution uncertainty, l2 of day-9 p_s differences "
                      "between their high-resolution runs): about 0.5-1 hPa [to be verified]",
    "steady_l2": "JW06 section 5, steady-state l2(u) figure: the spectral cores (EUL, SLD) stay "
                 "near 1e-3 m/s to day 30, FV and the icosahedral GME of order 0.1-1 m/s, GME's "
                 "growing with its wavenumber-5 grid imprint [to be verified]",
}


def record_days(days: float) -> list[float]:
    """The record times (days): each whole day up to `days`, and `days` itself."""
    out = [float(d) for d in range(1, int(math.floor(days + 1e-9)) + 1)]
    return out if out and abs(out[-1] - days) < 1e-9 else out + [float(days)]


def level_defaults(level: int) -> tuple[float, float]:
    """(dt in s, visc4 in m4 s-1) of our core at mesh `level`, scaled from level 5's as
    configs/jw06_baroclinic_l9_gpu.yaml scales them: dt with the cell size, visc4 with its 3.2th power."""
    return DT_L5 * 2.0 ** (5 - level), VISC4_L5 * 2.0 ** (-VISC4_EXPONENT * (level - 5))


def steps_of(span_days: float, dt: float, what: str) -> int:
    n = span_days * DAY / dt
    if abs(n - round(n)) > 1e-9 * max(n, 1.0) or round(n) < 1:
        raise ValueError(f"--dt = {dt}: expected a divisor of {span_days:g} days "
                         f"({span_days * DAY:g} s) for the {what} records")
    return int(round(n))


def eta_thickness() -> np.ndarray:
    """d_eta of each layer at p_s = p0, from the surface up (our core's order)."""
    A, B = levels.coefficients("jw06_26")
    return (A[:-1] - A[1:]) / levels.P0 + (B[:-1] - B[1:])


def area_mean(field):
    """The cos(lat)-weighted mean of a (lat, lon) field on the common grid."""
    w = np.cos(np.radians(LAT))
    return float((np.asarray(field).mean(axis=-1) * w).sum() / (w.sum()))


def steady_norms(u_bar, u_bar0, d_eta):
    """(l2, linf) of the zonal-mean zonal wind u_bar (lat, level) against u_bar0 (module doc)."""
    w = np.cos(np.radians(LAT))[:, None] * d_eta[None, :]
    d = u_bar - u_bar0
    return math.sqrt(float((w * d ** 2).sum() / w.sum())), float(np.abs(d).max())


def zonal_spectrum(u_grid, band=(30.0, 60.0)):
    """Amplitude (m/s) of each zonal wavenumber 0..180 of a zonal wind (departure) on the common
    grid (lat, lon, level), rms over the latitudes of `band` in both hemispheres and over levels."""
    rows = (np.abs(LAT) >= band[0]) & (np.abs(LAT) <= band[1])
    amplitude = 2 * np.abs(np.fft.rfft(u_grid[rows], axis=1)) / LON.size     # (lat, k, level)
    return np.sqrt((amplitude ** 2).mean(axis=(0, 2)))


def leading_wavenumbers(spectrum, count=3):
    """The `count` zonal wavenumbers >= 1 of largest amplitude, with their amplitudes."""
    k = 1 + np.argsort(spectrum[1:])[::-1][:count]
    return ", ".join(f"{int(n)}: {spectrum[n]:.1e}" for n in k)


def write(out: pathlib.Path, name: str, meta: dict, arrays: dict) -> pathlib.Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.npz"
    np.savez_compressed(path, meta=np.array(json.dumps(meta)), **arrays)
    print(f"wrote {path}: " + ", ".join(f"{k} {v}" for k, v in meta.items()
                                       if isinstance(v, (int, float, str))), flush=True)
    return path


# -- reference: dinosaur ------------------------------------------------------------------------

def default_dt(truncation: int) -> float:
    """The largest divisor of 3600 s at most 51000 / T s (300 s at T170, 600 s at T85)."""
    return float(max(d for d in range(1, 3601) if 3600 % d == 0 and d <= 51000.0 / truncation))


def cam_k4(truncation: int) -> float:
    return CAM_K4.get(truncation, 1.0e15 * (85.0 / truncation) ** math.log2(10.0))


def dinosaur_setup(truncation: int, case: str = "jw06_baroclinic", dt: float | None = None,
                   filter: str = "del4", k4: float | None = None) -> dict:
    """dinosaur's JW06 set-up (module doc) at truncation T: a dict of jax, specs, units (U), grid,
    state (the initial modal state), orography, equation, dt_s, step (the filtered IMEX SIL3 step)
    and filter_text. Turns on JAX's float64."""
    import jax
    jax.config.update("jax_enable_x64", True)
    from dinosaur import (coordinate_systems, filtering, hybrid_coordinates, primitive_equations,
                          primitive_equations_states, scales, spherical_harmonic, time_integration,
                          units, xarray_utils)

    import dinosaur
    if not hasattr(primitive_equations, "PrimitiveEquationsHybrid"):
        raise ValueError(f"dinosaur {getattr(dinosaur, '__version__', '(version unknown)')}: expected "
                         "one with PrimitiveEquationsHybrid (hybrid levels; written against 1.5.1)")
    U = scales.units
    specs = units.SimUnits.from_si(radius_si=EARTH_RADIUS * U.m,
                                   angular_velocity_si=testcases.OMEGA_JW / U.s,
                                   gravity_acceleration_si=GRAVITY * U.m / U.s ** 2,
                                   ideal_gas_constant_si=R_DRY * U.J / U.kilogram / U.degK,
                                   kappa_si=(R_DRY / CP_DRY) * U.dimensionless)
    T = truncation
    grid = spherical_harmonic.Grid.construct(T, math.ceil((3 * T + 1) / 4), radius=specs.radius)
    hyai, hybi = np.asarray(levels.HYAI_26), np.asarray(levels.HYBI_26)    # top down, as dinosaur's
    vertical = hybrid_coordinates.HybridCoordinates(a_boundaries=hyai * levels.P0 / 100.0,  # hPa
                                                    b_boundaries=hybi)
    coords = coordinate_systems.CoordinateSystem(grid, vertical)
    state_fn, aux = primitive_equations_states.steady_state_jw(
        coords, specs, u0=testcases.U_0 * U.m / U.s, p0=levels.P0 * U.pascal,
        t0=testcases.T_0 * U.degK, delta_t=testcases.DELTA_T * U.degK,
        gamma=testcases.LAPSE * U.degK / U.m, eta_tropo=testcases.ETA_T, eta0=testcases.ETA_0)
    state = state_fn()
    if case == "jw06_baroclinic":
        state = state + primitive_equations_states.baroclinic_perturbation_jw(
            coords, specs, u_perturb=testcases.U_P * U.m / U.s, lon_location=testcases.LON_C,
            lat_location=testcases.LAT_C, perturbation_radius=0.1)
    orography = primitive_equations.truncated_modal_orography(aux[xarray_utils.OROGRAPHY], coords)
    equation = primitive_equations.PrimitiveEquationsHybrid(
        aux[xarray_utils.REF_TEMP_KEY], orography, coords, specs,
        reference_surface_pressure=levels.P0 * U.pascal)
    dt_s = dt or default_dt(T)
    dt = specs.nondimensionalize(dt_s * U.s)
    if filter == "del4":
        k4 = k4 or cam_k4(T)
        decay = filtering.horizontal_diffusion_filter(
            grid, dt * specs.nondimensionalize(k4 * U.m ** 4 / U.s), order=2)

        def diffuse(_, new):
            return new.replace(vorticity=decay(new.vorticity), divergence=decay(new.divergence),
                               temperature_variation=decay(new.temperature_variation))
        filters, filter_text = [diffuse], f"del4 K4 {k4:.3g} m4 s-1 on vorticity, divergence, T"
    else:
        filters = [time_integration.exponential_step_filter(grid, dt)]
        filter_text = "dinosaur exponential_step_filter (defaults)"
    step = time_integration.step_with_filters(time_integration.imex_rk_sil3(equation, dt), filters)
    return dict(jax=jax, specs=specs, U=U, grid=grid, state=state, orography=orography,
                equation=equation, dt_s=dt_s, step=step, filter_text=filter_text)


def reference(args) -> int:
    t_start = time.perf_counter()
    d = dinosaur_setup(args.truncation, args.case, args.dt, args.filter, args.k4)
    from dinosaur import spherical_harmonic, time_integration
    jax, specs, U, grid, state, orography, equation, dt_s, step, filter_text = (
        d[k] for k in ("jax", "specs", "U", "grid", "state", "orography", "equation", "dt_s",
                       "step", "filter_text"))
    T = args.truncation
    hyai, hybi = np.asarray(levels.HYAI_26), np.asarray(levels.HYBI_26)
    on_grid = spherical_harmonic.Grid(                 # the same series evaluated on the common grid
        longitude_wavenumbers=grid.longitude_wavenumbers, total_wavenumbers=grid.total_wavenumbers,
        longitude_nodes=LON.size, latitude_nodes=LAT.size, latitude_spacing="equiangular",
        radius=specs.radius)
    assert np.allclose(np.degrees(on_grid.latitudes), LAT)
    assert np.allclose(np.degrees(on_grid.longitudes), LON)

    lon_n, sin_lat_n = grid.nodal_axes
    lon_n, lat_n = np.degrees(lon_n), np.degrees(np.arcsin(sin_lat_n))
    ps_scale = specs.dimensionalize(1.0, U.pascal).magnitude
    wind_scale = specs.dimensionalize(1.0, U.m / U.s).magnitude
    phi_s = specs.g * np.asarray(grid.to_nodal(orography))
    da, db = np.diff(equation.nondim_levels.a_boundaries), np.diff(hybi)
    d_eta = (np.diff(hyai) + db)[::-1]                     # surface up, as `eta_thickness`
    assert np.allclose(d_eta, eta_thickness())

    @jax.jit
    def diagnostics(s):
        """(ps nodal, ps on the common grid, zonal u on the common grid, mass, energy)."""
        ps = jax.numpy.exp(grid.to_nodal(s.log_surface_pressure))[0]
        ps_grid = jax.numpy.exp(on_grid.to_nodal(s.log_surface_pressure))[0]
        u_cos, _ = spherical_harmonic.get_cos_lat_vector(s.vorticity, s.divergence, grid)
        u_grid = on_grid.to_nodal(u_cos) / on_grid.cos_lat
        u, v = spherical_harmonic.vor_div_to_uv_nodal(grid, s.vorticity, s.divergence)
        temperature = grid.to_nodal(s.temperature_variation) + equation.T_ref
        dp = da[:, None, None] + db[:, None, None] * ps
        energy = grid.integrate((dp * (0.5 * (u ** 2 + v ** 2) + specs.Cp * temperature)).sum(0)
                                + ps * phi_s)
        return ps, ps_grid, u_grid, grid.integrate(ps), energy

    t_setup = time.perf_counter()
    days = record_days(args.days)
    spans = np.diff([0.0] + days)
    runs = {}
    t_compile = 0.0
    for n in sorted({steps_of(span, dt_s, "record") for span in spans}):
        t0 = time.perf_counter()
        runs[n] = jax.jit(time_integration.repeated(step, n)).lower(state).compile()
        t_compile += time.perf_counter() - t0

    def record(s):
        ps, ps_grid, u_grid, mass, energy = (np.asarray(x) for x in diagnostics(s))
        u_bar = (u_grid.mean(axis=1).T * wind_scale)[:, ::-1]      # (lat, level from the surface)
        u_grid = np.transpose(u_grid, (2, 1, 0)) * wind_scale     # (lat, lon, level)
        return ps * ps_scale, ps_grid.T * ps_scale, u_bar, float(mass), float(energy), u_grid

    ps, _, u_bar0, mass0, energy0, u_grid0 = record(state)
    out = dict(days=[], ps_min=[], ps_min_lon=[], ps_min_lat=[], ps_max=[], mass_change=[],
               energy_drift=[], u_l2=[], u_linf=[], u_spectrum=[], ps_days=[], ps=[])
    stepping = 0.0
    for day, span in zip(days, spans):
        t0 = time.perf_counter()
        state = jax.block_until_ready(runs[steps_of(span, dt_s, "record")](state))
        stepping += time.perf_counter() - t0
        ps, ps_grid, u_bar, mass, energy, u_grid = record(state)
        spectrum = zonal_spectrum(u_grid - u_grid0)
        if not np.all(np.isfinite(ps)):
            raise FloatingPointError(f"reference T{T}: surface pressure not finite at day {day:g}")
        i, j = np.unravel_index(np.argmin(ps), ps.shape)
        l2, linf = steady_norms(u_bar, u_bar0, d_eta)
        for key, value in (("days", day), ("ps_min", ps[i, j]), ("ps_min_lon", lon_n[i]),
                           ("ps_min_lat", lat_n[j]), ("ps_max", ps.max()),
                           ("mass_change", mass / mass0 - 1.0),
                           ("energy_drift", energy / energy0 - 1.0), ("u_l2", l2), ("u_linf", linf),
                           ("u_spectrum", spectrum)):
            out[key].append(value if key == "u_spectrum" else float(value))
        if day in PS_DAYS or day == days[-1]:
            out["ps_days"].append(day)
            out["ps"].append(ps_grid)
        print(f"  day {day:g}: min p_s {ps[i, j] / 100:.2f} hPa at ({lon_n[i]:.1f}E, {lat_n[j]:.1f}N), "
              f"l2(u) {l2:.3e} m/s", flush=True)
    stats = jax.devices()[0].memory_stats() or {}
    steps = int(sum(steps_of(span, dt_s, "record") for span in spans))
    meta = dict(kind="reference", model=f"dinosaur T{T}", case=args.case, truncation=T,
                grid=f"{grid.longitude_nodes}x{grid.latitude_nodes} Gaussian", levels="jw06_26 hybrid",
                dt=dt_s, steps=steps, run_days=args.days, filter=filter_text, dtype="float64",
                device=str(jax.devices()[0]), setup_s=round(t_setup - t_start, 2),
                compile_s=round(t_compile, 2), stepping_s=round(stepping, 2),
                wall_s=round(time.perf_counter() - t_start, 2),
                peak_bytes=int(stats.get("peak_bytes_in_use", 0)) or None)
    arrays = {k: np.asarray(v) for k, v in out.items()}
    write(pathlib.Path(args.out), f"reference_T{T}_{args.case}", meta, arrays)
    return 0


# -- model: our core ----------------------------------------------------------------------------

def unit_vectors(lat, lon):
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)


def triangle_weights(mesh, lon_deg, lat_deg, candidates: int = 6):
    """(cells (n, 3), weights (n, 3)) of linear interpolation from cell centres to the points
    (lon, lat in degrees, flattened): the Delaunay triangle of cell centres holding each point (the
    cells around a mesh vertex, `cellsOnVertex`) and the point's barycentric coordinates in it,
    after the gnomonic projection onto the triangle's plane (w solves sum_j w_j X_j = s p, the X_j
    its corners, then scaled to sum 1). The triangle is found among the `candidates` whose
    centroids are nearest to the point."""
    from scipy.spatial import cKDTree

    tri = np.asarray(mesh.cellsOnVertex)
    if tri.shape[1] != 3 or (tri < 0).any():
        raise ValueError("mesh: expected every vertex to have three cells (a closed Voronoi mesh)")
    corners = unit_vectors(mesh.latCell, mesh.lonCell)
    centroids = corners[tri].sum(axis=1)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    points = unit_vectors(np.radians(lat_deg), np.radians(lon_deg))
    _, near = cKDTree(centroids).query(points, k=candidates)
    X = np.swapaxes(corners[tri[near]], -1, -2)                  # (n, k, xyz, corner)
    w = np.linalg.solve(X, np.broadcast_to(points[:, None, :, None], X.shape[:-1] + (1,)))[..., 0]
    w /= w.sum(axis=-1, keepdims=True)
    best = w.min(axis=-1).argmax(axis=-1)
    rows = np.arange(points.shape[0])
    w, cells = w[rows, best], tri[near[rows, best]]
    if w.min() < -1e-9:
        raise RuntimeError(f"no triangle among the {candidates} nearest holds a point of the grid "
                           f"(smallest weight {w.min():.2e})")
    return cells, w


def model(args) -> int:
    import meshops
    from grids.cache import cached_icosahedral
    from meshops.device.backend import to_host
    from hydrostatic.dynamics import Physics, column_diagnostics
    from hydrostatic.model import Model

    t_start = time.perf_counter()
    if args.backend == "cupy":
        import cupy as xp
    else:
        xp = np
    dtype, L = np.dtype(args.dtype), args.level
    mesh = cached_icosahedral(L, lloyd_iterations=args.lloyd, sphere_radius=EARTH_RADIUS,
                              level_key="--level")
    A, B = levels.coefficients("jw06_26")
    init = testcases.initial_state(mesh, args.case, A, B, args.rotation)
    dt, visc4 = level_defaults(L)
    dt, visc4 = args.dt or dt, visc4 if args.visc4 is None else args.visc4
    physics = Physics(p_top=float(A[-1]), dB=xp.asarray(B[:-1] - B[1:], dtype=dtype),
                      gravity=GRAVITY, visc4=visc4, visc4_theta=args.visc4_theta_ratio * visc4,
                      kinetic_energy=args.kinetic_energy)
    on = lambda a: xp.asarray(np.asarray(a, dtype=dtype))          # noqa: E731
    m = Model(mesh, on(init.mass), on(init.theta_mass), on(init.u), on(init.phi_s),
              on(init.f_vertex), dt, physics)
    dm = m.device_mesh
    area = xp.asarray(mesh.areaCell, dtype=np.float64)
    lon_g, lat_g = testcases.unrotated_coordinates(*np.radians(np.meshgrid(LON, LAT)), args.rotation)
    cells, weights = triangle_weights(mesh, np.degrees(lon_g).ravel(), np.degrees(lat_g).ravel())
    east, north = (xp.asarray(c[:, None], dtype=dtype)
                   for c in testcases.tilted_east(mesh.lonCell, mesh.latCell, args.rotation))

    def to_grid(field):
        """A cell field (cells, ...) on the common grid (lat, lon, ...)."""
        return (field[cells] * weights.reshape(weights.shape + (1,) * (field.ndim - 1))).sum(
            axis=1).reshape(LAT.size, LON.size, *field.shape[1:])

    def record():
        d = column_diagnostics(dm, m.mass, m.theta_mass, m.phi_s, m.physics)
        temperature = d["theta"] * meshops.exner(dm, d["p"])
        column = (m.mass * (meshops.ke_e2c(dm, m.u) + CP_DRY * temperature)).sum(axis=1)
        energy = float((area * (column.astype(np.float64)
                                + (d["p_i"][:, 0] * m.phi_s).astype(np.float64) / GRAVITY)).sum())
        mass = float((area[:, None] * m.mass.astype(np.float64)).sum())
        zonal, meridional = meshops.reconstruct_zonal_meridional_e2c(dm, m.u)
        zonal = east * zonal + north * meridional                  # the test frame's zonal wind
        ps = to_host(d["p_i"][:, 0]).astype(np.float64)
        u_grid = to_grid(to_host(zonal).astype(np.float64))                  # (lat, lon, level)
        return ps, u_grid, mass, energy

    ps, u_grid0, mass0, energy0 = record()
    u_bar0 = u_grid0.mean(axis=1)
    d_eta = eta_thickness()
    t_setup = time.perf_counter()
    out = dict(days=[], ps_min=[], ps_min_lon=[], ps_min_lat=[], ps_max=[], mass_change=[],
               energy_drift=[], u_l2=[], u_linf=[], u_spectrum=[], ps_days=[], ps=[])
    days = record_days(args.days)
    stepping, steps = 0.0, 0
    for day, span in zip(days, np.diff([0.0] + days)):
        n = steps_of(span, dt, "record")
        t0 = time.perf_counter()
        for _ in range(n):
            m.step()
        ps, u_grid, mass, energy = record()                # synchronises
        u_bar, spectrum = u_grid.mean(axis=1), zonal_spectrum(u_grid - u_grid0)
        stepping += time.perf_counter() - t0
        steps += n
        if not np.all(np.isfinite(ps)):
            raise FloatingPointError(f"model level {L}: surface pressure not finite at day {day:g}")
        i = int(np.argmin(ps))
        lon_min, lat_min = testcases.rotated_coordinates(mesh.lonCell[i], mesh.latCell[i],
                                                         args.rotation)
        l2, linf = steady_norms(u_bar, u_bar0, d_eta)
        for key, value in (("days", day), ("ps_min", ps[i]),
                           ("ps_min_lon", np.degrees(lon_min) % 360.0), ("ps_min_lat", np.degrees(lat_min)), ("ps_max", ps.max()),
                           ("mass_change", mass / mass0 - 1.0),
                           ("energy_drift", energy / energy0 - 1.0), ("u_l2", l2), ("u_linf", linf),
                           ("u_spectrum", spectrum)):
            out[key].append(value if key == "u_spectrum" else float(value))
        if day in PS_DAYS or day == days[-1]:
            out["ps_days"].append(day)
            out["ps"].append(to_grid(ps))
        print(f"  day {day:g}: min p_s {ps[i] / 100:.2f} hPa at ({out['ps_min_lon'][-1]:.1f}E, "
              f"{out['ps_min_lat'][-1]:.1f}N), mass {mass / mass0 - 1:+.1e}, energy "
              f"{energy / energy0 - 1:+.2e}, l2(u) {l2:.3e} m/s, leading zonal wavenumbers "
              f"{leading_wavenumbers(spectrum)}", flush=True)
    if xp is np:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        device = "CPU (NumPy)"
    else:
        peak = xp.get_default_memory_pool().total_bytes()
        device = xp.cuda.runtime.getDeviceProperties(xp.cuda.Device().id)["name"].decode()
    meta = dict(kind="model", model=f"meshops level {L}", case=args.case, level=L,
                cells=int(mesh.nCells), lloyd=args.lloyd, levels="jw06_26 hybrid", dt=dt,
                steps=steps, run_days=args.days, visc4=visc4,
                visc4_theta=args.visc4_theta_ratio * visc4, kinetic_energy=args.kinetic_energy,
                rotation=args.rotation,
                backend=args.backend, dtype=args.dtype,
                device=device, setup_s=round(t_setup - t_start, 2), stepping_s=round(stepping, 2),
                wall_s=round(time.perf_counter() - t_start, 2), peak_bytes=int(peak))
    arrays = {k: np.asarray(v) for k, v in out.items()}
    variant = "".join(f"_{tag}" for tag, default in (
        (args.kinetic_energy, args.kinetic_energy == "trisk"),
        (f"vt{args.visc4_theta_ratio:g}", not args.visc4_theta_ratio),
        (f"rot{args.rotation:g}", not args.rotation)) if not default)
    write(pathlib.Path(args.out), f"model_l{L}_lloyd{args.lloyd}_{args.case}_{args.backend}_{args.dtype}"
          f"{variant}", meta, arrays)
    return 0


# -- table ----------------------------------------------------------------------------------------

def load(out: pathlib.Path) -> list[dict]:
    runs = []
    for path in sorted(out.glob("*.npz")):
        with np.load(path) as f:
            run = {k: f[k] for k in f.files if k != "meta"}
            run.update(json.loads(str(f["meta"])), path=path.name)
        runs.append(run)
    return runs


def l2_difference(run, ref, day):
    """The cos(lat)-weighted rms difference (Pa) of p_s at `day` on the common grid."""
    a = run["ps"][list(run["ps_days"]).index(day)]
    b = ref["ps"][list(ref["ps_days"]).index(day)]
    return math.sqrt(area_mean((a - b) ** 2))


def place(run, k=-1):
    return (f"{run['ps_min'][k] / 100:.2f} at ({run['ps_min_lon'][k]:.1f}E, "
            f"{run['ps_min_lat'][k]:.1f}N)")


def table(args) -> int:
    out = pathlib.Path(args.out)
    runs = load(out)
    if not runs:
        raise ValueError(f"--out {out}: no .npz files of this script there; expected the output "
                         "of its reference or model subcommands")
    refs = {c: max((r for r in runs if r["kind"] == "reference" and r["case"] == c),
                   key=lambda r: (r["run_days"], r["truncation"]), default=None) for c in CASES}
    for r in runs:
        extra = f", peak memory {r['peak_bytes'] / 2 ** 20:.0f} MiB" if r.get("peak_bytes") else ""
        print(f"- `{r['path']}`: {r['model']}, {r['case']}, {r['run_days']:g} days, dt {r['dt']:g} s, "
              f"{r['steps']} steps, {r['dtype']} on {r['device']}: stepping {r['stepping_s']:.1f} s, "
              f"command {r['wall_s']:.1f} s{extra}" + (f"; {r['filter']}" if "filter" in r else ""))
    print()

    ref = refs["jw06_baroclinic"]
    wave = sorted((r for r in runs if r["kind"] == "model" and r["case"] == "jw06_baroclinic"),
                  key=lambda r: (r["level"], r["lloyd"], r["backend"], r["dtype"]))
    if wave:
        print(f"JW06 baroclinic wave against {ref['model'] if ref else '(no reference run)'}: "
              "l2 of the p_s difference on the 1-degree grid (cos(lat) weights), min p_s (hPa) and "
              "its place on each model's own grid at the last day; mass and energy change over the run.")
        print()
        print("| level | cells | Lloyd | dtype | dt (s) | day | l2 dp_s day 7 / 8 / 9 (hPa) | "
              "min p_s ours | min p_s reference | mass change | energy drift |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in wave:
            day = float(r["days"][-1])
            diffs = []
            for d in sorted(set(r["ps_days"]) | {day}):
                if ref is not None and d in set(ref["ps_days"]) and d in set(r["ps_days"]):
                    diffs.append(f"{l2_difference(r, ref, d) / 100:.2f} (d{d:g})")
            k = list(ref["days"]).index(day) if ref is not None and day in set(ref["days"]) else None
            print(f"| {r['level']} | {r['cells']} | {r['lloyd']} | {r['dtype']} | {r['dt']:g} | {day:g} | {' / '.join(diffs) or '-'} "
                  f"| {place(r)} | {place(ref, k) if k is not None else '-'} "
                  f"| {r['mass_change'][-1]:+.1e} | {r['energy_drift'][-1]:+.2e} |")
        if ref is not None:
            print(f"\nReference {ref['model']}: mass change {ref['mass_change'][-1]:+.1e}, energy "
                  f"drift {ref['energy_drift'][-1]:+.2e} at day {ref['days'][-1]:g}.")
        print(f"Published: {PUBLISHED['ps_uncertainty']}.")
        print()
        rotated = [r for r in wave if r.get("rotation", 0.0)]
        if rotated:
            print("Rotated wave (Lauritzen et al. 2010), rotated back, against the same level's "
                  "unrotated run: l2 of the p_s difference (hPa) on the 1-degree grid.")
            print()
            print("| level | rotation (deg) | kinetic energy | l2 dp_s day 7 / 8 / 9 (hPa) |")
            print("|---|---|---|---|")
            for r in rotated:
                twin = [u for u in wave if not u.get("rotation", 0.0) and u["level"] == r["level"]
                        and u.get("kinetic_energy") == r.get("kinetic_energy")]
                if not twin:
                    continue
                diffs = [f"{l2_difference(r, twin[0], d) / 100:.2f}" for d in r["ps_days"]
                     if d in set(twin[0]["ps_days"])]
                print(f"| {r['level']} | {r['rotation']:g} | {r.get('kinetic_energy', '-')} | "
                      f"{' / '.join(diffs) or '-'} |")
            print()

    steady = [r for r in runs if r["case"] == "jw06_steady"]
    if steady:
        print("JW06 steady state: l2 and linf (m/s) of the zonal-mean zonal wind's departure from "
              "its initial value (cos(lat) and d_eta weights, 1-degree grid).")
        print()
        print("| run | day | l2(u) | linf(u) | l2(u) day 1 / 10 / 15 / 20 / 30 |")
        print("|---|---|---|---|---|")
        for r in sorted(steady, key=lambda r: (r["kind"], r.get("level", 0))):
            days = list(r["days"])
            early = " / ".join(f"{r['u_l2'][days.index(d)]:.2e}" if d in days else "-"
                               for d in (1.0, 10.0, 15.0, 20.0, 30.0))
            variant = "".join(part for part, default in (
                (f", {r.get('kinetic_energy')} kinetic energy", r.get("kinetic_energy", "trisk") == "trisk"),
                (f", rotated {r.get('rotation', 0):g} deg", not r.get("rotation", 0))) if not default)
            print(f"| {r['model']}{variant} | {days[-1]:g} | {r['u_l2'][-1]:.3e} | {r['u_linf'][-1]:.3e} "
                  f"| {early} |")
        print(f"\nPublished: {PUBLISHED['steady_l2']}.")
        if args.figure:
            print(f"\nwrote {steady_figure(steady, args.figure)}")
    return 0


#: The peer's steady-state l2(u) (day, m/s) as measured before its series were kept
#: (benchmarks/RESULTS.md, 2026-12-04: dinosaur T170, 30 days); drawn when no reference run is given.
PEER_STEADY_POINTS = {"dinosaur T170 (2026-12-04)": ((1.0, 0.035), (30.0, 0.031))}


def steady_figure(steady: list, path) -> pathlib.Path:
    """l2 of the zonal-mean zonal wind's departure against time, log scale, one line a steady run
    (our levels solid, the reference dashed; without a reference run, `PEER_STEADY_POINTS` as
    markers), as a PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=120)
    for r in sorted(steady, key=lambda r: (r["kind"], r.get("level", 0), r.get("kinetic_energy", ""))):
        label = r["model"] + ("" if r.get("kinetic_energy", "trisk") == "trisk"
                              else f", {r['kinetic_energy']} kinetic energy")
        ax.semilogy(np.concatenate([[0.0], r["days"]]), np.concatenate([[np.nan], r["u_l2"]]),
                    ls="--" if r["kind"] == "reference" else "-", marker="." if len(r["days"]) < 3 else None,
                    label=label)
    if not any(r["kind"] == "reference" for r in steady):
        for label, points in PEER_STEADY_POINTS.items():
            ax.semilogy(*zip(*points), "ks", ms=5, label=label)
    ax.axhline(0.5, color="0.5", lw=0.8)
    ax.set(xlabel="day", ylabel="l2 of the zonal-mean u departure (m/s)",
           title="JW06 steady state (cos(lat), d-eta weights; grey: 0.5 m/s)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = pathlib.Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, helptext in (("reference", "dinosaur's JW06 run (JAX, float64)"),
                           ("model", "our core's JW06 run"), ("table", "the Markdown tables of --out")):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("--out", required=True, help="directory of the .npz files")
        if name == "table":
            s.add_argument("--figure", default=None,
                           help="also draw the steady state's l2(u) against time, one line a run "
                                "(the peers' dashed), to this PNG")
            continue
        s.add_argument("--days", type=float, default=9.0, help="run length (days)")
        s.add_argument("--case", choices=CASES, default="jw06_baroclinic")
        s.add_argument("--dt", type=float, default=None, help="time step (s); default: see the doc")
    r = sub.choices["reference"]
    r.add_argument("--truncation", type=int, default=170, help="triangular truncation T")
    r.add_argument("--filter", choices=("del4", "exponential"), default="del4")
    r.add_argument("--k4", type=float, default=None, help="del4 coefficient (m4 s-1); default CAM3's")
    m = sub.choices["model"]
    m.add_argument("--level", type=int, default=5, help="icosahedral mesh level")
    m.add_argument("--lloyd", type=int, default=100, help="Lloyd iterations of the mesh")
    m.add_argument("--backend", choices=("numpy", "cupy"), default="numpy")
    m.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    m.add_argument("--visc4", type=float, default=None, help="del4 viscosity (m4 s-1); default scaled")
    m.add_argument("--visc4-theta-ratio", type=float, default=0.0,
                   help="del4 diffusion of theta as a multiple of --visc4 (default 0)")
    m.add_argument("--rotation", type=float, default=0.0,
                   help="tilt of the case's frame (degrees, Lauritzen et al. 2010); the common "
                        "grid, winds and places are the test frame's (rotated back)")
    m.add_argument("--kinetic-energy", choices=KINETIC_ENERGIES, default="trisk",
                   help="the kinetic energy's form (hydrostatic.terms.kinetic_energy)")
    args = p.parse_args(argv)
    if getattr(args, "days", 1.0) <= 0:
        p.error(f"--days = {args.days}: expected a positive number of days")
    try:
        return {"reference": reference, "model": model, "table": table}[args.command](args)
    except ValueError as exc:                  # bad input: one line naming it
        print(f"{p.prog} {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
