"""Sequential stopping (selling an asset to one of n sequential offers, no recall).

theta: for each round a known offer distribution (three equally likely values, always visible) and the
realised offer sequence drawn from them (hidden in the agentic presentation: only the current offer is
shown). Each round the agent accepts (the game ends with that offer) or rejects (the offer is lost).
Utility = accepted offer, 0 if every offer is rejected.

Reference u* = the hindsight maximum of the realised offers (as VHD-Play's sequential stopping). The
known-distribution optimum (backward induction: V_n = E[X_n], V_t = E[max(X_t, V_{t+1})]) and the
value its threshold policy earns on this sequence are reported in ``extras`` but are not the reward
reference. Default: accept the first offer (greedy on what is visible, no waiting). Idle: accept none.
"""

from __future__ import annotations

from dataclasses import dataclass

from spade.configtools import option
from spade.envs.mechanisms.base import (
    MechanismFamily,
    SamplerConfig,
    register_mechanism,
)


@dataclass(frozen=True)
class StoppingConfig(SamplerConfig):
    rounds: int = option(6, "Number of sequential offers.", min=2)
    max_offer: int = option(100, "Offer values are drawn from 1..max_offer.", min=3)


def utility(params, decisions):
    for t, accepted in enumerate(decisions):
        if accepted:
            return float(params["offers"][t])
    return 0.0


def advance(params, decisions, words):
    t = len(decisions)
    if words[0] not in ("accept", "reject") or len(words) != 1:
        return False, "Unknown command '" + " ".join(words) + "'.", False
    if words[0] == "accept":
        decisions.append(1)
        return True, "You accepted offer " + str(t + 1) + " of " + str(params["offers"][t]) + ".", True
    decisions.append(0)
    if len(decisions) == len(params["offers"]):
        return True, "You rejected the last offer; nothing is sold.", True
    return True, "Rejected. Round " + str(t + 2) + ": the offer is " + str(params["offers"][t + 1]) + ".", False


def continuation_values(supports):
    """V[t] = expected value of playing optimally from round t on (V[n] = 0)."""
    values = [0.0] * (len(supports) + 1)
    for t in range(len(supports) - 1, -1, -1):
        values[t] = sum(max(x, values[t + 1]) for x in supports[t]) / len(supports[t])
    return values


class Stopping(MechanismFamily):
    name = "stopping"
    title = "Sequential stopping (hindsight-maximum reference)"
    solver = "hindsight maximum of the realised offers"
    config_cls = StoppingConfig
    env_functions = (utility, advance)
    commands_help = "Commands: accept | reject | finish."

    def sample(self, config, rng):
        supports = [sorted(rng.sample(range(1, config.max_offer + 1), 3)) for _ in range(config.rounds)]
        offers = [rng.choice(s) for s in supports]
        return {"supports": supports, "offers": offers}

    def solve(self, params):
        offers = params["offers"]
        best = offers.index(max(offers))
        return float(offers[best]), [0] * best + [1]

    def default_policy(self, params):
        return [1]

    def brute_force(self, params):
        n = len(params["offers"])
        return max([utility(params, [0] * k + [1]) for k in range(n)] + [utility(params, [0] * n)])

    def extras(self, params):
        values = continuation_values(params["supports"])
        earned = 0.0
        for t, offer in enumerate(params["offers"]):
            if offer >= values[t + 1]:
                earned = float(offer)
                break
        return {"expected_optimal_stopping_value": values[0], "threshold_policy_utility": earned}

    def actions(self, params, decisions):
        return ["accept" if d else "reject" for d in decisions]

    def intro(self, params, presentation, probe_budget):
        rounds = "; ".join(f"round {t + 1}: " + "/".join(str(x) for x in s) for t, s in enumerate(params["supports"]))
        lines = [f"You sell one item to a sequence of {len(params['offers'])} offers. Each round's offer is one of "
                 "three equally likely values, known in advance: " + rounds + ".",
                 "A rejected offer is gone for good; if you reject every offer you sell nothing. Maximise the price."]
        if presentation == "written":
            lines.append("The offers that will actually arrive are: "
                         + ", ".join(f"round {t + 1}: {x}" for t, x in enumerate(params["offers"])) + ".")
        lines.append(f"Round 1: the offer is {params['offers'][0]}. One command per turn inside \\boxed{{...}}: "
                     "'accept', 'reject' or 'finish' (stop without selling).")
        return "\n".join(lines)


register_mechanism(Stopping())
