"""The fused path's stages for `framework.stepper`: the hydrostatic core's forward stage and its
records in `hydrostatic.fused`'s passes, its tangent-linear stage in `hydrostatic.fused_tangent`'s
and its adjoint stage in `hydrostatic.fused_adjoint`'s (each module's kernels, this one their use
by the stepper)."""
from __future__ import annotations

from framework import stepper
from framework.timestepping import AdjointRK4

from hydrostatic.fused import FusedStage, record_stage
from hydrostatic.fused_adjoint import FusedStageAdjoint
from hydrostatic.fused_tangent import FusedTangentStage


def _provisional(stage, prefix: str, j: int, fields) -> list:
    """Stage j's next provisional fields of (mass, theta_mass, u)-like `fields`: scratch of
    `stage`, alternating between two sets."""
    return [stage.scratch(f"{prefix}{name}Provisional{j % 2}", location, y) for name, location, y
            in zip(("mass", "thetaMass", "u"), ("cell", "cell", "edge"), fields)]


class FusedStages(stepper.TendencyStages):
    """The fused path's stages for `framework.stepper`, of a hydrostatic `model` (its device_mesh,
    phi_s, f_vertex and physics, read at each call): the forward stage in `FusedStage`'s passes,
    the records in them too (each stage's in its own scratch: `record_stage`), the tangent-linear
    stage in `hydrostatic.fused_tangent`'s on the records, or with the forward stage in the same
    passes (`stage_and_tl`, which the tangent-linear steps take), the adjoint stage in
    `hydrostatic.fused_adjoint`'s (either mode) with the RK4 bookkeeping inside its last two
    passes; `operator_stages` (the operator path's) gives the tendency callables of the base
    class."""

    def __init__(self, model, operator_stages: stepper.TendencyStages):
        super().__init__(operator_stages.tendency, operator_stages.tendency_tl,
                         operator_stages.tendency_adj)
        self.model = model
        self.forward = FusedStage(model.device_mesh)
        self._tangent = self._adjoint = None
        self._recorders: dict = {}

    outputs = staticmethod(stepper.uninitialised_outputs)

    def stage(self, j, provisional, update, old, new):
        m = self.model
        next = _provisional(self.forward, "", j, provisional)
        self.forward(*provisional, m.phi_s, m.f_vertex, m.physics, update, old=old, new=new,
                     next=next)
        return next

    def record(self, j, provisional, update, old):
        m = self.model
        recorder = self._recorders.get(j)
        if recorder is None:
            recorder = self._recorders[j] = FusedStage(m.device_mesh)
        return record_stage(recorder, provisional, m.phi_s, m.f_vertex, m.physics, update, old,
                            dump=self.forward)

    def stage_tl(self, j, record, dprovisional, dcontrols, update, old, new):
        if self._tangent is None:
            self._tangent = FusedTangentStage(self.model.device_mesh)
        m = self.model
        next = _provisional(self._tangent, "d", j, dprovisional)
        self._tangent(record["mass"], record["theta_mass"], record["u"], *dprovisional,
                      dcontrols[0] if dcontrols else None, m.phi_s, m.f_vertex, m.physics, update,
                      old=old, new=new, next=next)
        return next

    def stage_and_tl(self, j, provisional, dprovisional, dcontrols, update, old, new, dold, dnew):
        """The forward stage and its tangent-linear in the tangent-linear passes, which advance
        the forward too (`FusedTangentStage`, forward=...): (next, dnext)."""
        if self._tangent is None:
            self._tangent = FusedTangentStage(self.model.device_mesh)
        m = self.model
        next = _provisional(self.forward, "", j, provisional)
        dnext = _provisional(self._tangent, "d", j, dprovisional)
        self._tangent(*provisional, *dprovisional, dcontrols[0] if dcontrols else None, m.phi_s,
                      m.f_vertex, m.physics, update, old=dold, new=dnew, next=dnext,
                      forward=(old, new, next))
        return next, dnext

    def stage_adj(self, j, record, k_adj, update, y_adj, new_adj, controls_adj, mode):
        """The fused adjoint in `mode` with its bookkeeping in the kernels: k_adj is overwritten
        by stage j - 1's, phi_s_adj accumulated in place."""
        if self._adjoint is None:
            self._adjoint = FusedStageAdjoint(self.model.device_mesh)
        m = self.model
        phi_s_adj = self._adjoint(record, m.phi_s, m.physics, *k_adj,
                                  phi_s_adj=None if controls_adj is None else controls_adj[0],
                                  rk=AdjointRK4(tuple(y_adj), tuple(new_adj), update), mode=mode)
        return k_adj, [phi_s_adj]
