"""Patches that run right after a module is first imported: the mechanism behind every site folder of ours
(``spade.rlhf.cpu.site``, ``spade.rlhf.preflight_site``, ``spade.rlhf.engine_site``) and
``spade.inference.vllm_logprobs.install_in_process``.

``add_patches({module name: patch})`` applies each patch to its module if it is already imported, and otherwise
right after the module executes, through one finder at the front of ``sys.meta_path``. Several patches of one module
run in the order they were added (a later one wraps what an earlier one left); a patch function already added for a
module is not added again, so no patch runs twice on one module.
"""

from __future__ import annotations

import importlib.abc
import sys


class AfterImport(importlib.abc.MetaPathFinder):
    """Finds a patched module with the other finders, then runs its patch right after the module executes."""

    def __init__(self):
        self.patches: dict[str, list] = {}

    def find_spec(self, name, path=None, target=None):
        if name not in self.patches:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        execute = spec.loader.exec_module
        patches = self.patches[name]  # the list itself: a patch added before the module runs is applied too

        def exec_module(module):
            execute(module)
            for patch in list(patches):
                patch(module)

        spec.loader.exec_module = exec_module
        return spec


def finder() -> AfterImport:
    """This process's ``AfterImport`` finder (installed at the front of ``sys.meta_path`` on first use)."""
    for existing in sys.meta_path:
        if isinstance(existing, AfterImport):
            return existing
    created = AfterImport()
    sys.meta_path.insert(0, created)
    return created


def add_patches(patches: dict) -> list[str]:
    """Register ``patches`` {module name: patch(module)}: each new patch runs now if its module is imported, else
    right after its import, after the patches registered before it for that module. A patch already registered for
    its module is skipped. Returns the names of the modules that got a new patch."""
    hook = finder()
    added = []
    for name, patch in patches.items():
        registered = hook.patches.setdefault(name, [])
        if patch in registered:
            continue
        registered.append(patch)
        added.append(name)
        if name in sys.modules:
            patch(sys.modules[name])
    return added
