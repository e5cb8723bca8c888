"""The snapshot memory plan on the GPU under a capped CuPy pool: `snapshots_in_ram: auto` with
room for a few dozen states beside the sweep's measured work must run the whole gradient inside
the cap (an allocation past it raises OutOfMemoryError) and give the stored-trajectory gradient
bitwise, in both dtypes. A plan that underestimates what a sweep holds fails here, not in a
user's run."""
import numpy as np
import pytest
import yaml

from swm.costs import RegionCost
from adjoint.gradient import prepare, run_gradient
from adjoint.sensitivity import cost_context
from adjoint.snapshot_memory import WORK_STATES, step_bytes
from adjoint.config import CheckpointConfig
from meshrun.config import load_config
from swm.driver import setup

pytestmark = pytest.mark.gpu

STEPS = 96
ROOM = 24          # states the cap leaves beside the sweep's work


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_auto_snapshots_run_inside_a_capped_pool(tmp_path, dtype):
    import cupy

    path = tmp_path / "w5.yaml"
    path.write_text(yaml.safe_dump({"mesh": {"generate": {"level": 5}}, "backend": "cupy",
                                    "dtype": dtype, "case": {"name": "williamson5"},
                                    "time": {"days": STEPS * 900 / 86400, "dt": 900}}))
    s = setup(load_config(path))
    model = s.model
    cost = RegionCost(cost_context(s), "h", "mean", ((20.0, 50.0), (300.0, 340.0)))
    rng = np.random.default_rng()
    h0 = model.h * (1 + 1e-3 * cupy.asarray(rng.standard_normal(model.h.shape), model.h.dtype))
    value, grads, _ = run_gradient(model, (h0, model.u), cost, STEPS, schedule="none")
    grads = [g.get() for g in grads]
    state = h0.nbytes + model.u.nbytes
    work = prepare(model)
    assert 2 * state <= work <= 200 * state
    snapshots = 2 * ROOM
    fixed = CheckpointConfig(schedule="multistage", snapshots_in_ram=snapshots)
    with step_bytes(cupy) as sweep:                  # the whole sweep's high-water mark
        run_gradient(model, (h0, model.u), cost, STEPS, checkpointing=fixed)
    budget = work + (snapshots + WORK_STATES) * state
    assert sweep["peak"] <= budget, (f"the sweep held {sweep['peak']} bytes, the plan budgets "
                                     f"{budget}: work {work}, state {state}, {snapshots} snapshots")
    pool = cupy.get_default_memory_pool()
    cupy.cuda.Device().synchronize()
    pool.free_all_blocks()
    pool.set_limit(size=pool.total_bytes() + work + (ROOM + WORK_STATES) * state + (4 << 20))
    try:
        config = CheckpointConfig(schedule="multistage", snapshots_in_ram="auto")
        try:
            got_value, got, stats = run_gradient(model, (h0, model.u), cost, STEPS,
                                                 checkpointing=config)
            cupy.cuda.Device().synchronize()
        except cupy.cuda.memory.OutOfMemoryError as exc:
            pytest.fail(f"{exc}: pool used {pool.used_bytes()}, held {pool.total_bytes()}, work "
                        f"{work}, state {state}, sweep peak at {snapshots} snapshots {sweep['peak']}")
    finally:
        pool.set_limit(size=0)
    assert "snapshots_in_ram = auto: " in stats.memory and stats.recomputed > 0
    chosen = int(stats.memory.split("auto: ")[1].split()[0])
    assert 0.5 * ROOM <= chosen < STEPS, stats.memory
    assert got_value == value
    assert all(np.array_equal(a.get(), b) for a, b in zip(got, grads))
