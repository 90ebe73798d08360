"""The C ABI of include/spmd-c/Session.h, loaded with ctypes.

The build directory is $SPMD_BUILD_DIR, by default <repo>/build: its
lib/libspmd_session.so (this binding) and lib/libspmd_runtime.so (the kernels
and collectives the JIT-compiled program calls)."""
import ctypes
import ctypes.util
import os

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# SpmdDType codes (spmd/Runtime/Runtime.h) of the dtypes that cross.
DTYPES = {torch.float32: 0, torch.float64: 1, torch.bfloat16: 3, torch.int64: 4,
          torch.int32: 5, torch.bool: 6}
# What crosses for each dtype (bf16 as f32, as the session takes it).
HOST = {torch.float32: np.float32, torch.float64: np.float64, torch.int64: np.int64,
        torch.int32: np.int32, torch.bool: np.bool_, torch.bfloat16: np.float32}


class SpmdError(RuntimeError):
    """A compile or run error of spmd (the message says what and where)."""


def build_dir():
    return os.environ.get("SPMD_BUILD_DIR") or os.path.join(ROOT, "build")


def path(*parts):
    return os.path.join(build_dir(), *parts)


_lib = None


def lib():
    """The loaded library, its functions typed.

    MPI goes into the global symbol scope (Open MPI's components, which
    MPI_Init loads, resolve MPI's symbols there); the library and its LLVM
    stay local: in the global scope LLVM's symbols would interpose on those
    of another LLVM in the process (Triton's, which torch loads on demand,
    crashes in its static initializers)."""
    global _lib
    if _lib is not None:
        return _lib
    so = path("lib", "libspmd_session.so")
    if not os.path.exists(so):
        raise SpmdError("%s not found: build spmd (README) or set SPMD_BUILD_DIR" % so)
    mpi = ctypes.util.find_library("mpi")
    if mpi:
        ctypes.CDLL(mpi, mode=ctypes.RTLD_GLOBAL)
    L = ctypes.CDLL(so, mode=ctypes.RTLD_LOCAL)
    P, I32, I64, S = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_char_p
    I64P = ctypes.POINTER(ctypes.c_int64)
    sigs = {
        "spmd_session_init": (I32, [S, S, I64]),
        "spmd_session_op_names": (S, []),
        "spmd_session_rank": (I32, []),
        "spmd_session_world_size": (I32, []),
        "spmd_session_finalize": (None, []),
        "spmd_session_barrier": (None, []),
        "spmd_session_any": (I32, [I32]),
        "spmd_session_same": (I32, [I64]),
        "spmd_session_create": (P, [S, I64, S, S, S, I64]),
        "spmd_session_destroy": (None, [P]),
        "spmd_session_program": (S, [P]),
        "spmd_session_num_args": (I32, [P]),
        "spmd_session_num_results": (I32, [P]),
        "spmd_session_result_updates": (I64, [P, I32]),
        "spmd_session_layout": (S, [P, I32, I32]),
        "spmd_session_set_arg": (I32, [P, I32, P, I32, I32, I64P, I32, I32, S, I64]),
        "spmd_session_move_arg": (I32, [P, I32, P, I32, S, I64]),
        "spmd_session_unset_arg": (None, [P, I32]),
        "spmd_session_set_result_shape": (I32, [P, I32, I32, I64P, S, I64]),
        "spmd_session_run": (I32, [P, I64, S, I64]),
        "spmd_session_gather": (I32, [P, I32, I32, P, S, I64]),
        "spmd_session_piece": (I32, [P, I32, I64P, P, I64P, S, I64]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(L, name)
        fn.restype, fn.argtypes = restype, argtypes
    _lib = L
    return L


def call(name, *args):
    """lib().name(*args, error, size); raises SpmdError on a nonzero return."""
    error = ctypes.create_string_buffer(4096)
    rc = getattr(lib(), name)(*args, error, len(error))
    if rc:
        raise SpmdError(error.value.decode(errors="replace"))
    return rc


def shape_array(shape):
    return (ctypes.c_int64 * max(len(shape), 1))(*shape)
