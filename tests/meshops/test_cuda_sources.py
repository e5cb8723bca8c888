"""Compile every CUDA source with nvcc for sm_90, with nlev at run time and fixed at compile time,
with 64-bit and 32-bit offsets, and check what ptxas reports: no kernel spills registers to local
memory (gathers carry MESHOPS_FULL_OCCUPANCY, a 32-register cap, only where their values fit), and
the capped kernels really stay within 32 registers."""
import re
import shutil
import subprocess

import pytest

from meshops.device.kernels import CUDA_DIR, cuda_sources

from .host_harness import SOURCE_DIRS

#: Every CUDA source of the package: meshops's operator families and the models' kernels (swm/cuda,
#: hydrostatic/cuda).
SOURCES = cuda_sources() + [path for d in SOURCE_DIRS[1:] for path in sorted(d.glob("*.cu"))]

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found")


def _ptxas_report(source, lanes, offset32) -> dict[str, tuple[int, int]]:
    """{mangled kernel name: (registers, spill store bytes)} of every instantiation in `source`,
    compiled for `lanes` lanes per row (MESHOPS_NLEV), with 32-bit offsets if `offset32`."""
    options = ["-DMESHOPS_OFFSET32"] if offset32 else []
    run = subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-DMESHOPS_NVCC_CHECK", f"-DMESHOPS_NLEV={lanes}",
                          *options, f"-I{CUDA_DIR}", "-Xptxas", "-v", "-o", "/dev/null", str(source)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report, name, spills = {}, None, 0
    for line in run.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            name = m.group(1)
        elif m := re.search(r"(\d+) bytes spill stores", line):
            spills = int(m.group(1))
        elif (m := re.search(r"Used (\d+) registers", line)) and name is not None:
            report[name] = (int(m.group(1)), spills)
    return report


# Lanes per row the modules are compiled for: nlev at run time, one lane per row (nlev 1), and
# nlev 32: 16 lanes of 2 float64 levels (the W = 1 instances stand for odd level counts), wide
# lanes of 4 float64 (8 lanes) or 8 float32 levels (4 lanes).
@pytest.mark.parametrize("offset32", [False, True], ids=["offset64", "offset32"])
@pytest.mark.parametrize("lanes", [0, 1, 4, 8, 16])
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_kernels_do_not_spill(source, lanes, offset32):
    report = _ptxas_report(source, lanes, offset32)
    assert report, f"{source.name}: ptxas reported no kernels"
    spilling = {name: spills for name, (_, spills) in report.items() if spills}
    assert not spilling, f"{source.name}: kernels spill registers (bytes stored): {spilling}"
    texts = [source.read_text()] + [header.read_text() for header in CUDA_DIR.glob("*.cuh")]
    capped = {name for text in texts
              for name in re.findall(r"MESHOPS_FULL_OCCUPANCY\s+__global__\s+void\s+(\w+)\(", text)}
    over = {name: regs for name, (regs, _) in report.items()
            if any(f"{len(k)}{k}I" in name for k in capped) and regs > 32}
    assert not over, f"{source.name}: capped kernels above 32 registers: {over}"
