"""examples/learn_forcing.py, reduced to a level-3 mesh and 20 epochs: the network learns the
truth's missing jet relaxation through the model's adjoint, and the corrected model's 5-day
forecast beats the uncorrected one's.

Thresholds: on level 3 with 20 epochs the loss fell 19-27x over network seeds 1-3 and the
corrected forecast's rms errors at day 5 were 0.30-0.32 (h) and 0.39-0.44 (u) of the uncorrected
ones (0.81 for h with one other seed); the test asks for the issue's 10x and for the corrected
forecast better at every 6-hourly time, for a fresh seed."""
import importlib.util
import pathlib

import numpy as np
import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "learn_forcing.py"


def _example():
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("learn_forcing", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(result):
    losses = result["losses"]
    assert len(losses) == 20 and np.all(np.isfinite(losses))
    assert losses[0] / result["final_loss"] >= 10.0, losses
    u, c = result["errors"]["uncorrected"], result["errors"]["corrected"]
    assert u["hours"] == c["hours"] and u["hours"][-1] == 120.0
    for field in ("h", "u"):
        a, b = np.asarray(u[field][1:]), np.asarray(c[field][1:])
        # the requirement: the corrected forecast is better, here at every 6-hourly time to day 5
        # (day-5 ratios over network seeds at this level: 0.28-0.81 for h, 0.35-0.44 for u)
        assert np.all(b < a), (field, a, b)


def test_learned_forcing_lowers_the_loss_tenfold_and_improves_the_forecast(tmp_path, rng, capsys):
    example = _example()
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)          # the per-edge network is small: threads only contend
    try:
        result = example.main(["--level", "3", "--epochs", "20", "--seed", str(int(rng.integers(1000))),
                               "--out", str(tmp_path)])
    finally:
        torch.set_num_threads(threads)
    _check(result)
    out = capsys.readouterr().out
    assert "(uncorrected model) ->" in out and f"wrote {tmp_path / 'learn_forcing.png'}" in out
    assert (tmp_path / "learn_forcing.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.gpu
def test_learned_forcing_on_the_gpu(rng):
    example = _example()
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a PyTorch build with CUDA")
    _check(example.experiment(level=3, backend="cupy", epochs=20, seed=int(rng.integers(1000))))
