"""Mechanism families (after VHD-Play) as a held-out agentic suite: normalised score per presentation.

Each item is one (family, sampler seed, presentation). The instance is drawn and solved by
``spade.envs.mechanisms.sample_instance`` from seed ``seed_offset + i`` (i < ``instances``), so every
checkpoint and every run plays the same parameters, and the training pool of ``baseline.pool_source:
mechanisms`` (seeds derived from the run seed, see ``spade.core.pool_sources.MechanismSource``) never uses them.
The same parameters are rendered in each presentation:

- ``written_out``: every parameter shown, one turn; the reply's ``\\boxed{...}`` holds the whole
  decision list;
- ``written``: every parameter shown, played turn by turn (VHD-Play's "informed");
- ``agentic``: hidden values shown as ranges, ``inspect`` reveals them (probe budget where the family
  has one), played turn by turn.

Episodes run in the sandbox exactly as in training and in ``heldout_library`` (same system prompt,
token-exact multi-turn episodes through ``EpisodeRunner``, no hints). The score of an item is the
episode return: the terminal reward ``clip((u - u0) / (u* - u0), 0, 1)``, 0 when the episode was
truncated or the environment failed. Metrics: ``score`` (all items), ``score/<presentation>``,
``score/<family>``, ``gap/written_out-agentic`` (and ``gap/written-agentic``: the mean over (family,
seed) pairs of the score difference, the interaction gap VHD-Play reports) and ``env_failure_rate``.
"""

from __future__ import annotations

from dataclasses import dataclass

from spade.designer.prompts import AGENT_PROMPT_STYLES
from spade.configtools import ConfigError, option
from spade.evals.base import Benchmark, EvalContext, Item, ItemRecord, Metric, mean_metric, prompt_hash
from spade.evals.heldout import episode_texts, run_episodes
from spade.evals.registry import register_benchmark

PRESENTATION_ORDER = ("written_out", "written", "agentic")  # the presentations, most to least informed


@dataclass(frozen=True)
class HeldoutMechanismsConfig:
    families: list = option(["all"], "Mechanism families evaluated (spade.envs.mechanisms), or ['all'] for every "
                            "registered family.")
    instances: int = option(2, "Instances (sampler seeds) per family: seeds seed_offset .. seed_offset + "
                            "instances - 1.", min=1)
    presentations: list = option(list(PRESENTATION_ORDER), "Presentations each instance is played in: 'written_out' "
                                 "(parameters shown, one turn), 'written' (parameters shown, stateful; VHD-Play's "
                                 "informed), 'agentic' (hidden values + inspect).")
    seed_offset: int = option(10_000, "First sampler seed. The fixed_pool mechanism pool skips these seeds and any "
                              "instance with the same parameters, so training never sees an evaluated instance.",
                              min=0)
    max_turns: int = option(25, "Most agent turns per episode (the agent's training limit; written_out uses one).",
                            min=1)
    prompt_style: str = option("paper", "How each episode starts, as agent.prompt_style (keep the two equal).",
                               choices=AGENT_PROMPT_STYLES)

    def __post_init__(self):
        if not self.presentations:
            raise ConfigError("config key 'eval.heldout_mechanisms.presentations' is empty; allowed: "
                              f"{list(PRESENTATION_ORDER)}")
        for name in self.presentations:
            if name not in PRESENTATION_ORDER:
                raise ConfigError(f"config key 'eval.heldout_mechanisms.presentations' names {name!r}; allowed: "
                                  f"{list(PRESENTATION_ORDER)}")
        if len(set(self.presentations)) != len(self.presentations):
            raise ConfigError("config key 'eval.heldout_mechanisms.presentations' repeats a presentation: "
                              f"{list(self.presentations)}")
        if not self.families:
            raise ConfigError("config key 'eval.heldout_mechanisms.families' is empty; give family names or ['all']")


def resolve_families(names, key: str) -> list:
    """Family names of a config list (``['all']`` = every registered family, sorted); unknown names raise
    ``ConfigError`` naming ``key`` and the allowed names."""
    from spade.envs.mechanisms import families

    known = sorted(families())
    names = list(names)
    if names == ["all"]:
        return known
    if not names:
        raise ConfigError(f"config key '{key}' is empty; give mechanism family names or ['all']")
    for name in names:
        if name not in known:
            raise ConfigError(f"config key '{key}' names {name!r}, which is not a mechanism family; allowed: "
                              f"'all' or any of {known}")
    if len(set(names)) != len(names):
        raise ConfigError(f"config key '{key}' repeats a family: {names}")
    return names


def heldout_seeds(config: HeldoutMechanismsConfig) -> dict:
    """family -> the sampler seeds this benchmark evaluates."""
    families = resolve_families(config.families, "eval.heldout_mechanisms.families")
    return {family: [config.seed_offset + i for i in range(config.instances)] for family in families}


@register_benchmark
class HeldoutMechanisms(Benchmark):
    name = "heldout_mechanisms"
    config_cls = HeldoutMechanismsConfig

    def items(self) -> list[Item]:
        items = []
        for family, seeds in heldout_seeds(self.config).items():
            for seed in seeds:
                items += [Item(f"{family}/{seed}/{presentation}",
                               {"family": family, "seed": seed, "presentation": presentation}, group=family)
                          for presentation in self.config.presentations]
        return items

    def play(self, items, ctx: EvalContext) -> list[ItemRecord]:
        from spade.core.agent import EpisodeJob
        from spade.designer.prompts import agent_prompt
        from spade.envs.intake import intake
        from spade.envs.mechanisms import render, sample_instance

        instances, jobs = {}, []
        for item in items:
            key = (item.payload["family"], item.payload["seed"])
            if key not in instances:
                instances[key] = sample_instance(*key)
            code = intake(render(instances[key], item.payload["presentation"]))
            jobs.append(EpisodeJob(item.id, code.code, code.class_name, "game", ctx.item_seed(item.id)))
        episodes = run_episodes(jobs, ctx, self.config.max_turns, {"game": agent_prompt("game", self.config.prompt_style)})
        records = []
        for item, episode in zip(items, episodes):
            instance = instances[(item.payload["family"], item.payload["seed"])]
            first_prompt, response = episode_texts(episode, ctx.backend.tokenizer)
            records.append(ItemRecord(
                id=item.id,
                prompt_hash=prompt_hash(first_prompt),
                response=response,
                score=max(0.0, episode.final_return),  # the terminal normalised reward; 0 if truncated
                turns=episode.turns,
                tokens=episode.generated_tokens,
                group=item.group,
                extra={"family": instance.family, "seed": instance.seed, "presentation": item.payload["presentation"],
                       "attempt": instance.attempt, "params_hash": instance.params_hash, "u_star": instance.u_star,
                       "u0": instance.u0, "outcome": episode.outcome, "failure": episode.failure,
                       "cause": episode.cause, "rewards": episode.rewards},
            ))
        return records

    def aggregate(self, records) -> list[Metric]:
        metrics = [mean_metric("score", [r.score for r in records]),
                   mean_metric("env_failure_rate", [r.extra["outcome"] == "env_failure" for r in records])]
        presentations = [p for p in PRESENTATION_ORDER if any(r.extra["presentation"] == p for r in records)]
        for presentation in presentations:
            metrics.append(mean_metric(f"score/{presentation}",
                                       [r.score for r in records if r.extra["presentation"] == presentation]))
        for family in sorted({r.extra["family"] for r in records}):
            metrics.append(mean_metric(f"score/{family}", [r.score for r in records if r.extra["family"] == family]))
        by_pair: dict = {}  # (family, seed) -> presentation -> score
        for r in records:
            by_pair.setdefault((r.extra["family"], r.extra["seed"]), {})[r.extra["presentation"]] = r.score
        for informed in ("written_out", "written"):
            if informed in presentations and "agentic" in presentations:
                diffs = [s[informed] - s["agentic"] for s in by_pair.values() if informed in s and "agentic" in s]
                metrics.append(mean_metric(f"gap/{informed}-agentic", diffs))
        return metrics
