"""A model's RK4 step and an n-step run as differentiable functions of PyTorch and JAX, their
derivatives from the hand-written adjoint model (`framework.stepper`, `adjoint.gradient`). Any model of
the shared stepper: its state fields x (`model.state_names`, at `model.state_locations`) and
controls c (`model.control_names`, `model.controls`) are the inputs, the state N steps later the
outputs. Shallow water, x = (h, u), c = (b,):

    step = torch_step(model)             # (h, u, b) -> (h_next, u_next): one RK4 step
    run = torch_run(model, n_steps)      # (h0, u0, b) -> (h_N, u_N): n_steps RK4 steps
    h1, u1 = step(h, u, b); loss = f(h1, u1); loss.backward()    # h.grad, u.grad, b.grad

and the hydrostatic core (`hydrostatic.model.Model`), (mass, theta_mass, u, phi_s) -> (mass,
theta_mass, u). `jax_step(model)` and `jax_run(model, n_steps)` are the same maps as
`jax.custom_vjp` functions (usable inside `jax.jit`; float64 needs
`jax.config.update("jax_enable_x64", True)`).

Derivatives. A run x_N = M_N(x_0; c) gets from the framework g = dJ/dx_N and returns

    (dJ/dx_0, dJ/dc) = M_N'(x_0; c)^T g,

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

Controls. The controls (shallow water: the topography b; hydrostatic: the surface geopotential
phi_s) are inputs: each call sets `model.controls` to them and restores the model's own after the
forward and after the backward. The model's other fields (f_vertex, physics, dt, mesh) are
constants. The model's own state (`model.state`: model.h, model.u) is neither read nor changed.

Arrays. CPU tensors and JAX arrays are handed to a NumPy model without copies (`Tensor.numpy`,
`torch.from_numpy`; `jax.pure_callback`). CUDA tensors go to a CuPy model (its `device_mesh` on
the tensors' device) through DLPack (`cupy.from_dlpack`, `torch.from_dlpack`), its kernels
launched on torch's current stream. JAX on a GPU hands a CuPy model XLA's device buffers
(`jax.experimental.buffer_callback`), its kernels launched on XLA's stream. The state fields and
controls share one dtype (float32 or float64) and have the shapes of the model's fields; a wrong
one is an error naming the field.

Ranks. The fields are the rank's local arrays, with the adjoint model's conventions
(`framework.stepper`): gradients have zero halo rows and are the transpose in the Euclidean inner
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
from framework.stepper import rk4_step_adj
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
        self.n_state = len(model.state_names)
        self.names = tuple(model.state_names) + tuple(model.control_names)
        self.shapes = {name: tuple(x.shape)
                       for name, x in zip(self.names, tuple(model.state) + tuple(model.controls))}

    @property
    def stores_trajectory(self) -> bool:
        return self.checkpointing is None

    @property
    def signature(self) -> str:
        """"(x_0.., c..) -> (x_N..)" in the model's names."""
        state = ", ".join(self.names[:self.n_state])
        return f"({', '.join(self.names)}) -> ({state})"

    def forward(self, fields, keep: bool):
        """(x_N, kept) of the inputs `fields` = (*x_0, *c): kept = [x_1, .., x_{N-1}] when `keep`
        and the trajectory is stored (no checkpointing), else None."""
        model, n = self.model, self.n_state
        state = list(fields[:n]) if model.distribution is None else [x.copy() for x in fields[:n]]
        kept = [] if keep and self.stores_trajectory else None
        with controls(model, fields[n:]):
            for k in range(self.n_steps):
                if kept is not None and k:
                    kept.append(state)
                state = advance(model, state)
        return tuple(state), kept

    def backward(self, fields, kept, state_adj):
        """(*dJ/dx_0, *dJ/dc) of J = <x_N, state_adj> (module doc) at the inputs `fields`."""
        model, n = self.model, self.n_state
        state0, values = tuple(fields[:n]), fields[n:]
        with controls(model, values):
            if kept is None:
                _, grads, _ = run_gradient(model, state0,
                                           FinalStateProjection(state_adj, self.n_steps),
                                           self.n_steps, mode=self.mode,
                                           checkpointing=self.checkpointing, rank=self.rank)
                return tuple(grads)
            states = [state0] + [tuple(x) for x in kept]
            lam, sums = tuple(state_adj), [c * 0 for c in values]
            for k in range(self.n_steps - 1, -1, -1):     # as adjoint.checkpointing.reverse_sweep
                adj = rk4_step_adj(model, *states[k], *lam, mode=self.mode)
                lam = adj[:n]
                sums = [total + part for total, part in zip(sums, adj[n:])]
            return (*lam, *sums)

    def check(self, fields, dtype_of, where: str) -> None:
        """The number of inputs, their shapes against the model's fields, one floating dtype for
        all."""
        if len(fields) != len(self.names):
            raise TypeError(f"{where}: expected {len(self.names)} inputs {self.signature}, got "
                            f"{len(fields)}")
        for name, x in zip(self.names, fields):
            if tuple(x.shape) != self.shapes[name]:
                raise ValueError(f"{where}: {name} has shape {tuple(x.shape)}, expected "
                                 f"{self.shapes[name]} (the model's {name})")
        dtypes = {name: str(dtype_of(x)) for name, x in zip(self.names, fields)}
        if len(set(dtypes.values())) > 1 or not all(d.endswith(("float32", "float64"))
                                                    for d in dtypes.values()):
            raise TypeError(f"{where}: expected {', '.join(self.names)} of one dtype, float32 or "
                            f"float64, got " + ", ".join(f"{k} {v}" for k, v in dtypes.items()))


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
    """One RK4 step of `model` as a differentiable function (*x, *c) -> x_next of tensors
    (shallow water: (h, u, b) -> (h_next, u_next)); its backward is `framework.stepper.rk4_step_adj` in
    adjoint mode `mode`."""
    return torch_run(model, 1, mode=mode)


def torch_run(model, n_steps: int, *, checkpointing=None, mode: str | None = None,
              rank: int = 0):
    """`n_steps` RK4 steps of `model` as a differentiable function (*x_0, *c) -> x_N of tensors
    (shallow water: (h0, u0, b) -> (h_N, u_N)); its backward is the adjoint run (module doc), with
    `checkpointing` None (the trajectory kept by the forward) or a CheckpointConfig. `rank`: this
    rank's number, in the names of disk snapshots."""
    core = _Core(model, n_steps, mode, checkpointing, rank)
    function = _torch_function()

    def run(*fields):
        import torch

        keep = torch.is_grad_enabled() and any(t.requires_grad for t in fields)
        return function.apply(core, keep, *fields)

    run.__doc__ = f"{core.n_steps} RK4 step(s) of the model: {core.signature}, tensors."
    return run


@functools.cache
def _torch_function():
    """The autograd.Function of a `_Core` (torch imported on first use)."""
    import torch
    from torch.autograd.function import once_differentiable

    class ModelRun(torch.autograd.Function):
        @staticmethod
        def forward(ctx, core, keep, *fields):
            where = "adjoint.differentiable.torch_run"
            core.check(fields, lambda t: t.dtype, where)
            with _torch_arrays(core, dict(zip(core.names, fields)), where) as (arrays, out):
                state, kept = core.forward(tuple(arrays.values()), keep)
                result = tuple(out(x) for x in state)
            ctx.core, ctx.kept = core, kept
            ctx.save_for_backward(*fields)
            return result

        @staticmethod
        @once_differentiable
        def backward(ctx, *state_bar):
            core = ctx.core
            fields = ctx.saved_tensors
            state_bar = [torch.zeros_like(x) if bar is None else bar.to(x.dtype)
                         for x, bar in zip(fields, state_bar)]
            tensors = dict(zip(core.names, fields))
            tensors.update({f"{name}_adj": bar for name, bar in zip(core.names, state_bar)})
            with _torch_arrays(core, tensors, "adjoint.differentiable.torch_run backward") as (a, out):
                arrays = list(a.values())
                n = len(fields)
                grads = core.backward(arrays[:n], ctx.kept, arrays[n:])
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
    """One RK4 step of `model` as a `jax.custom_vjp` function (*x, *c) -> x_next (shallow water:
    (h, u, b) -> (h_next, u_next)); its VJP is `framework.stepper.rk4_step_adj` in adjoint mode `mode`."""
    return jax_run(model, 1, mode=mode, callback=callback)


def jax_run(model, n_steps: int, *, checkpointing=None, mode: str | None = None,
            rank: int = 0, callback: str | None = None):
    """`n_steps` RK4 steps of `model` as a `jax.custom_vjp` function (*x_0, *c) -> x_N (shallow
    water: (h0, u0, b) -> (h_N, u_N)), usable inside `jax.jit`; its VJP is the adjoint run (module
    doc). With `checkpointing` None the trajectory x_1 .. x_{N-1} is a residual of the VJP (JAX
    arrays of shape (N - 1, *field shape)); with a CheckpointConfig only the inputs are.
    `callback` as `meshops.jax` ("pure" or "buffer"; None: "buffer" for a CuPy model when JAX runs
    on a GPU, so that the model reads and writes XLA's device buffers on XLA's stream, "pure"
    otherwise)."""
    import jax

    from meshops.jax import buffer_call, pure_call, resolve_callback

    core = _Core(model, n_steps, mode, checkpointing, rank)
    n = core.n_state
    where = "adjoint.differentiable.jax_run"
    on_device = core.xp is not np and jax.default_backend() == "gpu" and resolve_callback(callback) == "buffer"

    def call(fn, out_structs, *args):
        """fn(*model arrays) -> model arrays, run by a JAX callback on (JAX) `args`."""
        if on_device:        # CuPy arrays on XLA's buffers, results copied into its outputs
            return buffer_call(fn, out_structs, args)

        def host_fn(*arrays):  # host arrays (NumPy or JAX CPU), no copy for a NumPy model
            out = fn(*(core.xp.asarray(np.asarray(a)) for a in arrays))
            return tuple(o.get() if hasattr(o, "get") else o for o in out)
        return pure_call(host_fn, out_structs, args)

    def structs(arrays, lead=None):
        return tuple(jax.ShapeDtypeStruct(((lead,) if lead is not None else ()) + tuple(a.shape),
                                          a.dtype) for a in arrays)

    def forward(keep):
        def fn(*fields):
            state, kept = core.forward(fields, keep)
            if kept is None:
                return state
            xp = core.xp
            stack = [xp.stack([x[i] for x in kept]) if kept else xp.zeros((0,) + s.shape, s.dtype)
                     for i, s in enumerate(fields[:n])]
            return (*state, *stack)
        return fn

    def backward_stored(*arrays):
        """(*fields, *kept stacks, *state_adj) -> the gradients."""
        fields, stacks, state_adj = arrays[:len(core.names)], arrays[-2 * n:-n], arrays[-n:]
        return core.backward(fields, list(zip(*stacks)), state_adj)

    def backward_checkpointed(*arrays):
        """(*fields, *state_adj) -> the gradients."""
        return core.backward(arrays[:-n], None, arrays[-n:])

    def primal(*fields):
        core.check(fields, lambda a: a.dtype, where)
        return tuple(call(forward(False), structs(fields[:n]), *fields))

    run = jax.custom_vjp(primal)

    def run_fwd(*fields):
        core.check(fields, lambda a: a.dtype, where)
        if core.stores_trajectory:
            out = call(forward(True), structs(fields[:n]) + structs(fields[:n], lead=core.n_steps - 1),
                       *fields)
            return tuple(out[:n]), (fields, tuple(out[n:]))
        return primal(*fields), (fields, None)

    def run_bwd(residuals, cotangents):
        fields, stacks = residuals
        state_adj = tuple(c.astype(fields[0].dtype) for c in cotangents)
        if stacks is None:
            return tuple(call(backward_checkpointed, structs(fields), *fields, *state_adj))
        return tuple(call(backward_stored, structs(fields), *fields, *stacks, *state_adj))

    run.defvjp(run_fwd, run_bwd)
    return run


__all__ = ["torch_step", "torch_run", "jax_step", "jax_run"]
