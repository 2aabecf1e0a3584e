"""The SPADE method itself, independent of any training backend.

One self-play step (``selfplay``) asks the designer for environments (``spade.designer``), checks them in the sandbox
(``spade.envs``, ``spade.sandbox``), plays them with the reasoning agent (``agent``), scores both roles (``rewards``:
win rate, regret, designer reward), turns rewards into advantages (``advantages``) and token losses (``losses``).
``baselines`` chooses where a run's environments come from (the designer or a fixed pool); ``phases`` times the
parts of a step. Nothing here loads a model or writes a checkpoint: the backends in ``spade.train`` (local
trainer) and ``spade.rlhf`` (OpenRLHF) do.
"""
