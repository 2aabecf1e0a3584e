"""Run `spade train` with one mutation of SPADE's designer update, for tests/test_mechanism_check.py (issue 39).

    python tests/mechanism_mutants.py MUTATION spade train ...arguments...

Each mutation breaks one part of the loop the mechanism check guards, by patching our code in this process only
(never in the package). ``none`` runs the code as it is.
"""

from __future__ import annotations

import sys

import torch


def zero_advantages() -> None:
    """Every designer advantage set to 0."""
    import spade.core.selfplay as selfplay

    selfplay.designer_advantages = lambda rewards, skills: torch.zeros(len(rewards))


def band_outside() -> None:
    """The plateau band moved outside [0, 1] (its range check gone): [1.2, 1.4]."""
    import spade.core.rewards as rewards

    rewards._band = lambda low, high: (1.2, 1.4)


def flip_regret() -> None:
    """The regret's sign flipped (Eq. 3 as no-hint minus hinted)."""
    import spade.core.selfplay as selfplay

    original = selfplay.regret
    selfplay.regret = lambda *args, **kwargs: -original(*args, **kwargs)


def drop_designer() -> None:
    """The designer's samples dropped from the batch."""
    from spade.core.selfplay import SelfPlay

    original = SelfPlay.assemble
    SelfPlay.assemble = lambda self, designer, agent: original(self, [], agent)


def wrong_set() -> None:
    """The delayed update applied to the wrong environment set: each regeneration step trains the samples of the set
    closed the time before (2k steps late instead of k)."""
    from spade.core.selfplay import SelfPlay

    original = SelfPlay.close_set
    held = {}

    def close_set(self, slots):
        samples, held["previous"] = held.get("previous", []), original(self, slots)
        return samples

    SelfPlay.close_set = close_set


def uniform_designer() -> None:
    """The designed difficulty drawn uniformly from 1-4 (a seeded generator), whatever the designer's policy says: each
    design reply's one token is replaced by a digit's (its samples still train, with the drawn token)."""
    import random
    from dataclasses import replace

    from spade.core.design import EnvironmentDesign

    original, draws = EnvironmentDesign._generate, random.Random(0)

    def _generate(self, chats, params, seed, prefix=""):
        prompts, generations = original(self, chats, params, seed, prefix)
        if not prefix:  # hints and screens keep the policy's replies
            return prompts, generations
        drawn = []
        for generation in generations:
            digit = draws.choice("1234")
            ids = self.designer_chat.encode(digit)
            drawn.append(replace(generation, text=prefix + digit, completion_ids=ids,
                                 logprobs=list(generation.logprobs[:len(ids)])))
        return prompts, drawn

    EnvironmentDesign._generate = _generate


MUTATIONS = {"none": lambda: None, "zero_advantages": zero_advantages, "band_outside": band_outside,
             "flip_regret": flip_regret, "drop_designer": drop_designer, "wrong_set": wrong_set,
             "uniform_designer": uniform_designer}


if __name__ == "__main__":
    name, argv = sys.argv[1], sys.argv[2:]
    if name not in MUTATIONS or argv[:1] != ["train"]:
        sys.exit(f"usage: mechanism_mutants.py {{{','.join(MUTATIONS)}}} train ...")
    MUTATIONS[name]()
    from spade.cli import main

    sys.exit(main(argv))
