"""The file given to OpenRLHF's ``--train.agent_func_path``.

OpenRLHF loads it as a module named ``agent_module`` (outside ``sys.modules``) and instantiates its
``AgentExecutor`` once per vLLM engine; everything that Ray pickles or spawns therefore lives in the
installed ``spade.rlhf`` package, and this file only imports from it.
"""

from spade.rlhf.executor import SpadeAgentExecutor as AgentExecutor

__all__ = ["AgentExecutor"]
