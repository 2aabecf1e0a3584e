"""Environment intake, validation, the tool-use base class and the built-in library.

Import-light: ``spade.envs.tool_base`` is imported inside the sandbox, which only has the
standard library.
"""
