"""Launch tuning per GPU architecture: the one place the launcher's measured choices live.

`TUNING["sm_90"]` holds what was measured on an H200 (figures: docs/decisions/0002-kernel-tuning.md,
benchmarks/RESULTS.md); any other architecture gets `DEFAULT`, the generic rules without the
per-kernel exceptions and without wide lanes (every choice there is correct on any GPU; only the
speed of the exceptions was measured, and only on the H200).
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Tuning:
    """How the launcher sizes lanes, grids, offsets and compiled level counts on one architecture."""

    #: Bytes of one lane (levels per thread): one vector load, the widest global access.
    lane_bytes: int = 16
    #: Bytes of a wide lane (two vector loads), for the gathers of `wide_gather_slots` and `wide_lanes`.
    wide_lane_bytes: int = 32
    #: {itemsize: most slots per row} of a generic gather run with wide lanes.
    wide_gather_slots: dict = dataclasses.field(default_factory=dict)
    #: {kernel: dtype names} run with wide lanes.
    wide_lanes: dict = dataclasses.field(default_factory=dict)
    #: Grid with several lanes per row, in resident blocks of the device.
    blocks_per_resident_lanes: int = 32
    #: Grid with one lane per row, in resident blocks of the device (then raised to `max_passes`).
    blocks_per_resident_rows: int = 4
    #: Most grid-stride passes per thread at one lane per row (None: no bound).
    max_passes: int | None = 3
    #: Kernels that take nlev at run time when a row is one lane (nlev 1 not compiled in).
    runtime_nlev: frozenset = frozenset()
    #: Kernels that keep 64-bit offsets where 32-bit ones would fit.
    offsets64: frozenset = frozenset()
    #: Kernels whose grid at one lane per row is not raised to bound the grid-stride passes.
    unbounded_passes: frozenset = frozenset()
    #: Slot-major gathers (one thread per row) take nlev at run time.
    slot_major_runtime_nlev: bool = False
    #: Bytes of levels per edge from which vector_laplacian_e2e runs as one composed stencil.
    composed_from_bytes: int = 16

    def wide(self, kernel: str, dtype) -> bool:
        """Whether `kernel` runs with wide lanes in `dtype` (a NumPy dtype)."""
        return dtype.name in self.wide_lanes.get(kernel, ())


_TWO_POINT_EDGE = frozenset({"grad_2e", "mean_2e"})

#: Measured on an H200 (sm_90); one line each says why the entry is there.
SM_90 = Tuning(
    # 2-slot adjoints, curl (3), kites and float32 div (6) ran 0.84-0.93x with wide lanes; more slots ran slower
    wide_gather_slots={4: 6, 8: 4},
    # ke_e2c float32 ran 0.92x (level 9) and 0.94x (level 10) with wide lanes; float64 1.12x at level 10
    wide_lanes={"ke_e2c": frozenset({"float32"})},
    # 32x against 4x the resident blocks: 4% faster (geometric mean) at nlev 32, up to 16% slower at nlev 1
    blocks_per_resident_lanes=32,
    # 4x the resident blocks at one lane per row (see the line above)
    blocks_per_resident_rows=4,
    # level 10, nlev 1, float64: about 10 passes per thread at 4x; the cell gathers up to 19% slower than with 3
    max_passes=3,
    # nlev 1 compiled in: NVRTC moved table loads after the first gathers (1.39x and 1.11x slower, float64)
    runtime_nlev=frozenset({"reconstruct_xyz_e2c", "pv_flux_e2e"}),
    # 32-bit offsets measured slower: two-point edge stencils by 3-13%, reconstruct_xyz_e2c by 37% at nlev 1
    offsets64=_TWO_POINT_EDGE | {"reconstruct_xyz_e2c", "reconstruct_xyz_e2c_adj_gather"},
    # the pass bound made the two-point edge stencils 4-27% slower (level 10, nlev 1, float64)
    unbounded_passes=_TWO_POINT_EDGE,
    # tangential_e2e 6% (float64) and 18% (float32) slower with nlev fixed at 1
    slot_major_runtime_nlev=True,
    # below 16 bytes the 11-slot tables outweigh the passes' traffic (1.16-1.21x); from 16: 0.64-0.96x
    composed_from_bytes=16,
)

#: Any other GPU: the generic rules, no wide lanes (unmeasured there) and no per-kernel exceptions.
DEFAULT = Tuning()

#: {architecture ("sm_" + compute capability): Tuning}; architectures not listed get DEFAULT.
TUNING = {"sm_90": SM_90}


def tuning_for(architecture: str) -> Tuning:
    """The tuning of `architecture` (e.g. "sm_90"), DEFAULT when it was not measured."""
    return TUNING.get(architecture, DEFAULT)
