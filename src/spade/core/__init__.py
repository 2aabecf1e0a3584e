"""The SPADE method itself, independent of any training backend.

One self-play step (``selfplay``) asks the designer for environments (``spade.designer``), checks them in the sandbox
(``spade.envs``, ``spade.sandbox``), plays them with the reasoning agent (``agent``), scores both roles (``rewards``:
win rate, regret, designer reward), turns rewards into advantages (``advantages``) and token losses (``losses``).
The step's parts: ``design`` designs a set and writes its hints, ``slots`` holds one environment of the set and its
bookkeeping window, ``fixed_envs`` runs the fixed-environment modes, ``step_metrics`` computes the step's metrics,
``phases`` times the parts of a step, ``failures`` names why a step earns nothing (the cause of each episode, the
stage at which each design failed), and ``backend_setup`` is the memory and corpus setup the backends share.
Where a run's environments come from (the designer or a fixed pool): ``env_source`` (the ``baseline`` section and
its checks), ``designed_pool`` (a pool designed before training), ``pool_sources`` (library, learning-check and
mechanism pools) and ``rlve`` (RLVE's environments and curriculum). Nothing here loads a model or writes a
checkpoint: the backends in ``spade.train`` (local trainer) and ``spade.rlhf`` (OpenRLHF) do.
"""
