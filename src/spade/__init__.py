"""SPADE reproduction package.

Kept import-light on purpose: the sandbox imports parts of this package (``spade.envs.tool_base``,
``spade.sandbox.worker``) inside an isolated worker that only sees the standard library.
"""

__version__ = "0.1.0"
