"""Checkpointed gradients of a shallow-water run: every schedule (Revolve, multistage with disk
snapshots, two-level) gives the stored-trajectory gradient bitwise, with fewer states in memory
and the recomputed forward steps counted."""
import numpy as np
import pytest
import yaml

from adjoint.checkpointing import make_schedule
from swm.costs import RegionCost
from adjoint.gradient import run_gradient
from adjoint.sensitivity import cost_context
from meshrun.config import load_config
from swm.driver import setup

STEPS = 14


@pytest.fixture(scope="module")
def run_setup(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "w6.yaml"
    path.write_text(yaml.safe_dump({"mesh": {"generate": {"level": 3, "lloyd": 10}},
                                    "case": {"name": "williamson6"},
                                    "time": {"days": STEPS * 1800 / 86400, "dt": 1800},
                                    "diffusion": {"apvm": 0.5, "visc4": 1e15},
                                    "output": {"interval_hours": 7}}))
    return setup(load_config(path))


@pytest.fixture(scope="module")
def stored(run_setup):
    s = run_setup
    cost = RegionCost(cost_context(s), "vorticity", "energy", ((0.0, 70.0), (0.0, 180.0)),
                      window_hours=(3, 7))
    rng = np.random.default_rng()
    h0 = s.model.h * (1 + 1e-3 * rng.standard_normal(s.model.h.shape))
    value, grads, stats = run_gradient(s.model, (h0, s.model.u), cost, STEPS, schedule="none")
    return cost, h0, value, grads, stats


@pytest.mark.parametrize("name, options", [
    ("revolve", dict(snapshots_in_ram=3)),
    ("multistage", dict(snapshots_in_ram=1, snapshots_on_disk=2)),
    ("two_level", dict(snapshots_in_ram=2, period=5)),
])
def test_checkpointed_gradient_is_bitwise_the_stored_trajectory_gradient(run_setup, stored, name,
                                                                          options, tmp_path):
    s = run_setup
    cost, h0, value, grads, full = stored
    schedule = make_schedule(name, STEPS, **options)
    got_value, got, stats = run_gradient(s.model, (h0, s.model.u), cost, STEPS, schedule=schedule)
    assert got_value == value
    for a, b in zip(got, grads):
        assert np.array_equal(a, b)
    assert full.recomputed == 0 and full.max_states_in_memory == STEPS + 1
    assert stats.recomputed > 0
    assert stats.max_states_in_memory <= options["snapshots_in_ram"] + 2 < full.max_states_in_memory
    if name != "revolve":
        assert stats.max_states_on_disk >= 1


def test_disk_snapshots_are_removed_after_the_sweep(run_setup, stored, tmp_path):
    from types import SimpleNamespace

    s = run_setup
    cost, h0, value, grads, _ = stored
    config = SimpleNamespace(schedule="multistage", snapshots_in_ram=0, snapshots_on_disk=3,
                             period=1, directory=tmp_path / "snapshots")
    _, got, stats = run_gradient(s.model, (h0, s.model.u), cost, STEPS, checkpointing=config)
    assert all(np.array_equal(a, b) for a, b in zip(got, grads))
    assert stats.max_states_on_disk == 3
    assert list((tmp_path / "snapshots").iterdir()) == []


def test_unknown_schedule_is_named():
    with pytest.raises(ValueError, match="checkpoint schedule 'binomial': expected one of none, "
                                         "revolve, multistage, two_level"):
        make_schedule("binomial", 10)
