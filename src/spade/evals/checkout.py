"""A user's local clone of a benchmark repository: check it is there, import modules from it."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from spade.configtools import ConfigError
from spade.evals.base import DataMissing


def require_checkout(path: str, key: str, url: str, needed: list) -> Path:
    """The checkout's root; ``DataMissing`` (saying how to clone it) when it or a needed file is absent."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise DataMissing(f"no checkout at {str(root)!r} (config key '{key}'). Get it with: git clone {url} {root}  "
                          f"(or point '{key}' at an existing clone)")
    missing = [name for name in needed if not (root / name).exists()]
    if missing:
        raise DataMissing(f"{str(root)!r} (config key '{key}') is not a complete clone of {url}: missing {missing}. "
                          f"Clone it again with: git clone {url} {root}")
    return root.resolve()


def import_from_checkout(src: Path, package: str, key: str, hint: str = ""):
    """Import ``package`` from directory ``src`` (put first on sys.path); refuse a copy imported from elsewhere."""
    src = src.resolve()
    if str(src) not in sys.path:
        sys.path.insert(0, str(src))
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise ConfigError(f"importing {package!r} from the checkout {str(src)!r} (config key '{key}') failed: "
                          f"{exc}{'. ' + hint if hint else ''}") from None
    where = Path(getattr(module, "__file__", None) or next(iter(module.__path__))).resolve()
    if src not in where.parents:
        raise ConfigError(f"{package!r} is already imported from {str(where)!r}, not from the checkout {str(src)!r} "
                          f"(config key '{key}'); uninstall that copy or point '{key}' at it")
    return module
