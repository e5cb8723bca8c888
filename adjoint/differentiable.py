"""The model's RK4 step and an n-step run as differentiable functions of PyTorch and JAX, their
derivatives from the hand-written adjoint model (`swm.stepper`, `adjoint.gradient`).

    step = torch_step(model)             # (h, u, b) -> (h_next, u_next): one RK4 step
    run = torch_run(model, n_steps)      # (h0, u0, b) -> (h_N, u_N): n_steps RK4 steps
    h1, u1 = step(h, u, b); loss = f(h1, u1); loss.backward()    # h.grad, u.grad, b.grad

`jax_step(model)` and `jax_run(model, n_steps)` are the same maps as `jax.custom_vjp` functions
(usable inside `jax.jit`; float64 needs `jax.config.update("jax_enable_x64", True)`).

Derivatives. A run x_N = M_N(x_0; b), x = (h, u), gets from the framework g = dJ/dx_N and returns

    (dJ/dh0, dJ/du0, dJ/db) = M_N'(x_0; b)^T g,

the gradient of the linear cost <x_N, g> (`adjoint.sensitivity.FinalStateProjection`) that
`adjoint.gradient.run_gradient` computes: the same arithmetic, so bitwise the same numbers. The
step is the run of one step. `mode` is the operators' adjoint mode (None: the meshops default,
`meshops.get_adjoint_mode()`, when the function is made).

Memory of a run (`checkpointing`): None keeps x_0 .. x_{N-1} from the forward (N states) and the
backward reverses them without recomputation; a `adjoint.config.CheckpointConfig` (or a dict of its
keys) keeps x_0 only and the backward runs `run_gradient` under that schedule (Revolve, multistage
with disk snapshots, two-level: forward steps recomputed, bitwise the same gradient). For a
network inside a long run, `torch_step` per step lets autograd interleave the network's backward
with the model's adjoint; the saved inputs of each step are then the run's stored trajectory.

Controls. The topography b is an input: each call sets `model.b` to it and restores the model's
own b after the forward and after the backward. The model's other fields (f_vertex, physics, dt,
mesh) are constants. The model's own state (model.h, model.u) is neither read nor changed.

Arrays. CPU tensors and JAX arrays are handed to a NumPy model without copies (`Tensor.numpy`,
`torch.from_numpy`; `jax.pure_callback`). CUDA tensors go to a CuPy model (its `device_mesh` on
the tensors' device) through DLPack (`cupy.from_dlpack`, `torch.from_dlpack`), its kernels
launched on torch's current stream. JAX on a GPU hands a CuPy model XLA's device buffers
(`jax.experimental.buffer_callback`), its kernels launched on XLA's stream. h, u, b share one
dtype (float32 or float64) and have the shapes of the model's fields.

Ranks. The fields are the rank's local arrays, with the adjoint model's conventions
(`swm.stepper`): gradients have zero halo rows and are the transpose in the Euclidean inner
product over owned rows of every rank, so a loss must read owned rows only. On ranks, the forward
works on copies of the inputs (the state exchange writes halo rows in place).

`import adjoint` does not import this module; this module imports torch and jax only when their
functions are called.
"""
from __future__ import annotations

import contextlib
import functools

import numpy as np

from meshops.modes import resolve_mode

from adjoint.gradient import advance, controls, run_gradient
from swm.stepper import rk4_step_adj
from adjoint.sensitivity import FinalStateProjection
from adjoint.config import CheckpointConfig


class _Core:
    """A model's run of `n_steps` and its adjoint on the model's own arrays (NumPy or CuPy)."""

    def __init__(self, model, n_steps: int, mode: str, checkpointing, rank: int):
        if not (isinstance(n_steps, (int, np.integer)) and n_steps >= 1):
            raise ValueError(f"n_steps: expected a positive number of steps, got {n_steps!r}")
        self.model, self.n_steps, self.rank = model, int(n_steps), int(rank)
        self.mode = resolve_mode(mode)
        self.checkpointing = _checkpoint_config(checkpointing)
        self.xp = model.device_mesh.xp
        self.shapes = {"h": tuple(model.h.shape), "u": tuple(model.u.shape),
                       "b": tuple(model.b.shape)}

    @property
    def stores_trajectory(self) -> bool:
        return self.checkpointing is None

    def forward(self, h, u, b, keep: bool):
        """(h_N, u_N, kept): kept = [x_1, .., x_{N-1}] when `keep` and the trajectory is stored
        (no checkpointing), else None."""
        model = self.model
        state = [h, u] if model.distribution is None else [h.copy(), u.copy()]
        kept = [] if keep and self.stores_trajectory else None
        with controls(self.model, (b,)):
            for k in range(self.n_steps):
                if kept is not None and k:
                    kept.append(state)
                state = advance(model, state)
        return state[0], state[1], kept

    def backward(self, h0, u0, b, kept, h_adj, u_adj):
        """(dJ/dh0, dJ/du0, dJ/db) of J = <x_N, (h_adj, u_adj)> (module doc)."""
        model = self.model
        with controls(self.model, (b,)):
            if kept is None:
                _, grads, _ = run_gradient(model, (h0, u0),
                                           FinalStateProjection((h_adj, u_adj), self.n_steps),
                                           self.n_steps, mode=self.mode,
                                           checkpointing=self.checkpointing, rank=self.rank)
                return grads
            states = [(h0, u0)] + [tuple(x) for x in kept]
            lam, b_sum = (h_adj, u_adj), b * 0
            for k in range(self.n_steps - 1, -1, -1):     # as adjoint.checkpointing.reverse_sweep
                *lam, b_step = rk4_step_adj(model, *states[k], *lam, mode=self.mode)
                b_sum = b_sum + b_step
            return lam[0], lam[1], b_sum

    def check(self, fields, dtype_of, where: str) -> None:
        """Shapes against the model's fields, one floating dtype for all."""
        for name, x in fields.items():
            if tuple(x.shape) != self.shapes[name]:
                raise ValueError(f"{where}: {name} has shape {tuple(x.shape)}, expected "
                                 f"{self.shapes[name]} (the model's {name})")
        dtypes = {name: str(dtype_of(x)) for name, x in fields.items()}
        if len(set(dtypes.values())) > 1 or not all(d.endswith(("float32", "float64"))
                                                    for d in dtypes.values()):
            raise TypeError(f"{where}: expected h, u, b of one dtype, float32 or float64, got "
                            + ", ".join(f"{k} {v}" for k, v in dtypes.items()))


def _checkpoint_config(checkpointing):
    """None, or a `adjoint.config.CheckpointConfig` (from one, or from a dict of its keys)."""
    if checkpointing is None:
        return None

    if isinstance(checkpointing, CheckpointConfig):
        return checkpointing
    if isinstance(checkpointing, dict):
        return CheckpointConfig.model_validate(checkpointing)
    raise TypeError(f"checkpointing: expected None, an adjoint.config.CheckpointConfig or a dict of its "
                    f"keys (schedule, snapshots_in_ram, snapshots_on_disk, period, directory), "
                    f"got {type(checkpointing).__name__}")


# -- PyTorch ----------------------------------------------------------------------------------------

def torch_step(model, *, mode: str | None = None):
    """One RK4 step of `model` as a differentiable function (h, u, b) -> (h_next, u_next) of
    tensors; its backward is `swm.stepper.rk4_step_adj` in adjoint mode `mode`."""
    return torch_run(model, 1, mode=mode)


def torch_run(model, n_steps: int, *, checkpointing=None, mode: str | None = None,
              rank: int = 0):
    """`n_steps` RK4 steps of `model` as a differentiable function (h0, u0, b) -> (h_N, u_N) of
    tensors; its backward is the adjoint run (module doc), with `checkpointing` None (the
    trajectory kept by the forward) or a CheckpointConfig. `rank`: this rank's number, in the
    names of disk snapshots."""
    core = _Core(model, n_steps, mode, checkpointing, rank)
    function = _torch_function()

    def run(h0, u0, b):
        import torch

        keep = torch.is_grad_enabled() and any(t.requires_grad for t in (h0, u0, b))
        return function.apply(core, keep, h0, u0, b)

    run.__doc__ = f"{core.n_steps} RK4 step(s) of the model: (h0, u0, b) -> (h_N, u_N), tensors."
    return run


@functools.cache
def _torch_function():
    """The autograd.Function of a `_Core` (torch imported on first use)."""
    import torch
    from torch.autograd.function import once_differentiable

    class ModelRun(torch.autograd.Function):
        @staticmethod
        def forward(ctx, core, keep, h0, u0, b):
            fields = {"h": h0, "u": u0, "b": b}
            core.check(fields, lambda t: t.dtype, "adjoint.differentiable.torch_run")
            with _torch_arrays(core, fields, "adjoint.differentiable.torch_run") as (arrays, out):
                h_n, u_n, kept = core.forward(arrays["h"], arrays["u"], arrays["b"], keep)
                result = out(h_n), out(u_n)
            ctx.core, ctx.kept = core, kept
            ctx.save_for_backward(h0, u0, b)
            return result

        @staticmethod
        @once_differentiable
        def backward(ctx, h_bar, u_bar):
            core = ctx.core
            h0, u0, b = ctx.saved_tensors
            h_bar = torch.zeros_like(h0) if h_bar is None else h_bar
            u_bar = torch.zeros_like(u0) if u_bar is None else u_bar
            fields = {"h": h0, "u": u0, "b": b, "h_adj": h_bar.to(h0.dtype), "u_adj": u_bar.to(h0.dtype)}
            with _torch_arrays(core, fields, "adjoint.differentiable.torch_run backward") as (a, out):
                grads = core.backward(a["h"], a["u"], a["b"], ctx.kept, a["h_adj"], a["u_adj"])
                return (None, None) + tuple(out(g) for g in grads)

    return ModelRun


@contextlib.contextmanager
def _torch_arrays(core, tensors: dict, where: str):
    """(arrays, out): the tensors as arrays of the model's backend without copies, and `out`,
    an array of that backend -> tensor; on CUDA inside the tensors' device and torch's current
    stream."""
    import torch

    devices = {str(t.device) for t in tensors.values()}
    if len(devices) > 1:
        raise ValueError(f"{where}: tensors on several devices: "
                         + ", ".join(f"{k} {t.device}" for k, t in tensors.items()))
    device = next(iter(tensors.values())).device
    backend = "numpy" if core.xp is np else "cupy"
    wanted = "cpu" if backend == "numpy" else "cuda"
    if device.type != wanted:
        raise ValueError(f"{where}: tensors on {device}, the model runs on {backend} (its "
                         f"device_mesh): expected {wanted} tensors")
    if device.type == "cpu":
        yield ({k: t.detach().contiguous().numpy() for k, t in tensors.items()}, torch.from_numpy)
        return
    import cupy

    if core.model.device_mesh.device != device.index:
        raise ValueError(f"{where}: tensors on {device}, the model's device_mesh on CUDA device "
                         f"{core.model.device_mesh.device}")
    stream = torch.cuda.current_stream(device)
    with cupy.cuda.Device(device.index), cupy.cuda.ExternalStream(stream.cuda_stream, device.index):
        yield ({k: cupy.from_dlpack(t.detach().contiguous()) for k, t in tensors.items()},
               torch.from_dlpack)


# -- JAX --------------------------------------------------------------------------------------------

def jax_step(model, *, mode: str | None = None, callback: str | None = None):
    """One RK4 step of `model` as a `jax.custom_vjp` function (h, u, b) -> (h_next, u_next); its
    VJP is `swm.stepper.rk4_step_adj` in adjoint mode `mode`."""
    return jax_run(model, 1, mode=mode, callback=callback)


def jax_run(model, n_steps: int, *, checkpointing=None, mode: str | None = None,
            rank: int = 0, callback: str | None = None):
    """`n_steps` RK4 steps of `model` as a `jax.custom_vjp` function (h0, u0, b) -> (h_N, u_N),
    usable inside `jax.jit`; its VJP is the adjoint run (module doc). With `checkpointing` None the
    trajectory x_1 .. x_{N-1} is a residual of the VJP (JAX arrays of shape (N - 1, n)); with a
    CheckpointConfig only (h0, u0, b) are. `callback` as `meshops.jax` ("pure" or "buffer"; None:
    "buffer" for a CuPy model when JAX runs on a GPU, so that the model reads and writes XLA's
    device buffers on XLA's stream, "pure" otherwise)."""
    import jax

    from meshops.jax import _buffer, _pure, resolve_callback

    core = _Core(model, n_steps, mode, checkpointing, rank)
    where = "adjoint.differentiable.jax_run"
    on_device = core.xp is not np and jax.default_backend() == "gpu" and resolve_callback(callback) == "buffer"

    def call(fn, out_structs, *args):
        """fn(*model arrays) -> model arrays, run by a JAX callback on (JAX) `args`."""
        if on_device:        # CuPy arrays on XLA's buffers, results copied into its outputs
            return _buffer(fn, out_structs, args)

        def host_fn(*arrays):  # host arrays (NumPy or JAX CPU), no copy for a NumPy model
            out = fn(*(core.xp.asarray(np.asarray(a)) for a in arrays))
            return tuple(o.get() if hasattr(o, "get") else o for o in out)
        return _pure(host_fn, out_structs, args)

    def structs(*arrays, lead=None):
        return tuple(jax.ShapeDtypeStruct(((lead,) if lead is not None else ()) + tuple(a.shape),
                                          a.dtype) for a in arrays)

    def forward(keep):
        def fn(h, u, b):
            h_n, u_n, kept = core.forward(h, u, b, keep)
            if kept is None:
                return h_n, u_n
            xp = core.xp
            stack = [xp.stack([x[i] for x in kept]) if kept else xp.zeros((0,) + s.shape, s.dtype)
                     for i, s in enumerate((h, u))]
            return h_n, u_n, stack[0], stack[1]
        return fn

    def backward(h, u, b, kept_h, kept_u, h_adj, u_adj):
        kept = None if kept_h is None else list(zip(kept_h, kept_u))
        return core.backward(h, u, b, kept, h_adj, u_adj)

    def checked(h, u, b):
        core.check({"h": h, "u": u, "b": b}, lambda a: a.dtype, where)

    def primal(h0, u0, b):
        checked(h0, u0, b)
        return tuple(call(forward(False), structs(h0, u0), h0, u0, b))

    run = jax.custom_vjp(primal)

    def run_fwd(h0, u0, b):
        checked(h0, u0, b)
        if core.stores_trajectory:
            h_n, u_n, kept_h, kept_u = call(
                forward(True), structs(h0, u0) + structs(h0, u0, lead=core.n_steps - 1), h0, u0, b)
            return (h_n, u_n), (h0, u0, b, kept_h, kept_u)
        return primal(h0, u0, b), (h0, u0, b, None, None)

    def run_bwd(residuals, cotangents):
        h0, u0, b, kept_h, kept_u = residuals
        h_adj, u_adj = (c.astype(h0.dtype) for c in cotangents)
        if kept_h is None:
            fn = lambda h, u, bb, ha, ua: backward(h, u, bb, None, None, ha, ua)  # noqa: E731
            args = (h0, u0, b, h_adj, u_adj)
        else:
            fn, args = backward, (h0, u0, b, kept_h, kept_u, h_adj, u_adj)
        return tuple(call(fn, structs(h0, u0, b), *args))

    run.defvjp(run_fwd, run_bwd)
    return run


__all__ = ["torch_step", "torch_run", "jax_step", "jax_run"]
