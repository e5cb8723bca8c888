"""The A/B switch of benchmarks/bench_variants.py on the CPU: which sources a module is compiled
from and which grid bound a launch gets, under the baseline and the variant."""
import functools
import shutil

import pytest

import meshops.device.kernels as kernels
from benchmarks import bench_variants


@pytest.fixture
def compiled_from(monkeypatch):
    """[CUDA_DIR at each compilation]: kernels._module replaced by a recording stand-in."""
    seen = []

    @functools.lru_cache(maxsize=None)
    def module(*args):
        seen.append(kernels.CUDA_DIR)
        return {"args": args}

    monkeypatch.setattr(kernels, "_module", module)
    monkeypatch.setattr(kernels, "_resident_blocks", lambda device, block_size: 100)
    return seen


def test_sources_switch(tmp_path, compiled_from):
    other = tmp_path / "cuda"
    shutil.copytree(kernels.CUDA_DIR, other)
    package, original = kernels.CUDA_DIR, kernels._module
    variant = bench_variants.Variant(sources=other)
    args = ("divergence", ("k",), "double", 1, 1, True, 0, 256)
    kernels._module(*args)
    variant.active = "variant"
    kernels._module(*args)
    kernels._module(*args)                      # cached per source tree
    variant.active = "base"
    kernels._module(*args)
    assert compiled_from == [package, other.resolve()]
    assert kernels.CUDA_DIR == package
    variant.close()
    assert kernels._module is original


def test_max_passes_switch(compiled_from):
    block = kernels.BLOCK_SIZE
    original = kernels._grid_blocks
    variant = bench_variants.Variant(max_passes=None)
    n = 3000 * block + 1                        # 7.5 passes per thread at 4x the resident blocks
    assert kernels._grid_blocks(n, 1, 0, 3) == 1001
    variant.active = "variant"
    assert kernels._grid_blocks(n, 1, 0, 3) == 400
    assert kernels._grid_blocks(n, 1, 0, None) == 400   # kernels without a bound keep none
    assert kernels._grid_blocks(n, 16, 0, 3) == 3001    # several lanes per row: no bound
    variant.close()
    assert kernels._grid_blocks is original


def test_rejects_a_directory_without_the_sources(tmp_path, compiled_from):
    with pytest.raises(FileNotFoundError, match="--sources .*common.cuh"):
        bench_variants.Variant(sources=tmp_path)


def test_needs_a_variant():
    with pytest.raises(SystemExit):
        bench_variants.parse_args(["--level", "5"])
    assert bench_variants.parse_args(["--max-passes", "none"]).max_passes is None
    assert bench_variants.parse_args(["--max-passes", "8"]).max_passes == 8
