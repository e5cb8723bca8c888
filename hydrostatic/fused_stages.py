"""The fused path's stages for `framework.stepper`: the hydrostatic core's forward stage in
`hydrostatic.fused`'s passes and its tangent-linear stage in `hydrostatic.fused_tangent`'s (each
module's kernels, this one their use by the stepper)."""
from __future__ import annotations

from framework import stepper

from hydrostatic.fused import FusedStage
from hydrostatic.fused_tangent import FusedTangentStage


def _provisional(stage, prefix: str, j: int, fields) -> list:
    """Stage j's next provisional fields of (mass, theta_mass, u)-like `fields`: scratch of
    `stage`, alternating between two sets."""
    return [stage.scratch(f"{prefix}{name}Provisional{j % 2}", location, y) for name, location, y
            in zip(("mass", "thetaMass", "u"), ("cell", "cell", "edge"), fields)]


class FusedStages(stepper.TendencyStages):
    """The fused path's stages for `framework.stepper`, of a hydrostatic `model` (its device_mesh,
    phi_s, f_vertex and physics, read at each call): the forward stage in `FusedStage`'s passes,
    the tangent-linear stage in `hydrostatic.fused_tangent`'s on the records; the records (the
    provisional states) and the adjoint stages the operator path's (`operator_stages`: the fused
    stages equal it). Each sweep's buffers are copies of the state (the operator stages accumulate
    into them)."""

    def __init__(self, model, operator_stages: stepper.TendencyStages):
        super().__init__(operator_stages.tendency, operator_stages.tendency_tl,
                         operator_stages.tendency_adj)
        self.model = model
        self.forward = FusedStage(model.device_mesh)
        self._tangent = None

    def stage(self, j, provisional, update, old, new):
        m = self.model
        next = _provisional(self.forward, "", j, provisional)
        self.forward(*provisional, m.phi_s, m.f_vertex, m.physics, update, old=old, new=new,
                     next=next)
        return next

    def stage_tl(self, j, record, dprovisional, dcontrols, update, old, new):
        if self._tangent is None:
            self._tangent = FusedTangentStage(self.model.device_mesh)
        m = self.model
        next = _provisional(self._tangent, "d", j, dprovisional)
        self._tangent(*record, *dprovisional, dcontrols[0] if dcontrols else None, m.phi_s,
                      m.f_vertex, m.physics, update, old=old, new=new, next=next)
        return next
