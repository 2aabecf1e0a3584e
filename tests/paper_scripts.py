"""Load a paper script (``paper/scripts/<stem>.py``) as a module, so tests can call the artifact's own logic.

Each table, figure and number group keeps its own logic in its script (docs/ARCHITECTURE.md); the shared loading,
styling and provenance code stays in ``spade.paper``. A script is loaded once per test session under the module name
``paper_scripts.<stem>``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS_DIR = Path(__file__).resolve().parents[1] / "paper" / "scripts"


def load_script(stem: str) -> ModuleType:
    """The module of ``paper/scripts/<stem>.py``; FileNotFoundError names the path when there is no such script."""
    name = f"paper_scripts.{stem}"
    if name in sys.modules:
        return sys.modules[name]
    path = SCRIPTS_DIR / f"{stem}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no paper script {path} (stems: {sorted(p.stem for p in SCRIPTS_DIR.glob('*.py'))})")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
