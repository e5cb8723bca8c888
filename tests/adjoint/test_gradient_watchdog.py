"""The `check` of run_gradient, run_cost and run_tangent: it sees every state of the first forward
pass in order (whatever the checkpoint schedule), what it raises ends the sweep before any adjoint
step (disk snapshots removed), and `adjoint.gradient.watchdog` runs the forward run's watchdog
(`swm.driver.state_check`) on the forward run's schedule: a run that blows up stops with a
WatchdogError naming the step."""
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from swm.costs import RegionCost
from adjoint.gradient import advance, run_cost, run_gradient, run_tangent, watchdog
from adjoint.sensitivity import cost_context
from meshrun.config import load_config
from swm.driver import setup, state_checker
from framework.errors import WatchdogError

STEPS = 9


def _setup(tmp_path_factory, name, **time):
    folder = tmp_path_factory.mktemp(name)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "mesh": {"generate": {"level": 2, "lloyd": 10}}, "case": {"name": "williamson5"},
        "time": time, "output": {"interval_hours": 24, "path": str(folder / "out.nc")},
        "restart": {"path": str(folder / "restart.nc")}}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MESHOPS_CACHE_DIR", str(folder / "cache"))
        mp.setenv("MESHOPS_NO_MPI", "1")
        config = load_config(path)
        return config, setup(config)


@pytest.fixture(scope="module")
def calm(tmp_path_factory):
    """A level-2 case-5 run of 1 day at dt 2400 s (36 steps; STEPS of them used)."""
    return _setup(tmp_path_factory, "calm", days=1, dt=2400)


@pytest.fixture(scope="module")
def blowup(tmp_path_factory):
    """A level-2 case-5 run of 2 days at dt 21600 s (8 steps): it blows up (Courant number far
    above the limit by step 4, h not finite by step 8)."""
    return _setup(tmp_path_factory, "blowup", days=2, dt=21600)


def cost_of(s, n):
    return RegionCost(cost_context(s, n), "h", "mean", ((20.0, 50.0), (300.0, 340.0)))


def trajectory(s, n):
    state, states = [s.model.h.copy(), s.model.u.copy()], []
    for k in range(n + 1):
        states.append(state)
        if k < n:
            state = advance(s.model, state)
    return states


@pytest.mark.parametrize("schedule", [
    dict(schedule="none"),
    dict(schedule="revolve", snapshots_in_ram=2),
    dict(schedule="multistage", snapshots_in_ram=1, snapshots_on_disk=2),
    dict(schedule="two_level", snapshots_in_ram=1, period=4),
])
def test_check_sees_every_state_of_the_first_pass_in_order(calm, schedule, tmp_path):
    _, s = calm
    cost = cost_of(s, STEPS)
    options = SimpleNamespace(**{"snapshots_in_ram": 0, "snapshots_on_disk": 0, "period": 1,
                                 "directory": tmp_path, **schedule})
    seen = []
    value, grads, stats = run_gradient(s.model, (s.model.h, s.model.u), cost, STEPS,
                                       checkpointing=options,
                                       check=lambda k, x: seen.append((k, x[0].copy(), x[1].copy())))
    assert [k for k, _, _ in seen] == list(range(STEPS + 1))
    for (_, h, u), (h_ref, u_ref) in zip(seen, trajectory(s, STEPS)):
        assert np.array_equal(h, h_ref) and np.array_equal(u, u_ref)
    plain_value, plain, _ = run_gradient(s.model, (s.model.h, s.model.u), cost, STEPS,
                                         checkpointing=options)
    assert value == plain_value
    assert all(np.array_equal(a, b) for a, b in zip(grads, plain))


def test_what_check_raises_ends_the_sweep_before_any_adjoint_step(calm, tmp_path):
    _, s = calm
    options = SimpleNamespace(schedule="multistage", snapshots_in_ram=0, snapshots_on_disk=3,
                              period=1, directory=tmp_path / "snapshots")
    steps = []

    def check(k, state):
        if k == 6:
            raise WatchdogError(f"step {k}: stop")

    with pytest.raises(WatchdogError, match="step 6: stop"):
        run_gradient(s.model, (s.model.h, s.model.u), cost_of(s, STEPS), STEPS,
                     checkpointing=options, check=check, on_step=steps.append)
    assert set(steps) == {"forward"} and len(steps) == 6
    assert list((tmp_path / "snapshots").iterdir()) == []


def test_run_cost_and_run_tangent_check_every_state(calm):
    _, s = calm
    cost = cost_of(s, STEPS)
    seen = []
    value = run_cost(s.model, (s.model.h, s.model.u), cost, STEPS, check=lambda k, x: seen.append(k))
    assert seen == list(range(STEPS + 1))
    assert value == run_cost(s.model, (s.model.h, s.model.u), cost, STEPS)
    seen.clear()
    h, u, b = s.model.h, s.model.u, s.model.b
    run_tangent(s.model, (h, u), (h * 1e-3, u * 1e-3), (b * 0,), STEPS,
                check=lambda k, x: seen.append(k))
    assert seen == list(range(STEPS + 1))


@pytest.mark.parametrize("n, interval, start, expected", [
    (10, 4, 0, [0, 4, 8, 10]),
    (8, 4, 0, [0, 4, 8]),
    (3, 10, 0, [0, 3]),
    (5, 1, 20, [20, 21, 22, 23, 24, 25]),
])
def test_watchdog_checks_the_first_state_every_interval_and_the_last_step(n, interval, start, expected):
    steps = []
    check = watchdog(lambda state, step: steps.append((step, state)), n, interval, start=start)
    for k in range(n + 1):
        check(k, ["h", "u"])
    assert [step for step, _ in steps] == expected
    assert all(state == ["h", "u"] for _, state in steps)


def test_the_forward_runs_watchdog_stops_a_gradient_that_blows_up(blowup):
    config, s = blowup
    n = s.total
    adjoint_steps = []
    check = watchdog(state_checker(config, s), n, config.watchdog.interval_steps)
    with pytest.raises(WatchdogError) as error, np.errstate(all="ignore"):
        run_gradient(s.model, (s.model.h, s.model.u), cost_of(s, n), n,
                     checkpointing=SimpleNamespace(schedule="revolve", snapshots_in_ram=2,
                                                   snapshots_on_disk=0, period=1, directory=None),
                     check=check, on_step=adjoint_steps.append)
    message = str(error.value)
    assert message.startswith("step ") and ("Courant number" in message or "not finite" in message)
    assert "lat " in message and "lon " in message
    assert "adjoint" not in adjoint_steps
    # the same config without the check: J is not finite (what the sensitivity run used to write)
    with np.errstate(all="ignore"):
        value, _, _ = run_gradient(s.model, (s.model.h, s.model.u), cost_of(s, n), n)
    assert not np.isfinite(value)


def test_a_gradient_that_is_not_finite_is_refused_with_its_name(calm):
    from adjoint.sensitivity import require_finite

    _, s = calm
    h, u = s.model.h.copy(), s.model.u.copy()
    require_finite(s, 1.0, [("dJdh0", "cell", h), ("dJdu0", "edge", u)], "run")     # all finite
    u[3] = np.nan
    with pytest.raises(WatchdogError, match=r"^run: dJdu0 not finite, though the forward run "
                                            r"passed the watchdog \(the adjoint run"):
        require_finite(s, 1.0, [("dJdh0", "cell", h), ("dJdu0", "edge", u)], "run")
    with pytest.raises(WatchdogError, match=r"^run: J = inf and dJdu0 not finite"):
        require_finite(s, float("inf"), [("dJdh0", "cell", h), ("dJdu0", "edge", u)], "run")
