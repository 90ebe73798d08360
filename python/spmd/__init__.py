"""spmd from Python: turn a single-device training step into a distributed one.

    import spmd

    @spmd.compile(parallel_mode="fsdp")        # ddp | fsdp | tp | fsdp-tp
    def train_step(model, optimizer, x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    for x, y in data:                          # every rank: the same global batch
        loss = train_step(model, optimizer, x, y)

and `mpirun -np 4 python train.py`: each process is one rank of the MPI
job (the world is MPI_COMM_WORLD; a process started without mpirun is a
world of one). The first call traces the step (forward, loss, backward,
optimizer update; spmd-capture's tracer), partitions it for the mode and the
device mesh (`spmd-parallelize` on rank 0, which sends the per-rank program
to the others), lowers and JIT-compiles it; every later call runs it.

- **The batch** (tensors, DLPack arrays or constants, or containers of
  them: dicts, lists, tuples): every rank passes the *global* batch (the
  single-device step's; load the same data on every rank, e.g. the same
  seed); each rank keeps the piece its layout gives it (its Shard(0) rows
  under data parallelism, all of it under tensor parallelism).
- **State**: the first call takes the parameters, buffers and optimizer
  state (zero if the optimizer has not stepped) from rank 0's model and
  optimizer, as DDP does; from then on they live sharded in the runtime and
  the model's own tensors are not updated: `state_dict()` gathers them,
  `sync(model, optimizer)` writes them back, `save(dir)` / `load(dir)` write
  and read a sharded checkpoint (each rank its own pieces, plus metadata to
  reload on another mesh).
- **Evaluating**: `train_step.eval_step(fn)` compiles fn(model, *batch), a
  forward-only step (validation loss, metrics) that runs on that state,
  sharded, without gathering it (EvalStep).
- **Per call**: each group's learning rate is read from
  `optimizer.param_groups[g]["lr"]` (a scheduler changes it without a
  recompile); the step count (Adam's bias correction, dropout's draws) counts
  the steps taken. A call whose batch shapes, dtypes or Python constants, or
  whose optimizer's other hyperparameters, differ from the compiled ones
  recompiles (`on_recompile="recompile"`; the last `cache_size` programs
  are kept, and a call that matches one switches to it, the state moving
  along) or raises (`"error"`), as torch.compile's guards.
- **The train_step** calls `loss.backward()` on scalar losses (once, or
  per micro-batch: gradient accumulation) and `optimizer.step()` once after;
  `.grad`s behave as in PyTorch (clip them with
  torch.nn.utils.clip_grad_norm_ in between; zero_grad before the first
  backward or after the step). A call may also only accumulate: backward()
  without step(), the gradients carried into the next call, as PyTorch's
  gradient accumulation across iterations (`if (i + 1) % k == 0:
  optimizer.step(); optimizer.zero_grad()`). The optimizer is
  torch.optim's SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, RAdam, NAdam,
  Adadelta, Adafactor or Muon, with any parameter groups, or a list, tuple or dict of them whose
  step() the step calls once each (Muon for the matrices, AdamW for the
  rest). The call returns what it returns (the
  loss, or e.g. `(loss, {"logits": ...})`), every tensor whole and the same
  on every rank.
"""
import atexit
import collections
import collections.abc
import ctypes
import inspect
import json
import os
import sys

import numpy as np
import torch

from ._lib import DTYPES, HOST, SpmdError, call, lib, path, shape_array

__all__ = ["compile", "CompiledStep", "EvalStep", "SpmdError", "init", "rank", "world_size"]

_started = False
_live = []


def init(backend="cpu"):
    """Starts the runtime (MPI_Init) on `backend`: "cpu" (MPI and the CPU
    kernels) or "cuda" (one GPU per rank, NCCL). The first compile calls it
    with its own backend; call it first to learn rank() before compiling."""
    global _started
    call("spmd_session_init", backend.encode())
    if not _started:
        _started = True
        atexit.register(_finalize)
        # torchrun's processes are each an MPI world of one: every one would
        # train alone on the whole batch.
        launched = int(os.environ.get("WORLD_SIZE", "1"))
        if launched > 1 and lib().spmd_session_world_size() != launched:
            raise SpmdError("this process is one of %d (WORLD_SIZE, as torchrun sets it) but "
                            "its MPI job has %d rank(s): spmd's ranks are MPI's; start them "
                            "with mpirun -np %d" % (launched, lib().spmd_session_world_size(),
                                                    launched))


def _finalize():
    for session in list(_live):
        session.close()
    lib().spmd_session_finalize()


def rank():
    """This process's rank in the job (starts the runtime on "cpu")."""
    if not _started:
        init()
    return lib().spmd_session_rank()


def world_size():
    if not _started:
        init()
    return lib().spmd_session_world_size()


_KINDS = {torch.optim.SGD: "sgd", torch.optim.Adam: "adam", torch.optim.AdamW: "adamw",
          torch.optim.RMSprop: "rmsprop", torch.optim.Adagrad: "adagrad",
          torch.optim.Adamax: "adamax", torch.optim.RAdam: "radam",
          torch.optim.NAdam: "nadam", torch.optim.Adadelta: "adadelta",
          torch.optim.Adafactor: "adafactor", torch.optim.Muon: "muon"}


def _kind(optimizer, group):
    """The tracer's name of the formula `group` of torch.optim `optimizer`
    (or of one of Optimizers') runs (Adam's decoupled weight decay is
    AdamW's), or None."""
    from spmd_capture.trace import Optimizers
    if isinstance(optimizer, Optimizers):
        optimizer = optimizer.owner(group)
    kind = _KINDS.get(type(optimizer))
    return "adamw" if kind == "adam" and group.get("decoupled_weight_decay") else kind


def _optimizer_of(model, optimizer, clip_grad_norm, clip_norm_type, dynamic=False):
    """The tracer's description of a torch.optim optimizer (SGD, Adam,
    AdamW, RMSprop, Adagrad, Adamax, RAdam, NAdam, Adadelta, Adafactor,
    Muon) or of several (Optimizers), one Optimizer per parameter group
    with that group's formula and hyperparameters. `maximize` is
    honoured; `foreach`, `fused` and `capturable` pick torch's
    implementation of the same formula, which the compiled step replaces.
    `dynamic`: the hyperparameters schedules change (Optimizer.schedulable)
    are inputs of the step."""
    from spmd_capture.trace import Optimizer, Optimizers
    for part in optimizer.parts if isinstance(optimizer, Optimizers) else [optimizer]:
        if type(part) not in _KINDS:
            raise SpmdError("the optimizer is a %s: spmd.compile takes torch.optim's SGD, Adam, "
                            "AdamW, RMSprop, Adagrad, Adamax, RAdam, NAdam, Adadelta, Adafactor "
                            "and Muon (several of them as a list, tuple or dict)"
                            % type(part).__name__)
    fqns = {id(p): n for n, p in model.named_parameters()}
    groups = []
    for k, g in enumerate(optimizer.param_groups):
        if g.get("differentiable"):
            raise SpmdError("the optimizer's differentiable=True is not supported: the "
                            "compiled step does not differentiate through its update")
        name = _kind(optimizer, g)
        common = dict(weight_decay=g["weight_decay"], maximize=bool(g.get("maximize")))
        stray = [p for p in g["params"] if id(p) not in fqns]
        if stray:
            raise SpmdError("the optimizer's parameter group %d has a tensor of shape %s that "
                            "is not a parameter of the model" % (k, list(stray[0].shape)))
        if name == "sgd":
            described = Optimizer(name, float(g["lr"]), momentum=g["momentum"],
                                  dampening=g["dampening"], nesterov=g["nesterov"], **common)
        elif name == "rmsprop":
            described = Optimizer(name, float(g["lr"]), momentum=g["momentum"], eps=g["eps"],
                                  alpha=g["alpha"], centered=g["centered"], **common)
        elif name == "adagrad":
            described = Optimizer(name, float(g["lr"]), eps=g["eps"], lr_decay=g["lr_decay"],
                                  **common)
        elif name == "adadelta":
            described = Optimizer(name, float(g["lr"]), eps=g["eps"], rho=g["rho"], **common)
        elif name == "muon":
            described = Optimizer(name, float(g["lr"]), momentum=g["momentum"],
                                  nesterov=g["nesterov"], eps=g["eps"],
                                  ns_coefficients=g["ns_coefficients"], ns_steps=g["ns_steps"],
                                  adjust_lr_fn=g["adjust_lr_fn"], **common)
        elif name == "adafactor":
            described = Optimizer(name, float(g["lr"]), eps=tuple(g["eps"]),
                                  beta2_decay=g["beta2_decay"], d=g["d"], **common)
        elif name in ("adamax", "radam", "nadam"):
            described = Optimizer(name, float(g["lr"]), betas=g["betas"], eps=g["eps"],
                                  decoupled_weight_decay=bool(g.get("decoupled_weight_decay")),
                                  momentum_decay=g.get("momentum_decay", 4e-3), **common)
        else:
            described = Optimizer(name, float(g["lr"]), betas=g["betas"], eps=g["eps"],
                                  amsgrad=g["amsgrad"], **common)
        described.dynamic = Optimizer.schedulable(name, g) if dynamic else ()
        groups.append(([fqns[id(p)] for p in g["params"]], described))
    # The whole optimizer: its groups, and the clipping that spans them.
    return Optimizer(groups[0][1].name, groups[0][1].lr, clip_grad_norm=clip_grad_norm,
                     clip_norm_type=clip_norm_type).grouped(groups)


def _unwrapped(model):
    """The module that a torch.compile'd model (OptimizedModule) wraps:
    spmd.compile compiles the whole step, and the parameters' FQNs (which
    plans and checkpoints name) are the module's own, without
    `_orig_mod.`."""
    optimized = getattr(torch._dynamo.eval_frame, "OptimizedModule", ())
    return model._orig_mod if isinstance(model, optimized) else model


def _hyperparameters(optimizer, dynamic):
    """What the compiled step bakes in: each group's parameters and every
    hyperparameter but lr (and, `dynamic`, but those that are inputs:
    Optimizer.schedulable)."""
    from spmd_capture.trace import Optimizer

    def group_key(g):
        inputs = Optimizer.schedulable(_kind(optimizer, g), g) if dynamic else ()

        def baked(k, v):
            if k in ("params", "lr", "initial_lr") or k in inputs:
                return None
            return v[1:] if k == "betas" and "beta1" in inputs else v
        kept = ((k, baked(k, v)) for k, v in g.items())
        return (tuple(id(p) for p in g["params"]),
                tuple(sorted((k, repr(b)) for k, b in kept if b is not None)))
    return tuple(group_key(g) for g in optimizer.param_groups)


_Guard = collections.namedtuple("_Guard",
                                "model training optimizer batch hyperparameters grads")


def _guard(model, optimizer, batch, kwbatch, dynamic, grads=None):
    """What a compiled step depends on besides the state: the model (and
    whether it is in training mode) and the optimizer it was compiled for,
    each batch entry's shape and dtype (a tensor) or value (a constant), the
    optimizer's hyperparameters (`dynamic`: as _hyperparameters) and, once
    calls carry gradients, the FQNs of those whose .grad is set (`grads`)."""
    def entry(key, b):
        if isinstance(b, torch.Tensor):
            return (key, "%s%s" % (b.dtype, list(b.shape)))
        return (key, repr(b))
    entries = tuple(entry(i, b) for i, b in enumerate(batch)) + \
        tuple(entry(k, v) for k, v in sorted(kwbatch.items()))
    return _Guard(id(model), model.training, id(optimizer), entries,
                  _hyperparameters(optimizer, dynamic) if optimizer is not None else (), grads)


def _to_host(tensor, dtype):
    """A C-contiguous NumPy array of `tensor`'s values in what crosses for
    `dtype` (bf16 as f32): the tensor's own memory when it is a contiguous
    CPU tensor of that dtype (no copy)."""
    t = tensor.detach().cpu()
    if dtype == torch.bfloat16:
        t = t.float()
    return t.contiguous().numpy()


def _leaves(value, path):
    """[(path, leaf)] of a batch entry, depth first: the tensors and
    constants inside its dicts (any mapping), lists and tuples."""
    if isinstance(value, collections.abc.Mapping):
        return [x for k, v in value.items() for x in _leaves(v, path + (str(k),))]
    if isinstance(value, (list, tuple)):
        return [x for i, v in enumerate(value) for x in _leaves(v, path + (str(i),))]
    return [(path, value)]


def _rebuild(template, leaves):
    """`template`'s containers holding the next of `leaves` (an iterator,
    in _leaves' order) in place of each leaf."""
    if isinstance(template, collections.abc.Mapping):
        d = {k: _rebuild(v, leaves) for k, v in template.items()}
        if type(template) is dict:
            return d
        try:  # transformers' BatchEncoding, a UserDict: built from a dict
            return type(template)(d)
        except Exception:  # noqa: BLE001 - a mapping that is not: a dict
            return d
    if isinstance(template, tuple) and hasattr(template, "_fields"):  # a named tuple
        return type(template)(*[_rebuild(v, leaves) for v in template])
    if isinstance(template, (list, tuple)):
        return type(template)(_rebuild(v, leaves) for v in template)
    return next(leaves)


def _call(fn, model, batch, kwbatch):
    """A call of a user's step as the compiled step takes it: (fn, model,
    batch, kwbatch). The model is unwrapped (_unwrapped); the batch's arrays
    become tensors (_batch_entry); a batch whose entries include containers
    (a dict of tensors, transformers' BatchEncoding or another mapping, a
    list, a tuple: what a DataLoader's collate gives) has each leaf (a
    tensor or a constant) as its own keyword entry, named by its path
    (`0.input_ids`: positional entry 0's "input_ids"), and `fn` wrapped to
    rebuild the containers from them."""
    model = _unwrapped(model)
    entries = list(enumerate(batch)) + list(kwbatch.items())
    if not any(isinstance(v, (collections.abc.Mapping, list, tuple)) for _, v in entries):
        return (fn, model, tuple(_batch_entry(b) for b in batch),
                {k: _batch_entry(v) for k, v in kwbatch.items()})
    flat = {}
    for key, value in entries:
        for path, leaf in _leaves(value, (str(key),)):
            name = ".".join(path)
            if name in flat:
                raise SpmdError("two entries of the batch are both named '%s'" % name)
            flat[name] = _batch_entry(leaf)
    # The containers without their leaves, which a program must not keep.
    holes = iter([None] * len(flat))
    template = [(k, _rebuild(v, holes)) for k, v in entries]
    names = list(flat)

    def rebuilt(*head, **leaves):
        values = iter(leaves[name] for name in names)
        args = [_rebuild(v, values) for k, v in template if isinstance(k, int)]
        return fn(*head, *args, **{k: _rebuild(v, values) for k, v in template
                                   if not isinstance(k, int)})
    return rebuilt, model, (), flat


def _batch_entry(value):
    """A batch entry as the step takes it: tensors as they are, other arrays
    through DLPack (NumPy, CuPy, JAX...: no copy), constants as they are."""
    if isinstance(value, torch.Tensor) or not hasattr(value, "__dlpack__"):
        return value
    return torch.from_dlpack(value)


class _Session:
    """One compiled program and the state it holds (libspmd_session)."""

    def __init__(self, module_text, pipeline):
        error = ctypes.create_string_buffer(65536)
        text = module_text.encode()
        handle = lib().spmd_session_create(text, len(text), pipeline.encode(),
                                           path("lib", "libspmd_runtime.so").encode(),
                                           error, len(error))
        if not handle:
            raise SpmdError("compiling the step failed:\n" + error.value.decode(errors="replace"))
        self.handle = handle
        self.borrowed = []  # host arrays the next run reads in place
        _live.append(self)

    def close(self):
        if self.handle:
            lib().spmd_session_destroy(self.handle)
            self.handle = None
            _live.remove(self)

    def layout(self, which, i):
        return lib().spmd_session_layout(self.handle, which, i).decode()

    def set_arg(self, i, tensor, dtype, root=-1, borrow=False):
        """Argument i from `tensor` (global). With `borrow` the session may
        use the tensor's memory in place until the next run (kept alive
        here until then)."""
        array = _to_host(tensor, dtype)
        code = DTYPES[torch.float32 if dtype == torch.bfloat16 else dtype]
        call("spmd_session_set_arg", self.handle, i, array.ctypes.data_as(ctypes.c_void_p),
             code, array.ndim, shape_array(array.shape), root, int(borrow))
        if borrow:
            self.borrowed.append(array)

    def set_result_shape(self, i, shape):
        call("spmd_session_set_result_shape", self.handle, i, len(shape), shape_array(shape))

    def run(self, step):
        try:
            call("spmd_session_run", self.handle, step)
        finally:
            self.borrowed = []

    def gather(self, which, i, shape, dtype):
        out = np.empty(shape, dtype=HOST[dtype])
        call("spmd_session_gather", self.handle, which, i, out.ctypes.data_as(ctypes.c_void_p))
        return torch.from_numpy(out).to(dtype)

    def piece(self, i, ndim, dtype):
        """(values, per-dim global indices) of this rank's piece of arg i."""
        shape = (ctypes.c_int64 * max(ndim, 1))()
        call("spmd_session_piece", self.handle, i, shape, None, None)
        dims = [shape[d] for d in range(ndim)]
        data = np.empty(dims, dtype=HOST[dtype])
        indices = np.empty(sum(dims), dtype=np.int64)
        call("spmd_session_piece", self.handle, i, shape, data.ctypes.data_as(ctypes.c_void_p),
             indices.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)))
        return data, np.split(indices, np.cumsum(dims)[:-1]) if ndim else []


def _mesh_shape(mesh):
    """[sizes] of a mesh given as a list, an int or "2x2" (None: one dim of
    all ranks)."""
    if mesh is None:
        return [world_size()]
    if isinstance(mesh, int):
        return [mesh]
    try:
        return [int(m) for m in (mesh.split("x") if isinstance(mesh, str) else mesh)]
    except ValueError:
        raise SpmdError("mesh %r is not a shape such as [4], [2, 2] or \"2x2\"" % (mesh,)) \
            from None


def _mesh_text(mesh):
    return "x".join(str(m) for m in _mesh_shape(mesh))


STATE_ROLES = ("param", "buffer", "optim_state", "grad")
# spmd-parallelize's own options (Passes.td); compile's other option keys
# are the mode's.
PIPELINE_OPTIONS = ("bucket-cap-mb", "placements", "remat", "budget", "overlap")
# What state_dict() and checkpoints hold: not the gradients a call carries
# into the next, as torch's model and optimizer state dicts do not.
CHECKPOINT_ROLES = ("param", "buffer", "optim_state")

_UNBOUND = object()


def _bound(place, name):
    """What a binding of _constant_bindings holds now: a namespace's name
    (`place` a dict) or a closure cell's contents (`name` None)."""
    if name is None:
        try:
            return place.cell_contents
        except ValueError:  # an emptied cell
            return _UNBOUND
    return place.get(name, _UNBOUND)


def _constant_bindings(fn, model, constants):
    """Where the step's code finds each tensor it baked in as a constant:
    [(place, name, tensor)] for a name in the globals of `fn` or of the
    modules that define the model's classes (their forward code), a closure
    cell of `fn` (name None), or a plain tensor attribute of a submodule
    (its __dict__). A tensor reached only inside a container (a dict of
    tensors, an object's attribute) has no binding here."""
    ids = {id(t) for t in constants}
    if not ids:
        return []
    fn = inspect.unwrap(getattr(fn, "func", fn))  # functools.partial, decorators
    fn = getattr(fn, "__func__", fn)  # a bound method
    namespaces = [getattr(fn, "__globals__", {})]
    modules = list(model.modules()) if isinstance(model, torch.nn.Module) else []
    namespaces += [vars(sys.modules[type(m).__module__]) for m in modules
                   if type(m).__module__ in sys.modules]
    namespaces += [vars(m) for m in modules]
    places, seen = [], set()
    for namespace in namespaces:
        if id(namespace) in seen:
            continue
        seen.add(id(namespace))
        places += [(namespace, name, v) for name, v in list(namespace.items())
                   if id(v) in ids]
    for cell in getattr(fn, "__closure__", None) or ():
        value = _bound(cell, None)
        if id(value) in ids:
            places.append((cell, None, value))
    return places


class _Program:
    """One compiled program of a step: its session, the traced step, the
    guard keys it was compiled for (its own, and the one with every
    schedulable hyperparameter an input: _hyperparameters), and its number,
    the compile it came from (the same on every rank)."""

    def __init__(self, session, step, key, key_dynamic, number, bindings=()):
        self.session, self.step = session, step
        self.key, self.key_dynamic, self.number = key, key_dynamic, number
        self.loss = next((i for i, r in enumerate(step.results)
                          if r.updates is None and r.role == "loss"), None)
        # The constants it baked in (globals, closures) and their versions:
        # an in-place change since makes it stale; so does a name that
        # bound one (_constant_bindings) and binds another object now.
        self.constants = [(t, t._version) for t in step.constants]
        self.bindings = list(bindings)

    def stale(self):
        """Whether a tensor it baked in as a constant changed in place, or
        the name the step's code found it by is bound to another object."""
        return any(t._version != v for t, v in self.constants) or \
            any(_bound(place, name) is not t for place, name, t in self.bindings)

    def set_state(self, model):
        """Collective. Sets the parameters and buffers from rank 0's `model`
        (an eval program's whole state)."""
        tensors = dict(model.named_parameters())
        tensors.update(model.named_buffers())
        for i, a in enumerate(self.step.args):
            if a.role in ("param", "buffer"):
                self.session.set_arg(i, a.carried(tensors[a.fqn]), a.value.dtype, root=0)

    def unset_state(self):
        """Frees this rank's pieces of the state."""
        for i in self.state().values():
            lib().spmd_session_unset_arg(self.session.handle, i)

    def layouts(self):
        """{FQN: layout} of its arguments (spmd.layout's text)."""
        return {a.fqn: self.session.layout(0, i) for i, a in enumerate(self.step.args)}

    def state(self):
        """{(role, FQN, shape, dtype): argument index} of the state it takes."""
        return {(a.role, a.fqn, tuple(a.value.shape), a.value.dtype): i
                for i, a in enumerate(self.step.args) if a.role in STATE_ROLES}

    def take_state(self, other):
        """Collective. Moves the state entries (state()) that `other` has too
        into this program (spmd_session_move_arg); `other` holds them no
        more. Between two train programs that is all of it; an eval
        program takes the parameters and buffers and gives them back."""
        theirs = other.state()
        for entry, i in self.state().items():
            if entry in theirs:
                call("spmd_session_move_arg", self.session.handle, i, other.session.handle,
                     theirs[entry])

    def run(self, batch, kwbatch, optimizer, steps):
        """Collective. Runs the program on this call's batch (each rank keeps
        its piece), `optimizer`'s learning rates and scheduled
        hyperparameters and the step count `steps`; returns what the user's
        step returns, each tensor whole."""
        session, step = self.session, self.step
        # A batch that does not fit (another rank's shapes differ) fails
        # here; run() then has every rank stop together.
        mine = None
        for i, a in enumerate(step.args):
            try:
                if a.role in ("input", "target"):
                    value = batch[a.slot] if isinstance(a.slot, int) else kwbatch[a.slot]
                    session.set_arg(i, a.carried(value), a.value.dtype, borrow=True)
                elif a.role == "lr":
                    session.set_arg(i, torch.tensor(float(optimizer.param_groups[a.slot]["lr"])),
                                    torch.float32)
                elif a.role == "hyperparameter":
                    from spmd_capture.trace import Optimizer
                    value = Optimizer.scheduled_value(a.fqn.split(".")[1],
                                                      optimizer.param_groups[a.slot])
                    session.set_arg(i, torch.tensor(float(value)), torch.float32)
                elif a.role == "step":
                    session.set_arg(i, torch.tensor(float(steps)), torch.float32)
            except SpmdError as e:
                mine = mine or e
        try:
            session.run(steps)
        except SpmdError as e:
            raise (mine or e) from None
        if step.returned is None:
            return self.gather_result(self.loss)
        from spmd_capture.trace import ResultIndex
        spec, leaves = step.returned
        return torch.utils._pytree.tree_unflatten(
            [self.gather_result(leaf.index) if isinstance(leaf, ResultIndex) else leaf
             for leaf in leaves], spec)

    def gather_result(self, i):
        """Collective. Result `i` of the last run, whole on every rank."""
        value = self.step.outputs[i]
        return self.session.gather(1, i, list(value.shape), value.dtype)


def _keep(programs, key, program, size):
    """Keeps `program` under `key` in `programs` (least recently used
    first), dropping the least recently used beyond `size`."""
    # A rank whose batch disagreed kept rank 0's program under its own key.
    stale = programs.pop(key, None)
    if stale:
        stale.session.close()
    programs[key] = program
    while len(programs) > size:
        programs.popitem(last=False)[1].session.close()


def _drop(programs):
    """Frees every program of `programs` and empties it."""
    for program in programs.values():
        program.session.close()
    programs.clear()


class CompiledStep:
    """A train_step compiled by spmd.compile (see the module's doc)."""

    STATE_ROLES = STATE_ROLES

    def __init__(self, fn, parallel_mode, mesh, plan, options, backend, on_recompile,
                 clip_grad_norm, clip_norm_type, report, seed, param_dtype=None,
                 reduce_dtype=None, cache_size=8, carry_grads=False):
        if on_recompile not in ("recompile", "error"):
            raise SpmdError("on_recompile must be 'recompile' or 'error', got %r" % on_recompile)
        if not isinstance(cache_size, int) or cache_size < 1:
            raise SpmdError("cache_size must be a positive int, got %r" % (cache_size,))
        self.param_dtype = _dtype_of(param_dtype, "param_dtype", ("bf16",))
        self.reduce_dtype = _dtype_of(reduce_dtype, "reduce_dtype", ("bf16", "f32"))
        self.fn, self.parallel_mode, self.mesh, self.plan = fn, parallel_mode, mesh, plan
        self.options, self.backend, self.on_recompile = dict(options or {}), backend, on_recompile
        self.clip_grad_norm, self.clip_norm_type = clip_grad_norm, clip_norm_type
        self.report, self.seed, self.cache_size = report, seed, cache_size
        self.compiles = 0    # how many times the step was compiled
        self.steps = 0       # optimizer steps taken (Adam's t - 1)
        self._program = None  # the program in use: the one holding the state
        # Guard key -> _Program, least recently used first; all of one model
        # and optimizer.
        self._programs = collections.OrderedDict()
        self._dynamic = False  # the scheduled hyperparameters are inputs
        self._model = self._optimizer = None
        self._several = None  # the Optimizers of the last call given several
        self._pending = None  # a checkpoint to load at the first compile
        # Gradients carried from call to call: the programs take and give the
        # .grads as state (`grad` arguments). On from the first call that
        # adds into an earlier call's gradients (or from the start).
        self._carry = bool(carry_grads)
        self._grads = frozenset()  # FQNs whose carried .grad is set (in use)
        self._dropped = frozenset()  # .grads the last call left, not kept

    @property
    def _session(self):
        return self._program.session if self._program else None

    @property
    def _step(self):
        return self._program.step if self._program else None

    # -- compiling ---------------------------------------------------------
    def pipeline(self):
        """The pass pipeline the step is compiled with."""
        opts = ["mode=%s" % self.parallel_mode, "mesh=%s" % _mesh_text(self.mesh)]
        if self.plan:
            opts.append("plan=%s" % os.path.abspath(self.plan))
        # A key spmd-parallelize does not take itself is a mode option
        # ("reshard-after-forward", "carried-grads"): it joins `options`.
        options, mode_options = {}, []
        for key, value in self.options.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            if key in PIPELINE_OPTIONS:
                options[key] = text
            elif key == "options":
                mode_options.append(text)
            else:
                mode_options.append("%s=%s" % (key, text))
        if self.reduce_dtype:
            mode_options.append("reduce-dtype=" + self.reduce_dtype)
        if mode_options:
            options["options"] = ";".join(mode_options)
        opts += ["%s=%s" % kv for kv in options.items()]
        passes = ["spmd-parallelize{%s}" % " ".join(opts)]
        if self.report:
            passes.append("spmd-report")
        return "builtin.module(%s)" % ",".join(passes)

    def _new_program(self, model, optimizer, fn, batch, kwbatch, key, key_dynamic, number):
        """Collective. Captures this call of `fn` (an eval step's without an
        optimizer) and compiles it; the program's state is rank 0's model's
        and optimizer's."""
        from spmd_capture import CaptureError
        from spmd_capture.trace import CarriesGradients
        init(self.backend)
        try:
            step, text = self._capture(model, optimizer, fn, batch, kwbatch)
            failure = None
        except CarriesGradients as e:
            failure = e  # __call__ compiles again, carrying them
        except CaptureError as e:
            failure = SpmdError("capturing the step: %s" % e)
        except Exception as e:  # noqa: BLE001 - re-raised below, on every rank
            failure = e
        # Every rank compiles or none does: a rank whose capture failed (its
        # batch differs, its model code raised) must not leave the others
        # waiting in the compile's collectives.
        if lib().spmd_session_any(failure is not None):
            if failure is None:
                raise SpmdError("capturing the step failed on another rank (see its error)")
            raise failure
        session = _Session(text, self.pipeline())
        for i, a in enumerate(step.args):
            if a.role in self.STATE_ROLES:
                session.set_arg(i, a.value, a.value.dtype, root=0)
        for i, (r, out) in enumerate(zip(step.results, step.outputs)):
            if r.updates is None:
                session.set_result_shape(i, list(out.shape))
        return _Program(session, step, key, key_dynamic, number,
                        _constant_bindings(fn, model, step.constants))

    def _compile(self, model, optimizer, fn, batch, kwbatch, key, key_dynamic):
        _keep(self._programs, key, self._new_program(model, optimizer, fn, batch, kwbatch, key,
                                                     key_dynamic, self.compiles),
              self.cache_size)
        self._program = self._programs[key]
        self._model, self._optimizer = model, optimizer
        self.compiles += 1

    def _switch(self, model, optimizer, fn, batch, kwbatch, key, key_dynamic, reuse):
        """Makes the program for `key` the one in use: a kept one (`reuse`),
        which takes the state from the program in use, or a new compile, which
        takes it from the model and optimizer (the state is written back into
        them first). Without `reuse` every kept program is dropped."""
        init(self.backend)
        current = self._program
        cached = self._programs.get(key) if reuse and current else None
        if cached is not None and (cached is current or cached.stale() or
                                   cached.state() != current.state()):
            cached = None
        # Every rank must run the same program: each one's pick is agreed.
        if lib().spmd_session_same(cached.number if cached else -1) and cached:
            cached.take_state(current)
            self._programs.move_to_end(key)
            self._program = cached
            return
        if current is not None:
            self.sync(self._model, self._optimizer)
            current.unset_state()
            self._program = None
        if not reuse:
            self.close()
        try:
            self._compile(model, optimizer, fn, batch, kwbatch, key, key_dynamic)
        except BaseException:
            # The model and optimizer hold the state now: the next call
            # compiles from them.
            self.close()
            raise

    def _capture(self, model, optimizer, fn, batch, kwbatch):
        """(traced step, module text) of this rank's call of `fn` (an eval
        step's when there is no optimizer)."""
        from spmd_capture.emit import emit_module
        from spmd_capture.trace import Factory, MixedPrecision, step_args, trace
        mesh = _mesh_shape(self.mesh)
        if int(np.prod(mesh)) != world_size():
            raise SpmdError("the mesh %s has %d devices but the job has %d ranks (mpirun -np)"
                            % (_mesh_text(mesh), int(np.prod(mesh)), world_size()))
        entries = list(enumerate(batch)) + list(kwbatch.items())
        if optimizer is None:
            described, factory = None, Factory(model, entries, None, [], eval_step=fn)
        else:
            described = _optimizer_of(model, optimizer, self.clip_grad_norm,
                                      self.clip_norm_type, self._dynamic)
            factory = Factory(model, entries, None, [], train_step=fn, optimizer=optimizer)
        grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad} \
            if self._carry and optimizer is not None else None
        args = step_args(factory, described, grads=grads)
        if optimizer is not None:
            self._initial_optimizer_state(model, optimizer, args)
        # torch.compile'd code in the step (a compiled loss, module.compile())
        # is traced as eager code (dynamo inlines it under an FX trace):
        # spmd compiles the whole step.
        with torch._dynamo.config.patch(error_on_nested_fx_trace=False):
            step = trace(factory, described, args, self.seed, fake=True,
                         mixed_precision=MixedPrecision(torch.bfloat16) if self.param_dtype
                         else None)
        # Rank 0's module is the one compiled; the others' emit checks that
        # their own call captures too.
        ops = {op for op in lib().spmd_session_op_names().decode().split()
               if op.startswith("aten.")}
        return step, emit_module(step, ops)

    def _initial_optimizer_state(self, model, optimizer, args):
        """Optimizer state a torch optimizer already has (it has stepped, or
        loaded a state_dict) replaces the zeros of step_args, and its step
        count becomes ours."""
        params = dict(model.named_parameters())
        for a in args:
            if a.role != "optim_state":
                continue
            fqn, _, key = a.fqn.rpartition(".")
            state = optimizer.state.get(params.get(fqn), {})
            if key in state:
                a.value = state[key].detach().clone()
            if "step" in state and self.steps == 0:
                self.steps = int(state["step"])

    def close(self):
        """Frees the compiled programs and the state (collective)."""
        _drop(self._programs)
        self._program = None

    # -- running -------------------------------------------------------------
    def _optimizers(self, optimizer):
        """`optimizer` as the step takes it: a list, tuple or dict of
        optimizers becomes one Optimizers, the same object while the same
        optimizers are passed (the guard keys on its identity)."""
        from spmd_capture import CaptureError
        from spmd_capture.trace import Optimizers
        if optimizer is None or isinstance(optimizer, torch.optim.Optimizer) or \
                not isinstance(optimizer, (list, tuple, collections.abc.Mapping)):
            return optimizer
        if self._several is None or not self._several.same(optimizer):
            try:
                self._several = Optimizers(optimizer)
            except CaptureError as e:
                raise SpmdError(str(e)) from None
        return self._several

    def _carried(self, model):
        """The FQNs of the carried gradients that are set (None when calls
        carry none): the program in use's, else the model's .grads."""
        if not self._carry:
            return None
        if self._program is not None:
            return self._grads
        return frozenset(n for n, p in model.named_parameters()
                         if p.requires_grad and p.grad is not None)

    def __call__(self, model, optimizer, *batch, **kwbatch):
        from spmd_capture.trace import CarriesGradients
        fn, model, batch, kwbatch = _call(self.fn, model, batch, kwbatch)
        optimizer = self._optimizers(optimizer)
        try:
            return self._run(fn, model, optimizer, batch, kwbatch)
        except CarriesGradients as e:
            # This call leaves .grads for the next: from now on every
            # program carries them. The model holds the state.
            if self._dropped and e.reads:
                raise SpmdError(
                    "capturing the step: train_step adds its gradients into the .grads the "
                    "previous call left, which that call's program did not keep (calls carry "
                    "gradients from the first one that needs an earlier call's): pass "
                    "spmd.compile(carry_grads=True) to carry them from the first call, or call "
                    "optimizer.zero_grad() after optimizer.step()") from None
            self._carry = True
            return self._run(fn, model, optimizer, batch, kwbatch)

    def _run(self, fn, model, optimizer, batch, kwbatch):
        grads = self._carried(model)
        key = _guard(model, optimizer, batch, kwbatch, self._dynamic, grads)
        current = self._program
        # Ranks switch programs together: one whose batch changed takes the
        # others along (their collectives must match).
        if current is None or lib().spmd_session_any(int(key != current.key or current.stale())):
            dynamic_key = _guard(model, optimizer, batch, kwbatch, True, grads)
            # Kept programs hold another model's or optimizer's state.
            reuse = current is not None and \
                (key.model, key.optimizer) == (current.key.model, current.key.optimizer)
            if current is not None:
                if self.on_recompile == "error":
                    raise SpmdError(
                        "the step was compiled for %s, called with %s (on_recompile='error')"
                        % (_describe(current.key), _describe(key))
                        if key.batch != current.key.batch
                        else "the gradients the previous call left (%d set) differ from those "
                        "the step was compiled for (%d) (on_recompile='error')"
                        % (len(key.grads or ()), len(current.key.grads or ()))
                        if key.grads != current.key.grads
                        else "a tensor the step reads as a constant (a global or a closure's) "
                        "changed in place since the step was compiled (on_recompile='error')"
                        if key == current.key
                        else "the model, the optimizer or its hyperparameters (other than lr) "
                        "changed since the step was compiled (on_recompile='error')")
                # A schedule that changes the momentum, the first beta
                # (OneCycleLR, CyclicLR) or the weight decay: they become
                # inputs of the step, as lr is, so that later calls do not
                # recompile (torch.compile makes a changed shape dynamic the
                # same way). Every rank decides alike: their programs must
                # match. The kept programs bake the old values in.
                if not self._dynamic and lib().spmd_session_any(
                        int(key != current.key and dynamic_key == current.key_dynamic)):
                    self._dynamic, reuse = True, False
                    key = dynamic_key
            self._switch(model, optimizer, fn, batch, kwbatch, key, dynamic_key, reuse)
            if self._pending:
                self.load(self._pending)
                self._pending = None
        step = self._program.step
        out = self._program.run(batch, kwbatch, optimizer, self.steps)
        self._grads, self._dropped = step.grads_after, step.grads_dropped
        if step.stepped:
            self.steps += 1
            # What torch.optim's step() notes for the LR schedulers (they
            # warn of a schedule stepped before the optimizer otherwise).
            optimizer._opt_called = True
        return out

    def eval_step(self, fn):
        """Decorates eval_step(model, *batch): a forward-only step (a
        validation loss, metrics, predictions) on this train step's state,
        compiled for the same mode, mesh, plan and precision (EvalStep)."""
        return EvalStep(self, fn)

    # -- state ---------------------------------------------------------------
    def _state_args(self, roles=CHECKPOINT_ROLES):
        return [(i, a) for i, a in enumerate(self._step.args) if a.role in roles]

    def _require(self):
        if self._session is None:
            raise SpmdError("the step has not been compiled yet: call it once first")

    def layouts(self):
        """{FQN: layout} of the compiled step's arguments (parameters,
        buffers, optimizer state, the batch's entries `input.<key>`), each
        as spmd.layout prints it: its placement per mesh dim."""
        self._require()
        return self._program.layouts()

    def state_dict(self):
        """Collective. {FQN: full tensor} of the parameters, buffers and
        optimizer state (`<param FQN>.<state key>`, e.g. `fc.weight.exp_avg`),
        gathered on every rank, and `step`, the optimizer steps taken."""
        self._require()
        out = {a.fqn: a.restored(self._session.gather(0, i, list(a.value.shape), a.value.dtype))
               for i, a in self._state_args()}
        out["step"] = self.steps
        return out

    def sync(self, model, optimizer=None):
        """Collective. Writes the gathered state into `model` (parameters,
        buffers) and `optimizer` (its per-parameter state and `step`, as
        torch.optim keeps it), e.g. to evaluate or save with PyTorch."""
        model, optimizer = _unwrapped(model), self._optimizers(optimizer)
        state = self.state_dict()
        params = dict(model.named_parameters())
        with torch.no_grad():
            for fqn, t in list(model.named_parameters()) + list(model.named_buffers()):
                if fqn in state:
                    t.copy_(state[fqn])
            # The gradients carried into the next call, as PyTorch leaves
            # them in .grad.
            for i, a in self._state_args(("grad",)):
                fqn = a.fqn[:-len(".grad")]
                params[fqn].grad = a.restored(self._session.gather(
                    0, i, list(a.value.shape), a.value.dtype)) if fqn in self._grads else None
        if optimizer is None:
            return
        for i, a in self._state_args():
            if a.role != "optim_state":
                continue
            fqn, _, key = a.fqn.rpartition(".")
            slot = optimizer.state[params[fqn]]
            slot[key] = state[a.fqn].clone()
            if "momentum" not in key:
                slot["step"] = torch.tensor(float(self.steps))

    def save(self, directory):
        """Collective. A sharded checkpoint: each rank writes its pieces of the
        state (`rank<r>.npz`: values and, per dim, the global indices they
        hold), rank 0 `metadata.json` (FQNs, roles, dtypes, global shapes,
        layouts, mesh, mode, steps). `load` reassembles the pieces for any mesh
        and mode."""
        self._require()
        r = rank()
        if r == 0:
            os.makedirs(directory, exist_ok=True)
        lib().spmd_session_barrier()
        arrays, meta = {}, []
        for i, a in self._state_args():
            data, maps = self._session.piece(i, a.value.dim(), a.value.dtype)
            arrays["%d" % i] = data
            for d, m in enumerate(maps):
                arrays["%d.%d" % (i, d)] = m
            meta.append({"key": "%d" % i, "fqn": a.fqn, "role": a.role,
                         "dtype": str(a.value.dtype)[6:], "shape": list(a.value.shape),
                         "layout": self._session.layout(0, i)})
        np.savez(os.path.join(directory, "rank%d.npz" % r), **arrays)
        if r == 0:
            with open(os.path.join(directory, "metadata.json"), "w") as f:
                json.dump({"format": "spmd-checkpoint", "version": 1,
                           "world_size": world_size(), "mode": self.parallel_mode,
                           "mesh": _mesh_text(self.mesh),
                           "steps": self.steps, "state": meta}, f, indent=1)
        lib().spmd_session_barrier()

    def load(self, directory):
        """Collective. Loads a checkpoint `save` wrote, on any mesh and mode:
        each tensor is reassembled from the saved pieces and this rank keeps
        its piece. Before the first call it is applied once the step is
        compiled; `steps` is the checkpoint's at once. Errors name a missing
        file or a tensor whose FQN, shape or dtype the step does not have."""
        with open(os.path.join(directory, "metadata.json")) as f:
            meta = json.load(f)
        if meta.get("format") != "spmd-checkpoint":
            raise SpmdError("%s is not an spmd checkpoint" % directory)
        self.steps = meta["steps"]
        if self._session is None:
            self._pending = directory
            return
        pieces = [np.load(os.path.join(directory, "rank%d.npz" % r))
                  for r in range(meta["world_size"])]
        saved = {m["fqn"]: m for m in meta["state"]}
        for i, a in self._state_args():
            m = saved.get(a.fqn)
            if m is None:
                raise SpmdError("checkpoint %s has no '%s'" % (directory, a.fqn))
            if m["shape"] != list(a.value.shape) or m["dtype"] != str(a.value.dtype)[6:]:
                raise SpmdError("checkpoint %s: '%s' is %s %s, the step's %s %s" % (
                    directory, a.fqn, m["dtype"], m["shape"], str(a.value.dtype)[6:],
                    list(a.value.shape)))
            full = np.zeros(m["shape"], dtype=HOST[a.value.dtype])
            for npz in pieces:
                maps = [npz["%s.%d" % (m["key"], d)] for d in range(len(m["shape"]))]
                full[np.ix_(*maps)] = npz[m["key"]]
            self._session.set_arg(i, torch.from_numpy(full), a.value.dtype)


class EvalStep:
    """An eval_step(model, *batch) compiled by CompiledStep.eval_step: a
    forward-only step, run without gradients (torch.no_grad), for the train
    step's mode, mesh, plan and precision. It returns what eval_step
    returns, each tensor whole on every rank, as the train step does.

    Called with the train step's model, it runs on the train step's state
    where it is, sharded: the parameters and buffers move into the eval
    program for the call and back (spmd_session_move_arg: no copy where the
    two programs lay them out alike, as the mode makes them; nothing is
    gathered). Buffers it updates (BatchNorm in training mode) are then
    updated in the train step's state too, as in PyTorch. Called with
    another model (an EMA copy), or before the train step's first call, it
    runs on that model's values (rank 0's), and what it updates is not kept.

    Calls are guarded as the train step's are (the batch, the model and its
    training mode); the last `cache_size` programs are kept. `compiles`
    counts the compiles."""

    def __init__(self, train, fn):
        self.train, self.fn = train, fn
        self.compiles = 0
        self._programs = collections.OrderedDict()  # guard key -> _Program

    def __call__(self, model, *batch, **kwbatch):
        train = self.train
        fn, model, batch, kwbatch = _call(self.fn, model, batch, kwbatch)
        key = _guard(model, None, batch, kwbatch, False)
        init(train.backend)
        program = self._programs.get(key)
        if program is not None and program.stale():
            program = None
        fresh = not lib().spmd_session_same(program.number if program else -1) or not program
        if fresh:
            if self._programs and train.on_recompile == "error":
                raise SpmdError("the eval step was compiled for %s, called with %s "
                                "(on_recompile='error')" % (
                                    _describe(next(reversed(self._programs))), _describe(key)))
            program = train._new_program(model, None, fn, batch, kwbatch, key, None,
                                         self.compiles)
            _keep(self._programs, key, program, train.cache_size)
            self.compiles += 1
        self._programs.move_to_end(key)
        holder = train._program if model is train._model else None
        if holder is not None:
            program.take_state(holder)
        elif not fresh:
            program.set_state(model)
        try:
            return program.run(batch, kwbatch, None, train.steps)
        finally:
            if holder is not None:
                holder.take_state(program)
            else:
                program.unset_state()

    def layouts(self):
        """{FQN: layout} of the arguments of the program the last call ran
        (parameters, buffers, the batch's entries `input.<key>`)."""
        if not self._programs:
            raise SpmdError("the eval step has not been compiled yet: call it once first")
        return next(reversed(self._programs.values())).layouts()

    def close(self):
        """Frees the compiled programs (collective)."""
        _drop(self._programs)


def _describe(key):
    """The batch a guard key was made for: "(torch.float32[8, 6], mask=None)"."""
    return "(%s)" % ", ".join(v if isinstance(k, int) else "%s=%s" % (k, v)
                              for k, v in key.batch)


def _dtype_of(value, what, allowed):
    """The MLIR name of a torch dtype or dtype name (None stays None)."""
    if value is None:
        return None
    name = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32",
            torch.float64: "f64"}.get(value, value)
    name = {"bfloat16": "bf16", "float32": "f32"}.get(name, name)
    if name not in allowed:
        raise SpmdError("%s must be one of %s, got %r" % (what, ", ".join(allowed), value))
    return name


def compile(parallel_mode="ddp", mesh=None, plan=None, options=None, backend="cpu",
            on_recompile="recompile", clip_grad_norm=None, clip_norm_type=2.0,
            report=False, seed=0, param_dtype=None, reduce_dtype=None, cache_size=8,
            carry_grads=False):
    """Decorates train_step(model, optimizer, *batch) (see the module's doc).

    parallel_mode: ddp, fsdp, tp or fsdp-tp (spmd-parallelize's modes).
    mesh: the device mesh's shape, e.g. [4] or [2, 2] or "2x2" (default: all
      ranks in one dim); its size must be the world size.
    plan: a tensor-parallel plan file (tp, fsdp-tp), as spmd-parallelize's.
    options: more spmd-parallelize options, e.g. {"bucket-cap-mb": 25} or
        {"overlap": 1} (asynchronous collectives, prefetched), and the
        mode's own, e.g. {"reshard-after-forward": False} or
        {"carried-grads": "unsharded"} (fsdp, fsdp-tp: gradients carried
        across calls stay unsharded and are reduce-scattered only in the
        call that steps).
    backend: "cpu" or "cuda".
    on_recompile: "recompile" or "error" when a call does not match.
    cache_size: how many compiled programs are kept (torch.compile's
      cache_size_limit): a call that matches a kept one (the last, smaller
      batch of an epoch, then the full ones again) switches to it without a
      compile; the least recently used is dropped. Only the program in use
      holds the state: a switch moves it over, without a copy where the two
      lay it out alike.
    clip_grad_norm, clip_norm_type: torch.nn.utils.clip_grad_norm_ before
      the update (the same as calling it in train_step between backward()
      and step()).
    report: print the per-rank program's collectives and memory (rank 0).
    seed: the seed of the step's random draws (dropout).
    param_dtype, reduce_dtype: mixed precision, as FSDP2's
      MixedPrecisionPolicy: torch.bfloat16 computes forward and backward on
      the parameters cast to bf16 (the model and optimizer state stay fp32);
      the gradients are reduced in reduce_dtype (torch.bfloat16, the default,
      or torch.float32; ddp, fsdp and fsdp-tp's reduce-dtype).
    carry_grads: keep the .grads each call leaves for the next from the
      first call on (gradient accumulation across calls). By default they
      are kept from the first call that adds into an earlier call's; pass
      True when an earlier call leaves gradients that a later one adds
      into (zero_grad() at the top of a cycle's first call, step() in its
      last).
    """
    def wrap(fn):
        return CompiledStep(fn, parallel_mode, mesh, plan, options, backend, on_recompile,
                            clip_grad_norm, clip_norm_type, report, seed, param_dtype,
                            reduce_dtype, cache_size, carry_grads)
    return wrap
