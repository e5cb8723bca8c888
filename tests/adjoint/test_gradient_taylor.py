"""Whole-run gradients of every cost function pass the Taylor test (rate >= 1.9), with every state
stored and with checkpointing, for the controls h0, u0 and b together."""
import numpy as np
import pytest
import yaml

from adjoint.checkpointing import make_schedule
from swm.costs import ObservationCost, RegionCost, write_observations
from adjoint.gradient import cost_of_controls, run_gradient
from adjoint.sensitivity import cost_context
from adjoint.verification import taylor_test
from meshrun.config import load_config
from framework.distribution import owned_inner
from swm.driver import setup

STEPS = 8


@pytest.fixture(scope="module")
def run_setup(tmp_path_factory):
    path = tmp_path_factory.mktemp("taylor") / "w5.yaml"
    path.write_text(yaml.safe_dump({"mesh": {"generate": {"level": 3, "lloyd": 10}},
                                    "case": {"name": "williamson5"},
                                    "time": {"days": STEPS * 1800 / 86400, "dt": 1800},
                                    "diffusion": {"apvm": 0.5, "visc2": 1e5},
                                    "output": {"interval_hours": 4}}))
    return setup(load_config(path))


def make(kind, s, tmp_path, rng):
    context = cost_context(s)
    if kind == "misfit":
        cells = rng.choice(s.mesh.nCells, 60, replace=False)
        steps = rng.integers(1, STEPS + 1, 60)
        path = tmp_path / "obs.nc"
        write_observations(path, cells, steps * s.dt, 5500 + 50 * rng.standard_normal(60),
                           np.full(60, 3.0))
        return ObservationCost(context, path)
    field, statistic = kind.split("-")
    return RegionCost(context, field, statistic, ((0.0, 60.0), (230.0, 330.0)),
                      window_hours=(1, 4) if statistic == "energy" else None)


@pytest.mark.parametrize("kind", ["h-mean", "h-energy", "vorticity-mean", "vorticity-energy",
                                  "misfit"])
@pytest.mark.parametrize("schedule", ["none", "multistage"])
def test_gradient_of_every_cost_passes_the_taylor_test(run_setup, kind, schedule, tmp_path, rng):
    s = run_setup
    model = s.model
    cost = make(kind, s, tmp_path, rng)
    h0, u0, b0 = model.h.copy(), model.u.copy(), model.b.copy()
    sched = make_schedule(schedule, STEPS) if schedule == "none" else \
        make_schedule(schedule, STEPS, snapshots_in_ram=1, snapshots_on_disk=1)
    _, (gh, gu, gb), stats = run_gradient(model, (h0, u0), cost, STEPS, schedule=sched)
    assert (stats.recomputed > 0) == (schedule != "none")
    dm = (rng.standard_normal(h0.shape), rng.standard_normal(u0.shape) * 0.1,
          rng.standard_normal(b0.shape))
    derivative = owned_inner(s.distribution, [("cell", gh, dm[0]), ("edge", gu, dm[1]),
                                              ("cell", gb, dm[2])])

    # The quadratic term of a regional mean can be small along a random dm (its Hessian is
    # indefinite), so the steps start small enough for the cubic term not to bend the rate;
    # the remainders stay far above round-off down to eps = 1/64.
    result = taylor_test(cost_of_controls(model, cost, STEPS), (h0, u0, b0), dm, derivative,
                         eps0=0.125, steps=4)
    assert result.passed(1.9), str(result)
