"""The built-in library of verified environments, written by us (issue 2, item 5).

Each environment is a plain source file exactly as a designer would produce it (one module, standard
library only, one class). The files are data: they are never imported by the host, only read and run
inside the sandbox. ``registry`` defines an entry and looks entries up; ``catalog`` registers each file
with its skill and flavour (imported here, so the registry is full once the package is imported).
"""

from spade.envs.library import catalog  # noqa: F401  (registers the entries)
