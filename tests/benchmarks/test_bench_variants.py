"""The A/B switch of benchmarks/bench_variants.py on the CPU: which sources a module is compiled
from and which grid bound a launch gets, under the baseline and the variant."""
import shutil

import numpy as np
import pytest

import meshops.device.kernels as kernels
from benchmarks import bench_variants
from meshops.device.kernels import GATHER, DeviceProperties, Family, Launcher

#: A device holding 100 resident blocks of 256 threads.
DEVICE = DeviceProperties(index=0, architecture="sm_90", multiprocessors=50, threads_per_sm=512)


@pytest.fixture
def launches():
    """(base launcher, [(source directory, max_passes, blocks) of every launch]): a launcher whose
    compilation records the module's sources and whose kernels do nothing."""
    seen, current = [], {}

    def compile(module):
        current["sources"] = module.sources
        return {name: lambda grid, block, args: None for name in module.names}

    def observe(launch):
        current.update(max_passes=launch.max_passes, blocks=launch.blocks)

    base = Launcher(device=lambda: DEVICE, compile=compile, address=lambda a: a.ctypes.data)
    with kernels.observe_launches(observe):
        yield base, seen, lambda: seen.append((current["sources"], current["max_passes"], current["blocks"]))


def gather(n_rows):
    """One generic gather over n_rows rows of one level."""
    idx, coef = np.zeros((n_rows, 2), np.int32), np.ones((n_rows, 2))
    x, out = np.ones(n_rows), np.empty(n_rows)
    Family("divergence", (GATHER,)).gather(n_rows, idx, coef, x, out)


def test_sources_switch(tmp_path, launches):
    base, seen, record = launches
    other = tmp_path / "cuda"
    shutil.copytree(kernels.CUDA_DIR, other)
    variant = bench_variants.Variant(sources=other, base=base)
    for label in ("base", "variant", "base"):
        variant.active = label
        gather(10)
        record()
    variant.close()
    assert [s for s, _, _ in seen] == [kernels.CUDA_DIR, other.resolve(), kernels.CUDA_DIR]
    assert kernels.launcher() is not variant.launchers["base"]


def test_max_passes_switch(launches):
    base, seen, record = launches
    n = 3000 * kernels.BLOCK_SIZE + 1          # 7.5 passes per thread at 4x the resident blocks
    variant = bench_variants.Variant(max_passes=None, base=base)
    for label in ("base", "variant"):
        variant.active = label
        gather(n)
        record()
    variant.close()
    assert [(passes, blocks) for _, passes, blocks in seen] == [(3, 1001), (None, 400)]


def test_rejects_a_directory_without_the_sources(tmp_path):
    with pytest.raises(FileNotFoundError, match="--sources .*common.cuh"):
        bench_variants.Variant(sources=tmp_path, base=Launcher(device=lambda: DEVICE))


def test_needs_a_variant():
    with pytest.raises(SystemExit):
        bench_variants.parse_args(["--level", "5"])
    assert bench_variants.parse_args(["--max-passes", "none"]).max_passes is None
    assert bench_variants.parse_args(["--max-passes", "8"]).max_passes == 8
