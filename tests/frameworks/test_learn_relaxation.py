"""examples/learn_relaxation.py, its default run (level 2, 40 epochs, about a minute on one
thread): the hybrid hydrostatic model learns the truth's missing temperature relaxation through
the model's adjoint (`adjoint.differentiable.torch_step` of the hydrostatic core), its loss
falling 30x or more below the uncorrected model's, and writes its figure."""
import importlib.util
import pathlib

import numpy as np
import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "learn_relaxation.py"


def _example():
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("learn_relaxation", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_learned_relaxation_lowers_the_loss(tmp_path, capsys):
    example = _example()
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = example.main(["--level", "2", "--epochs", "40", "--out", str(tmp_path)])
    finally:
        torch.set_num_threads(threads)
    losses = result["losses"]
    assert len(losses) == 40 and np.all(np.isfinite(losses))
    # measured: 101x below the uncorrected model (deterministic: the constants start at the guess)
    assert result["uncorrected_loss"] / result["final_loss"] >= 30.0, losses
    assert set(result["learned"]) == set(example.TRUE)
    out = capsys.readouterr().out
    assert "(uncorrected model) ->" in out and "learned" in out
    assert f"wrote {tmp_path / 'learn_relaxation.png'}" in out
    assert (tmp_path / "learn_relaxation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
