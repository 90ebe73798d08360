"""The project's Python environment: $SPMD_PYTHON_ENV, by default <repo>/.venv,
made by scripts/setup.sh with torch, numpy and transformers from PyPI.

Scripts outside the build (bench/) start under Debian's /usr/bin/python3 and
call `use_project_python()` before importing torch: it re-runs them under the
environment's interpreter, so no script depends on which python3 is first on
PATH. Standard library only: it runs before the environment is known."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env_dir():
    return os.environ.get("SPMD_PYTHON_ENV") or os.path.join(ROOT, ".venv")


def interpreter():
    return os.path.join(env_dir(), "bin", "python")


def use_project_python():
    """Re-executes the running script under the environment's interpreter
    unless it already runs there."""
    if os.path.realpath(sys.prefix) == os.path.realpath(env_dir()):
        return
    python = interpreter()
    if not os.access(python, os.X_OK):
        sys.exit("%s: no Python environment at %s: run scripts/setup.sh (or set "
                 "SPMD_PYTHON_ENV)" % (os.path.basename(sys.argv[0]), env_dir()))
    os.execv(python, [python] + sys.argv)
