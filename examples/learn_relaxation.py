"""A hybrid hydrostatic model learns a missing temperature relaxation through the model's adjoint.

Twin experiment on an icosahedral mesh with the 26 JW06 levels:

- Truth: the hydrostatic core from the held_suarez initial state (the JW06 baroclinic state on a
  flat surface) with the Held-Suarez Newtonian relaxation of temperature inside the RK4 tendency
  (`hydrostatic.forcing`; its boundary-layer friction off):

      d(theta_mass)/dt = T(x) - k_T mass (theta - theta_eq),
      k_T = k_a + (k_s - k_a) s cos^4(lat),   s = max(0, (p / p_s - 0.7) / 0.3),
      theta_eq = max(200 K, (T_0 - dT_y sin^2(lat) - dtheta_z log(p / p0) cos^2(lat)) pi) / pi,

  pi = (p / p0)^kappa, with (k_a, k_s, T_0, dT_y, dtheta_z) = (1/40 day, 1/4 day, 315 K, 60 K,
  10 K).

- Model: the same core without it. The corrected model adds the relaxation's form with learned
  constants after each RK4 step M (a first-order split, so the truth is not exactly of the
  model's form):

      x_{k+1} = M(x_k) + dt (0, C(x_k), 0),   C = -k_T mass (theta - theta_eq)  (learned constants),

  the rates as k = k_guess exp(z), the temperatures as T = T_guess + 10 K z, z learned from 0: the
  first guess (1/10 day, 1/10 day, 300 K, 40 K, 5 K) is a relaxation of the wrong strength toward
  the wrong profile.

- Training: from the truth's initial state, WINDOW_HOURS of the corrected model, one
  `adjoint.differentiable.torch_step` of the hydrostatic model per step, (mass, theta_mass, u,
  phi_s) -> (mass, theta_mass, u), so autograd runs C's backward between the model's hand-written
  adjoint steps. Loss: the mean over the truth's states every OBSERVE_HOURS of mean((theta -
  theta_t)^2) / (0.1 K)^2 + mean((u - u_t)^2) / (0.1 m/s)^2. Adam with a
  cosine-decaying learning rate, one window per epoch.

    python examples/learn_relaxation.py --level 2 --out out/

Prints the loss per epoch, the uncorrected model's, and the learned against the true constants;
writes OUT/learn_relaxation.png (loss per epoch, each constant against the epoch).
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))   # the repository's packages

from grids.cache import cached_icosahedral             # noqa: E402
from meshops.operators.vertical import CP_DRY, R_DRY    # noqa: E402
from framework.constants import DAY, GRAVITY                  # noqa: E402

from hydrostatic import forcing, levels, testcases     # noqa: E402
from hydrostatic.dynamics import Physics                # noqa: E402
from hydrostatic.model import Model                     # noqa: E402

#: The constants' true values (Held-Suarez) and the first guess, with their units for printing.
TRUE = dict(k_a=forcing.K_A, k_s=forcing.K_S, T_0=315.0, dT_y=forcing.DT_Y, dtheta_z=forcing.DTHETA_Z)
GUESS = dict(k_a=1.0 / (10.0 * DAY), k_s=1.0 / (10.0 * DAY), T_0=300.0, dT_y=40.0, dtheta_z=5.0)
RATES, TEMPERATURE_SCALE = ("k_a", "k_s"), 10.0
SIGMA_THETA, SIGMA_U = 0.1, 0.1
WINDOW_HOURS, OBSERVE_HOURS = 48, 6
KAPPA = R_DRY / CP_DRY
A, B = levels.coefficients("jw06_26")


class TemperatureRelaxation:
    """The truth's forcing: Held-Suarez's Newtonian relaxation of temperature alone (its Rayleigh
    friction off), for the forward tendencies."""

    def __init__(self, lat_cell):
        self.held_suarez = forcing.HeldSuarez(lat_cell)

    def tendencies(self, mesh, d, mass, u):
        tend_theta_mass, _ = self.held_suarez.tendencies(mesh, d, mass, u)
        return tend_theta_mass, 0.0 * u


class LearnedRelaxation:
    """C(mass, theta_mass) = -k_T mass (theta - theta_eq) of the module doc with learned constants
    (torch), the layer pressures from the layer masses as the model's column diagnostics:
    p_i = p_top + g sum of the masses above, p the mean of a layer's interfaces."""

    def __init__(self, torch, mesh, p_top: float):
        self.torch, self.p_top = torch, p_top
        lat = torch.tensor(mesh.latCell)[:, None]
        self.sin2, self.cos2 = torch.sin(lat) ** 2, torch.cos(lat) ** 2
        self.z = torch.zeros(len(GUESS), dtype=torch.float64, requires_grad=True)

    def constants(self) -> dict:
        """The constants of the current z."""
        out = {}
        for i, (name, guess) in enumerate(GUESS.items()):
            z = self.z[i]
            out[name] = guess * self.torch.exp(z) if name in RATES else guess + TEMPERATURE_SCALE * z
        return out

    def __call__(self, mass, theta_mass):
        torch, c = self.torch, self.constants()
        above = torch.flip(torch.cumsum(torch.flip(mass, [1]), 1), [1])   # sum of layers k.. top
        p_lower = self.p_top + GRAVITY * above                              # interfaces 0 .. N-1
        p_upper = torch.cat([p_lower[:, 1:], torch.full_like(p_lower[:, :1], self.p_top)], 1)
        p = 0.5 * (p_lower + p_upper)
        exner = (p / forcing.P0) ** KAPPA
        q = c["T_0"] - c["dT_y"] * self.sin2 - c["dtheta_z"] * torch.log(p / forcing.P0) * self.cos2
        theta_eq = torch.clamp(q * exner, min=forcing.T_MIN) / exner
        s = torch.clamp((p / p_lower[:, :1] - forcing.SIGMA_B) / (1.0 - forcing.SIGMA_B), min=0.0)
        k_t = c["k_a"] + (c["k_s"] - c["k_a"]) * s * self.cos2 ** 2
        return -k_t * mass * (theta_mass / mass - theta_eq)

    def parameters(self):
        return [self.z]


def hybrid_steps(step, correction, dt, state, phi_s, n_steps):
    """Yield (k, x_k) for k = 1..n_steps of x_{k+1} = M(x_k) + dt (0, C(x_k), 0); C None: the
    uncorrected model."""
    for k in range(1, n_steps + 1):
        mass, theta_mass, u = step(*state, phi_s)
        if correction is not None:
            theta_mass = theta_mass + dt * correction(state[0], state[1])
        state = (mass, theta_mass, u)
        yield k, state


def time_step(mesh) -> float:
    """The largest dt dividing an hour with a Courant number <= 1 for 350 m/s (the fastest
    gravity wave and the jet)."""
    return 3600.0 / math.ceil(3600.0 / (mesh.dcEdge.min() / 350.0))


def experiment(level: int = 2, epochs: int = 40, lr: float = 0.1, log=print) -> dict:
    """Run the twin experiment; returns the losses per epoch, the uncorrected model's loss, the
    learned constants per epoch and timings."""
    import torch

    from adjoint.differentiable import torch_step

    t_start = time.perf_counter()
    mesh = cached_icosahedral(level, lloyd_iterations=50)
    s = testcases.initial_state(mesh, "held_suarez", A, B)
    dt = time_step(mesh)
    window, observe = int(WINDOW_HOURS * 3600 / dt), int(OBSERVE_HOURS * 3600 / dt)
    visc4 = 1e15 * 16.0 ** (5 - level)                  # 1e15 at level 5, scaled as dx^4
    log(f"mesh level {level}: {mesh.nCells} cells x {len(A) - 1} levels; dt {dt:g} s, {window} "
        f"steps in {WINDOW_HOURS} h; visc4 {visc4:.3g} m4 s-1")

    def physics(relaxation=None):
        return Physics(p_top=float(A[-1]), dB=B[:-1] - B[1:], visc4=visc4, visc4_theta=visc4,
                       forcing=relaxation)

    fields = (s.mass, s.theta_mass, s.u, s.phi_s, s.f_vertex)
    model = Model(mesh, *(a.copy() for a in fields), dt, physics())
    truth = Model(mesh, *(a.copy() for a in fields), dt, physics(TemperatureRelaxation(mesh.latCell)),
                  device_mesh=model.device_mesh)

    # The truth's states every OBSERVE_HOURS of the window.
    t0 = time.perf_counter()
    observed = {}
    for k in range(1, window + 1):
        truth.step()
        if k % observe == 0:
            observed[k] = torch.tensor(truth.theta_mass / truth.mass), torch.tensor(truth.u)
    truth_seconds = time.perf_counter() - t0

    step = torch_step(model)
    x0 = (torch.tensor(s.mass), torch.tensor(s.theta_mass), torch.tensor(s.u))
    phi_s = torch.tensor(s.phi_s)
    correction = LearnedRelaxation(torch, mesh, float(A[-1]))

    def window_loss(c):
        loss = 0.0
        for k, (mass, theta_mass, u) in hybrid_steps(step, c, dt, x0, phi_s, window):
            if k in observed:
                theta_t, u_t = observed[k]
                loss = loss + (((theta_mass / mass - theta_t) ** 2).mean() / SIGMA_THETA ** 2
                               + ((u - u_t) ** 2).mean() / SIGMA_U ** 2)
        return loss / len(observed)

    with torch.no_grad():
        uncorrected = float(window_loss(None))
    log(f"uncorrected model: loss {uncorrected:.6g}")
    optimiser = torch.optim.Adam(correction.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=epochs, eta_min=lr / 20)
    losses, history = [], []
    t0 = time.perf_counter()
    for epoch in range(epochs):
        optimiser.zero_grad()
        loss = window_loss(correction)
        loss.backward()
        history.append({k: float(v.detach()) for k, v in correction.constants().items()})
        optimiser.step()
        schedule.step()
        losses.append(float(loss.detach()))
        if epoch % max(1, epochs // 10) == 0 or epoch == epochs - 1:
            log(f"epoch {epoch:4d}: loss {losses[-1]:.6g} ({time.perf_counter() - t0:.1f} s)")
    train_seconds = time.perf_counter() - t0
    with torch.no_grad():
        final_loss = float(window_loss(correction))
        learned = {k: float(v) for k, v in correction.constants().items()}
    result = dict(level=level, n_cells=mesh.nCells, dt=dt, window_steps=window, epochs=epochs,
                  uncorrected_loss=uncorrected, losses=losses, final_loss=final_loss,
                  learned=learned, history=history, truth_seconds=truth_seconds,
                  train_seconds=train_seconds, epoch_seconds=train_seconds / epochs,
                  total_seconds=time.perf_counter() - t_start)
    report(result, log)
    return result


def _shown(name: str, value: float) -> str:
    return f"1/{1.0 / (value * DAY):.2f} day" if name in RATES else f"{value:.2f} K"


def report(r: dict, log=print) -> None:
    first, last = r["uncorrected_loss"], r["final_loss"]
    log(f"loss: {first:.6g} (uncorrected model) -> {last:.6g} after {r['epochs']} epochs "
        f"({first / last:.1f}x lower)")
    log(f"{'constant':>10} {'first guess':>14} {'learned':>14} {'true':>14}")
    for name in GUESS:
        log(f"{name:>10} {_shown(name, GUESS[name]):>14} {_shown(name, r['learned'][name]):>14} "
            f"{_shown(name, TRUE[name]):>14}")
    log(f"wall: truth {r['truth_seconds']:.1f} s, training {r['train_seconds']:.1f} s "
        f"({r['epoch_seconds']:.2f} s per epoch of {r['window_steps']} steps), total "
        f"{r['total_seconds']:.1f} s")


def plot(r: dict, path) -> pathlib.Path:
    """Loss per epoch, and each constant over its true value against the epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grids.atomic import atomic_path

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    ax = axes[0]
    ax.semilogy(np.arange(len(r["losses"])), r["losses"], color="k")
    ax.axhline(r["uncorrected_loss"], color="tab:red", ls=":", label="uncorrected model")
    ax.set(xlabel="epoch", ylabel=f"loss over the {WINDOW_HOURS} h window", title="training")
    ax.legend()
    ax = axes[1]
    for name in GUESS:
        ax.plot([h[name] / TRUE[name] for h in r["history"]], label=name)
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set(xlabel="epoch", ylabel="learned / true", title="the relaxation's constants")
    ax.legend()
    fig.suptitle(f"Learning a missing temperature relaxation: level {r['level']} "
                 f"({r['n_cells']} cells, 26 levels), {r['epochs']} epochs", fontsize=10)
    fig.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--level", type=int, default=2, help="icosahedral mesh level (default 2)")
    parser.add_argument("--epochs", type=int, default=40, help="training epochs (default 40)")
    parser.add_argument("--lr", type=float, default=0.1, help="Adam's learning rate")
    parser.add_argument("--threads", type=int, default=None,
                        help="PyTorch's CPU threads (default: PyTorch's choice)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("."),
                        help="folder of learn_relaxation.png (default: the current folder)")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error(f"--epochs {args.epochs}: expected at least 1")
    if args.level < 1:
        parser.error(f"--level {args.level}: expected at least 1")
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    result = experiment(args.level, args.epochs, args.lr)
    target = plot(result, args.out / "learn_relaxation.png")
    print(f"wrote {target}")
    return result


if __name__ == "__main__":
    main()
