"""SPADE reproduction package.

Kept import-light on purpose: the sandbox imports parts of this package (``spade.envs.tool_base``,
``spade.sandbox.worker``) inside an isolated worker that only sees the standard library.

The version has one home, the ``version`` field of ``pyproject.toml``. ``spade.__version__`` reads it on first use
(not at import, so the sandbox never pays for it): from the checkout's ``pyproject.toml`` when the package runs from a
checkout (an editable install's metadata would keep the version of the last ``pip install``), else from the installed
distribution's metadata. Every provenance record carries it (``spade.provenance.stamp``).
"""

DISTRIBUTION = "spade-repro"


def read_version(pyproject=None) -> str:
    """The version of ``pyproject`` (default: the checkout's, next to ``src/``), else the installed metadata's."""
    from pathlib import Path

    path = Path(pyproject) if pyproject is not None else Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        import tomllib

        project = tomllib.loads(path.read_text())["project"]
        if project.get("name") == DISTRIBUTION:
            return str(project["version"])
    except (OSError, KeyError, ValueError):  # no checkout here (an installed package), or not our pyproject
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def __getattr__(name: str):
    if name == "__version__":
        value = globals()["__version__"] = read_version()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
