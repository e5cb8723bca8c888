"""A network learns a forcing the model lacks by back-propagating through 24 h of the model.

Twin experiment on an icosahedral mesh:

- Truth: Williamson case 6 (Rossby-Haurwitz wave 4) with a relaxation of the normal velocity
  toward westerly jets in both hemispheres, inside the RK4 tendency:

      du/dt = T_u(h, u) + R(u),   R(u) = -(u - U(latEdge) cos(angleEdge)) / tau,
      U(lat) = 30 m/s sin^2(2 lat)  (jets at 45 N and 45 S),   tau = 2 days.

  Case 6, not a zonal flow (case 5, case 2 unrotated): where u is nearly U_0(lat) cos(angleEdge)
  the drag -u / tau and the jet forcing cannot be told apart over 24 h; the wave's non-zonal u
  separates them.

- Model: the same shallow-water model without R. The corrected model adds a learned forcing after
  each RK4 step M (a first-order split, so R is not exactly of the model's form):

      x_{k+1} = M(x_k) + dt (0, N(u_k)),
      N(u) = (a u / U_s + F_zonal cos angleEdge + F_meridional sin angleEdge) U_s / day,

  (a, F_zonal, F_meridional) = MLP(u / U_s, sin lat, cos lat, cos angleEdge, sin angleEdge) per
  edge (5 -> 32 -> 32 -> 3, tanh; U_s = 20 m/s): a drag rate and the normal component of a forcing
  vector. Its last layer starts at zero, so the first epoch's loss is the uncorrected model's.

- Training: from the truth's initial state, 24 h of the corrected model, one
  `adjoint.differentiable.torch_step` per step, so autograd interleaves the network's backward with
  the model's hand-written adjoint step; each step's network is recomputed in the backward
  (`torch.utils.checkpoint`) instead of storing its activations. Loss: the mean over the truth's
  states every 3 h of mean((h - h_t)^2) / (10 m)^2 + mean((u - u_t)^2) / (1 m/s)^2. Adam with a
  cosine-decaying learning rate, one 24 h window per epoch.

- Forecast: 5 days from the truth's state at 24 h (the end of the training window), with and
  without the learned forcing; rms errors of h and u against the truth every 6 h.

    python examples/learn_forcing.py --level 4 --out out/                      # CPU, NumPy
    python examples/learn_forcing.py --level 7 --backend cupy --out out/       # GPU, CuPy

Writes OUT/learn_forcing.png (loss per epoch, forecast errors against time) and prints the figures.
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))   # the repository's packages

from grids.icosahedral import generate_icosahedral      # noqa: E402
from swm import testcases                                # noqa: E402
from framework.constants import DAY, EARTH_RADIUS, GRAVITY     # noqa: E402
from swm.model import Model                              # noqa: E402
from swm.tendencies import Physics                       # noqa: E402
from swm.terms import Relaxation                         # noqa: E402

#: The truth's jets and relaxation time, the loss's error scales, the network's scales.
JET_SPEED, TAU = 30.0, 2.0 * DAY
SIGMA_H, SIGMA_U = 10.0, 1.0
U_SCALE = 20.0
OBSERVE_HOURS, WINDOW_HOURS, FORECAST_DAYS, FORECAST_EVERY_HOURS = 3, 24, 5, 6
CFL = 0.9


def jet_normal_velocity(mesh):
    """U(latEdge) cos(angleEdge): the normal component of the zonal jets at each edge."""
    return JET_SPEED * np.sin(2.0 * mesh.latEdge) ** 2 * np.cos(mesh.angleEdge)


def initial_state(mesh):
    """Williamson case 6 (Rossby-Haurwitz wave 4)."""
    return testcases.williamson6(mesh)


def time_step(mesh, state) -> float:
    """The largest dt dividing an hour with a Courant number <= CFL for the case's speeds plus the
    jets'."""
    speed = np.abs(state.u).max() + JET_SPEED + math.sqrt(GRAVITY * state.h.max())
    return 3600.0 / math.ceil(3600.0 / (CFL * mesh.dcEdge.min() / speed))


class EdgeForcing:
    """N(u) on edges: a per-edge MLP of the features (u / U_SCALE, sin lat, cos lat, cos angleEdge,
    sin angleEdge) gives a drag rate a and a forcing vector (F_zonal, F_meridional) at the edge;
    N = (a u / U_SCALE + F_zonal cos angleEdge + F_meridional sin angleEdge) U_SCALE / DAY, the
    drag plus the forcing's normal component."""

    def __init__(self, torch, mesh, device, hidden: int = 32, seed: int = 0):
        torch.manual_seed(seed)
        nn = torch.nn
        self.torch = torch
        self.geometry = torch.tensor(np.stack([np.sin(mesh.latEdge), np.cos(mesh.latEdge),
                                               np.cos(mesh.angleEdge), np.sin(mesh.angleEdge)], 1),
                                     dtype=torch.float64, device=device)
        self.net = nn.Sequential(nn.Linear(5, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                                 nn.Tanh(), nn.Linear(hidden, 3)).to(device=device, dtype=torch.float64)
        with torch.no_grad():
            self.net[-1].weight.zero_()
            self.net[-1].bias.zero_()

    def __call__(self, u):
        scaled = u / U_SCALE
        out = self.net(self.torch.cat([scaled[:, None], self.geometry], 1))
        normal = out[:, 1] * self.geometry[:, 2] + out[:, 2] * self.geometry[:, 3]
        return (out[:, 0] * scaled + normal) * (U_SCALE / DAY)

    def parameters(self):
        return self.net.parameters()


def hybrid_steps(torch, step, forcing, dt, h, u, b, n_steps, *, recompute: bool):
    """Yield (k, h_k, u_k) for k = 1..n_steps of x_{k+1} = M(x_k) + dt (0, N(u_k)); N None: the
    uncorrected model. `recompute`: the network's activations are recomputed in the backward."""
    from torch.utils.checkpoint import checkpoint

    for k in range(1, n_steps + 1):
        h_next, u_next = step(h, u, b)
        if forcing is not None:
            n = checkpoint(forcing, u, use_reentrant=False) if recompute else forcing(u)
            u_next = u_next + dt * n
        h, u = h_next, u_next
        yield k, h, u


def experiment(level: int = 4, backend: str = "numpy", epochs: int = 40, lr: float = 0.03,
               seed: int = 0, log=print) -> dict:
    """Run the twin experiment (the network initialised from `seed`); returns the losses per
    epoch, the forecast errors, timings and the trained forcing."""
    import torch

    from adjoint.differentiable import torch_step

    if backend == "cupy":
        import cupy as xp

        if not torch.cuda.is_available():
            raise RuntimeError("--backend cupy: needs a PyTorch build with CUDA and a GPU "
                               f"(torch {torch.__version__}: torch.cuda.is_available() is False)")
        device = torch.device("cuda", torch.cuda.current_device())
        xp.cuda.Device(device.index).use()
    elif backend == "numpy":
        xp, device = np, torch.device("cpu")
    else:
        raise ValueError(f"--backend {backend!r}: expected numpy or cupy")
    t_start = time.perf_counter()
    mesh = generate_icosahedral(level, sphere_radius=EARTH_RADIUS)
    state = initial_state(mesh)
    dt = time_step(mesh, state)
    steps_per_hour = int(round(3600.0 / dt))
    window = WINDOW_HOURS * steps_per_hour
    observe = OBSERVE_HOURS * steps_per_hour
    every = FORECAST_EVERY_HOURS * steps_per_hour
    forecast = FORECAST_DAYS * 24 * steps_per_hour
    log(f"mesh level {level}: {mesh.nCells} cells, {mesh.nEdges} edges; backend {backend}, "
        f"device {device}; dt {dt:g} s, {window} steps in {WINDOW_HOURS} h")

    def tensor(a):
        return torch.as_tensor(np.asarray(a, dtype=np.float64), device=device)

    fields = [xp.asarray(a) for a in (state.h, state.u, state.b, state.f_vertex)]
    model = Model(mesh, *fields, dt)
    # The truth: the model plus a relaxation of u towards the jets, R(u) = -(u - u_jet) / tau.
    relaxation = Relaxation(xp.asarray(jet_normal_velocity(mesh)), TAU)
    truth = Model(mesh, *(f.copy() for f in fields), dt, Physics(extra_terms=(relaxation,)),
                  device_mesh=model.device_mesh)
    model_step, truth_step = torch_step(model), torch_step(truth)
    h0, u0, b = tensor(state.h), tensor(state.u), tensor(state.b)

    # The truth: its states every 3 h of the window and every 6 h of the forecast after it.
    t0 = time.perf_counter()
    observed, verifying = {}, {}
    with torch.no_grad():
        for k, h, u in hybrid_steps(torch, truth_step, None, dt, h0, u0, b, window + forecast,
                                    recompute=False):
            if k <= window and k % observe == 0:
                observed[k] = (h, u)
            if k >= window and (k - window) % every == 0:
                verifying[k - window] = (h, u)
    _sync(torch, device)
    truth_seconds = time.perf_counter() - t0

    forcing = EdgeForcing(torch, mesh, device, seed=seed)

    def window_loss():
        loss = 0.0
        for k, h, u in hybrid_steps(torch, model_step, forcing, dt, h0, u0, b, window, recompute=True):
            if k in observed:
                h_t, u_t = observed[k]
                loss = loss + (((h - h_t) ** 2).mean() / SIGMA_H ** 2
                               + ((u - u_t) ** 2).mean() / SIGMA_U ** 2)
        return loss / len(observed)

    optimiser = torch.optim.Adam(forcing.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=epochs, eta_min=lr / 10)
    losses = []
    t0 = time.perf_counter()
    for epoch in range(epochs):
        optimiser.zero_grad()
        loss = window_loss()
        loss.backward()
        optimiser.step()
        schedule.step()
        losses.append(float(loss.detach()))
        if epoch % max(1, epochs // 10) == 0 or epoch == epochs - 1:
            log(f"epoch {epoch:4d}: loss {losses[-1]:.6g} ({time.perf_counter() - t0:.1f} s)")
    _sync(torch, device)
    train_seconds = time.perf_counter() - t0
    with torch.no_grad():
        final_loss = float(window_loss())

    # 5-day forecasts from the truth at the end of the window.
    t0 = time.perf_counter()
    errors = {}
    with torch.no_grad():
        start = verifying[0]
        for name, n in (("uncorrected", None), ("corrected", forcing)):
            rms = {"hours": [0.0], "h": [0.0], "u": [0.0]}
            for k, h, u in hybrid_steps(torch, model_step, n, dt, *start, b, forecast, recompute=False):
                if k % every == 0:
                    h_t, u_t = verifying[k]
                    rms["hours"].append(k * dt / 3600.0)
                    rms["h"].append(float(((h - h_t) ** 2).mean().sqrt()))
                    rms["u"].append(float(((u - u_t) ** 2).mean().sqrt()))
            errors[name] = rms
    forecast_seconds = time.perf_counter() - t0
    result = dict(forcing=forcing, level=level, backend=backend, n_cells=mesh.nCells,
                  n_edges=mesh.nEdges, dt=dt, window_steps=window, epochs=epochs, losses=losses, final_loss=final_loss,
                  errors=errors, truth_seconds=truth_seconds, train_seconds=train_seconds,
                  epoch_seconds=train_seconds / max(epochs, 1), forecast_seconds=forecast_seconds,
                  total_seconds=time.perf_counter() - t_start)
    report(result, log)
    return result


def _sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def report(r: dict, log=print) -> None:
    first, last = r["losses"][0], r["final_loss"]
    log(f"loss: {first:.6g} (uncorrected model) -> {last:.6g} after {r['epochs']} epochs "
        f"({first / last:.1f}x lower)")
    u, c = r["errors"]["uncorrected"], r["errors"]["corrected"]
    log(f"{'forecast day':>12} {'rms h uncorr.':>14} {'rms h corr.':>12} {'rms u uncorr.':>14} "
        f"{'rms u corr.':>12}")
    for i, hours in enumerate(u["hours"]):
        if hours % 24 == 0 and hours > 0:
            log(f"{hours / 24:12.0f} {u['h'][i]:12.3f} m {c['h'][i]:10.3f} m {u['u'][i]:10.3f} m/s "
                f"{c['u'][i]:8.3f} m/s")
    log(f"wall: truth {r['truth_seconds']:.1f} s, training {r['train_seconds']:.1f} s "
        f"({r['epoch_seconds']:.2f} s per epoch of {r['window_steps']} steps), forecasts "
        f"{r['forecast_seconds']:.1f} s, total {r['total_seconds']:.1f} s")


def plot(r: dict, path) -> pathlib.Path:
    """Loss per epoch, and rms forecast errors of h and u against time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grids.atomic import atomic_path

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    ax = axes[0]
    ax.semilogy(np.arange(len(r["losses"])), r["losses"], color="k")
    ax.axhline(r["losses"][0], color="tab:red", ls=":", label="uncorrected model")
    ax.set(xlabel="epoch", ylabel="loss over the 24 h window", title="training")
    ax.legend()
    for ax, field, unit in ((axes[1], "h", "m"), (axes[2], "u", "m/s")):
        for name, color in (("uncorrected", "tab:red"), ("corrected", "tab:blue")):
            e = r["errors"][name]
            ax.plot(np.asarray(e["hours"]) / 24.0, e[field], color=color, label=name)
        ax.set(xlabel="forecast day", ylabel=f"rms error of {field} ({unit})",
               title=f"5-day forecast error of {field}")
        ax.legend()
    fig.suptitle(f"Learning a missing jet relaxation: level {r['level']} ({r['n_cells']} cells), "
                 f"{r['backend']}, {r['epochs']} epochs", fontsize=10)
    fig.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--level", type=int, default=4, help="icosahedral mesh level (default 4)")
    parser.add_argument("--backend", choices=("numpy", "cupy"), default="numpy",
                        help="numpy: CPU tensors; cupy: CUDA tensors on the current device")
    parser.add_argument("--epochs", type=int, default=40, help="training epochs (default 40)")
    parser.add_argument("--lr", type=float, default=0.03, help="Adam's initial learning rate")
    parser.add_argument("--seed", type=int, default=0, help="the network's initial weights")
    parser.add_argument("--threads", type=int, default=None,
                        help="PyTorch's CPU threads (default: PyTorch's choice)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("."),
                        help="folder of learn_forcing.png (default: the current folder)")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error(f"--epochs {args.epochs}: expected at least 1")
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    result = experiment(args.level, args.backend, args.epochs, args.lr, args.seed)
    target = plot(result, args.out / "learn_forcing.png")
    print(f"wrote {target}")
    return result


if __name__ == "__main__":
    main()
