"""Accuracy of the shallow-water model: Williamson case 2 error norms after 5 days at several
levels (Lloyd-optimised meshes, dt halved with the spacing) with their orders, for each rotation
angle alpha asked for (pi/4, the flow across the pentagons, and 0, the one most codes quote), the
total-energy change of cases 5 (15 days) and 6 (14 days), and how steady the unperturbed Galewsky
jet stays. Meshes come from the mesh cache (`grids.cache`).

    python benchmarks/model_accuracy.py --levels 3 4 5 6 --lloyd 1000 --alphas 0.785398 0
"""
from __future__ import annotations

import argparse
import math

import numpy as np

import meshops
from grids.cache import cached_icosahedral
from swm import testcases
from framework.constants import DAY, EARTH_RADIUS, GRAVITY
from swm.model import Model


def run(mesh, state, dt, days):
    model = Model(mesh, state.h.copy(), state.u.copy(), state.b, state.f_vertex, dt)
    for _ in range(int(round(days * DAY / dt))):
        model.step()
    return model


def norms(value, exact, weight):
    err = value - exact
    return (np.sum(weight * np.abs(err)) / np.sum(weight * np.abs(exact)),
            math.sqrt(np.sum(weight * err ** 2) / np.sum(weight * exact ** 2)),
            np.abs(err).max() / np.abs(exact).max())


def energy(mesh, model):
    ke = meshops.ke_e2c(mesh, model.u)
    return (np.sum(mesh.areaCell * model.h * ke)
            + 0.5 * GRAVITY * np.sum(mesh.areaCell * ((model.h + model.b) ** 2 - model.b ** 2)))


def case2_table(meshes, alpha, lloyd):
    """Print the case-2 error table (h after 5 days, normalised) for one rotation angle."""
    print(f"Williamson case 2, alpha = {alpha:.4f}, 5 days, Lloyd-{lloyd} meshes (h, normalised):")
    print("| level | cells | dt (s) | l1 | l2 | linf | order l2 | order linf |")
    print("|---|---|---|---|---|---|---|---|")
    previous = None
    for L, mesh in meshes.items():
        dt = 2400.0 / 2 ** (L - 3)
        state = testcases.williamson2(mesh, alpha)
        model = run(mesh, state, dt, 5.0)
        exact = testcases.williamson2_height(mesh.latCell, mesh.lonCell, mesh.sphere_radius, alpha)
        l1, l2, linf = norms(model.h, exact, mesh.areaCell)
        orders = ("", "") if previous is None else (f"{math.log2(previous[0] / l2):.2f}",
                                                   f"{math.log2(previous[1] / linf):.2f}")
        print(f"| {L} | {mesh.nCells} | {dt:g} | {l1:.3e} | {l2:.3e} | {linf:.3e} | {orders[0]} | {orders[1]} |",
              flush=True)
        previous = (l2, linf)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--levels", type=int, nargs="+", default=[3, 4, 5, 6])
    p.add_argument("--lloyd", type=int, default=1000)
    p.add_argument("--alphas", type=float, nargs="+", default=[math.pi / 4, 0.0],
                   help="rotation angles of case 2 (rad), one table each")
    args = p.parse_args(argv)
    meshes = {L: cached_icosahedral(L, lloyd_iterations=args.lloyd, sphere_radius=EARTH_RADIUS)
              for L in args.levels}
    for alpha in args.alphas:
        case2_table(meshes, alpha, args.lloyd)
    L = min(4, max(args.levels))
    mesh = meshes.get(L) or cached_icosahedral(L, lloyd_iterations=args.lloyd, sphere_radius=EARTH_RADIUS)
    dt = 2400.0 / 2 ** (L - 3)
    for case, days in (("williamson5", 15.0), ("williamson6", 14.0)):
        state = testcases.CASES[case](mesh)
        start = Model(mesh, state.h, state.u, state.b, state.f_vertex, dt)
        model = run(mesh, state, dt, days)
        mass = abs(np.sum(mesh.areaCell * model.h) / np.sum(mesh.areaCell * state.h) - 1)
        print(f"{case}, level {L}, {days:g} days: energy change {energy(mesh, model) / energy(mesh, start) - 1:.3e}, "
              f"mass change {mass:.1e}, h from {model.h.min():.1f} to {model.h.max():.1f} m "
              f"(h + b up to {(model.h + model.b).max():.1f} m)", flush=True)
    L = max(5, min(args.levels))
    mesh = meshes.get(L) or cached_icosahedral(L, lloyd_iterations=args.lloyd, sphere_radius=EARTH_RADIUS)
    state = testcases.galewsky(mesh, perturbed=False)
    model = run(mesh, state, 2400.0 / 2 ** (L - 2), 5.0)
    print(f"galewsky unperturbed, level {L}, 5 days: max |h - h0| {np.abs(model.h - state.h).max():.2f} m, "
          f"max |u - u0| {np.abs(model.u - state.u).max():.2f} m/s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
