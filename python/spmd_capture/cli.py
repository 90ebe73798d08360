"""spmd-capture command line: see `spmd-capture --help` and docs/capture.md."""
import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

import torch

from . import CaptureError
from .bundle import (check_trace, eager_step, redraw, reference_and_noise,
                     traced_float64, write_bundle)
from .emit import emit_module
from .trace import MixedPrecision, Optimizer, load_factory, step_args, trace

DEFAULT_LR = {"sgd": 0.1, "adam": 1e-3, "adamw": 1e-3}


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="spmd-capture",
        description="Trace a PyTorch training step (forward, loss, backward, optimizer) into "
                    "`aten` MLIR and record PyTorch's own results of one step in a bundle.")
    parser.add_argument("--model", required=True, metavar="FILE.py:FACTORY",
                        help="FACTORY() returns (module, inputs) or (module, inputs, loss_fn, "
                             "targets); literal keyword arguments are allowed: "
                             "gpt.py:gpt(layers=2)")
    parser.add_argument("--optimizer", choices=("sgd", "adam", "adamw"), default="sgd")
    parser.add_argument("--lr", type=float, help="learning rate (default 0.1 sgd, 1e-3 adam and adamw)")
    parser.add_argument("--momentum", type=float, default=0.0, help="SGD momentum")
    parser.add_argument("--dampening", type=float, default=0.0, help="SGD dampening")
    parser.add_argument("--nesterov", action="store_true", help="SGD Nesterov momentum")
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--amsgrad", action="store_true", help="Adam/AdamW's AMSGrad variant")
    parser.add_argument("--foreach", choices=("auto", "on", "off"), default="auto",
                        help="torch.optim's and clip_grad_norm_'s foreach implementation for "
                             "the reference step (auto: as PyTorch picks); the traced update "
                             "is the same math either way")
    parser.add_argument("--clip-grad-norm", type=float, metavar="MAX_NORM",
                        help="clip the gradients' total norm before the update "
                             "(torch.nn.utils.clip_grad_norm_)")
    parser.add_argument("--clip-norm-type", type=float, default=2.0, metavar="P",
                        help="the norm clip_grad_norm_ takes: 2 (default), inf, or any p > 0")
    parser.add_argument("--seed", type=int, default=0,
                        help="torch.manual_seed before the factory and before the step")
    parser.add_argument("-o", dest="output", required=True, metavar="OUT.mlir")
    parser.add_argument("--bundle", required=True, metavar="DIR",
                        help="directory for the argument values, PyTorch's results and "
                             "manifest.json (replaced if it exists)")
    parser.add_argument("--accumulate", type=int, default=1, metavar="K",
                        help="gradient accumulation (DDP's no_sync): K forward/backward "
                             "micro-steps on K micro-batches of the batch, each loss divided "
                             "by K, then one optimizer update")
    parser.add_argument("--param-dtype", choices=("bf16",),
                        help="mixed precision as FSDP2's MixedPrecisionPolicy(param_dtype): "
                             "forward and backward compute on the parameters (and the floating "
                             "forward inputs) cast to this dtype; the optimizer updates the "
                             "fp32 parameters with fp32 gradients and state (the gradient "
                             "reduce dtype is --spmd-parallelize's reduce-dtype)")
    parser.add_argument("--verbose", action="store_true",
                        help="on an error, also print the Python traceback behind it")
    parser.add_argument("--no-reference", action="store_true",
                        help="trace on fake tensors and record no results (no eager steps, so "
                             "large models capture quickly): the bundle runs but cannot be "
                             "--check'ed")
    parser.add_argument("--meta", action="store_true",
                        help="build the model and its data on the meta device (no memory: "
                             "for models larger than this machine) and trace on fake tensors; "
                             "implies --no-reference; the bundle has shapes but no values, "
                             "for planning and compile-time work (spmd-opt), not spmd-run")
    args = parser.parse_args(argv)
    if args.lr is None:
        args.lr = DEFAULT_LR[args.optimizer]
    return args


def dialect_ops(spmd_opt):
    """The aten ops spmd-opt registers (`spmd-opt --spmd-list-ops`)."""
    out = subprocess.run([spmd_opt, "--spmd-list-ops"], capture_output=True, text=True)
    if out.returncode:
        raise CaptureError("'%s --spmd-list-ops' failed: %s" % (spmd_opt, out.stderr.strip()))
    return {op for op in out.stdout.split() if op.startswith("aten.")}


def verify(spmd_opt, generic, pretty):
    """Parses and verifies with spmd-opt, writing the dialect's own syntax."""
    out = subprocess.run([spmd_opt, "--mlir-print-debuginfo", "--mlir-print-local-scope",
                          generic, "-o", pretty], capture_output=True, text=True)
    if out.returncode:
        raise CaptureError("spmd-opt rejects the captured module:\n" + out.stderr.strip())


def capture(args, spmd_opt, workdir):
    """Everything but publishing: returns (module path, bundle path) in workdir."""
    optimizer = Optimizer(args.optimizer, args.lr, momentum=args.momentum,
                          dampening=args.dampening, nesterov=args.nesterov,
                          weight_decay=args.weight_decay, amsgrad=args.amsgrad,
                          foreach={"auto": None, "on": True, "off": False}[args.foreach],
                          clip_grad_norm=args.clip_grad_norm,
                          clip_norm_type=args.clip_norm_type)
    torch.manual_seed(args.seed)
    with torch.device("meta") if args.meta else contextlib.nullcontext():
        factory = load_factory(args.model)
    if args.accumulate < 1:
        raise CaptureError("--accumulate must be at least 1, got %d" % args.accumulate)
    no_reference = args.no_reference or args.meta
    mixed = MixedPrecision(torch.bfloat16) if args.param_dtype == "bf16" else None
    step = trace(factory, optimizer, step_args(factory, optimizer, args.accumulate), args.seed,
                 args.accumulate, fake=no_reference, mixed_precision=mixed)
    generic, pretty = os.path.join(workdir, "generic.mlir"), os.path.join(workdir, "out.mlir")
    with open(generic, "w") as f:
        f.write(emit_module(step, dialect_ops(spmd_opt)))
    verify(spmd_opt, generic, pretty)
    reference = reference64 = noise = None
    if not no_reference:
        eager_draws = []
        reference64 = eager_step(factory, optimizer, step, args.seed, float64=True,
                                 accumulate=args.accumulate, draws=eager_draws)
        draws = redraw(step, args.seed, eager_draws)
        reference, noise = reference_and_noise(factory, optimizer, step, args.seed, reference64,
                                               accumulate=args.accumulate,
                                               mixed_precision=mixed)
        check_trace(step, reference, reference64, noise, optimizer,
                    mixed_precision=mixed is not None,
                    traced64=traced_float64(step, args.seed, draws))
    bundle = os.path.join(workdir, "bundle")
    write_bundle(bundle, step, reference, reference64, noise, {
        "model": args.model, "optimizer": optimizer.describe(), "seed": args.seed,
        "accumulate": args.accumulate,
        "mixed_precision": mixed.describe() if mixed else None,
        "torch": torch.__version__})
    return pretty, bundle


def main(argv=None, spmd_opt=None):
    args = parse_args(argv)
    spmd_opt = spmd_opt or shutil.which("spmd-opt")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    bundle_parent = os.path.dirname(os.path.abspath(args.bundle.rstrip("/")))
    try:
        if not spmd_opt:
            raise CaptureError("spmd-opt not found")
        for d in (out_dir, bundle_parent):
            if not os.path.isdir(d):
                raise CaptureError("directory '%s' does not exist" % d)
            if not os.access(d, os.W_OK | os.X_OK):
                raise CaptureError("directory '%s' is not writable" % d)
        if os.path.isdir(os.path.abspath(args.output)):
            raise CaptureError("-o '%s' is a directory" % args.output)
        # Work next to the bundle so publishing is a rename; nothing is left on failure.
        with tempfile.TemporaryDirectory(prefix=".spmd-capture-", dir=bundle_parent) as work:
            module, bundle = capture(args, spmd_opt, work)
            if os.path.isdir(args.bundle):
                shutil.rmtree(args.bundle)
            os.rename(bundle, args.bundle)
            shutil.move(module, args.output)
    except (Exception, SystemExit) as e:
        # One line per failure; the traceback only when asked for.
        if args.verbose:
            traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
        if isinstance(e, CaptureError):
            why = str(e)
        elif isinstance(e, OSError) and e.filename:
            why = "capturing %s: %s: %s" % (args.model, e.filename, e.strerror or e)
        else:
            why = "capturing %s failed: %s: %s" % (args.model, type(e).__name__, e)
        print("spmd-capture: error: %s" % why, file=sys.stderr)
        return 1
    print("spmd-capture: wrote %s and %s" % (args.output, args.bundle))
    return 0
