"""The fused path's stages for `framework.stepper`: the shallow-water forward and recording stages
in `swm.fused`'s passes, the tangent-linear stage in `swm.fused_tangent`'s and the adjoint stage in
`swm.fused_adjoint`'s (each module's kernels, this one their use by the stepper)."""
from __future__ import annotations

from framework import stepper
from framework.timestepping import AdjointRK4, AdjointUpdate
from swm.fused import FusedRK4
from swm.fused_adjoint import FusedStageAdjoint
from swm.fused_tangent import FusedTangent


class FusedStages:
    """The fused path's stages for `framework.stepper` (its `Stages`), of a shallow-water `model` (its
    device_mesh, b, f_vertex and physics, read at each call): the forward and recording stages in
    `FusedRK4`'s passes, the tangent-linear stage in `swm.fused_tangent`'s on the records, the
    adjoint stage in `swm.fused_adjoint`'s with the RK4 bookkeeping inside its last two passes.
    The provisional state of a stage goes to scratch fields (the cell pass reads h at its
    neighbours, so h alternates between two; the edge pass does not read u: in place)."""

    def __init__(self, model):
        self.model = model
        self.forward = FusedRK4(model.device_mesh)
        self._tangent = self._adjoint = None

    outputs = staticmethod(stepper.uninitialised_outputs)

    def stage(self, j, provisional, update, old, new):
        m, scratch = self.model, self.forward.scratch
        h, u = provisional
        next = (scratch(f"hProvisional{j % 2}", "cell", h), scratch("uProvisional", "edge", u))
        self.forward.stage(h, u, m.b, m.f_vertex, m.physics, update, old=old, new=new, next=next)
        return next

    def record(self, j, provisional, update, old):
        m = self.model
        return self.forward.record(j, *provisional, m.b, m.f_vertex, m.physics, update, old)

    def stage_tl(self, j, record, dprovisional, dcontrols, update, old, new):
        if self._tangent is None:
            self._tangent = FusedTangent(self.model.device_mesh)
        scratch = self._tangent.scratch
        dh, du = dprovisional
        next = (scratch(f"dhProvisional{j % 2}", "cell", dh), scratch("duProvisional", "edge", du))
        db = dcontrols[0] if dcontrols else None
        self._tangent.stage(record, self.model.physics, dh, du, db, update, old=old, new=new,
                            next=next)
        return next

    def stage_adj(self, j, record, k_adj, update: AdjointUpdate, y_adj, new_adj, controls_adj, mode):
        """The stage's adjoint with its bookkeeping in the kernels: k_adj is overwritten by stage
        j - 1's, b_adj accumulated in place."""
        if self._adjoint is None:
            self._adjoint = FusedStageAdjoint(self.model.device_mesh)
        rk = AdjointRK4(tuple(y_adj), tuple(new_adj), update)
        _, _, b_adj = self._adjoint(record, self.model.physics, *k_adj,
                                    b_adj=None if controls_adj is None else controls_adj[0], rk=rk,
                                    mode=mode)
        return k_adj, (b_adj,)
