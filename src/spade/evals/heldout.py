"""Built-in environment library as a held-out agentic suite: win rate and mean return (spec 9); the toy's
learning check on the held-out instance space of its tasks (``learning_check``); and the mechanism check's held-out
rows at every difficulty (``mechanism_check_heldout``).

The environments named in ``eval.heldout_library.environments`` are never used for backfill or memory
seeding, so they measure transfer within the library. They run in the sandbox, exactly as in training
(same system prompt and tool-call format, token-exact multi-turn episodes through ``EpisodeRunner``), without hints.
One item = one (environment, episode index); the environment's reset seed derives from the run's
master seed, so every checkpoint of a run plays the same tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from spade.core.tool_calls import TOOL_FORMATS
from spade.designer.prompts import AGENT_PROMPT_STYLES
from spade.configtools import ConfigError, option
from spade.evals.base import Benchmark, EvalContext, Item, ItemRecord, Metric, mean_metric, prompt_hash
from spade.evals.registry import register_benchmark


@dataclass(frozen=True)
class HeldoutLibraryConfig:
    environments: list = option([], "Built-in environments held out of backfill and memory; each is evaluated.")
    episodes: int = option(8, "Episodes per environment.", min=1)
    max_turns: int = option(25, "Most agent turns per episode (paper: 25, the agent's training limit).", min=1)
    level: str = option("standard", "Difficulty tier every environment is played at: 'standard', or 'easy' (ours, "
                        "toy; only environments that have it, see src/spade/envs/library/catalog.py).",
                        choices=("standard", "easy"))
    prompt_style: str = option("paper", "How each episode starts, as agent.prompt_style (keep the two equal).",
                               choices=AGENT_PROMPT_STYLES)
    tool_format: str = option("native", "Tool-use environments' call format, as agent.tool_format (keep the two "
                              "equal): 'native' or 'text'.", choices=TOOL_FORMATS)


def run_episodes(jobs: list, ctx: EvalContext, max_turns: int, prompts: dict, tool_format: str = "native") -> list:
    """Episodes of a held-out environment suite, as in training but without hints: the agent's system prompts and
    tool-call format (agent.tool_format), the evaluation's sampling settings (``ctx``), a per-episode seed from each
    job. A turn cut at the token limit still reaches the environment (``cut_turns`` 'continue'): ending the episode
    there is a training rule of the reference (``agent.cut_turns``), not part of how these suites score."""
    from spade.core.agent import AgentConfig, EpisodeRunner

    agent = AgentConfig(max_turns=max_turns, max_new_tokens=ctx.max_new_tokens,
                        max_context_tokens=ctx.max_context_tokens, temperature=ctx.temperature, top_p=ctx.top_p,
                        top_k=ctx.top_k, cut_turns="continue", tool_format=tool_format)
    return EpisodeRunner(ctx.backend, ctx.pool, agent, prompts).run(jobs, ctx.seed, per_episode_seeds=True)


def episode_texts(episode, tokenizer) -> tuple[str, str]:
    """(the prompt up to the first reply, every turn's reply concatenated) of one episode, decoded."""
    mask = episode.loss_mask
    first_reply = mask.index(1) if 1 in mask else len(mask)
    sampled = [t for t, m in zip(episode.token_ids, mask) if m]
    return tokenizer.decode(episode.token_ids[:first_reply]), tokenizer.decode(sampled, skip_special_tokens=True)


@register_benchmark
class HeldoutLibrary(Benchmark):
    name = "heldout_library"
    config_cls = HeldoutLibraryConfig

    def _environment(self, name: str) -> tuple:
        """(source file, agent kind, constructor arguments) of environment ``name``."""
        from spade.envs.library.registry import get_env, level_kwargs

        entry = get_env(name)
        kind = "tool_use" if entry.flavour == "tool_use" else "game"
        return entry.source(), kind, level_kwargs(entry, self.config.level, f"eval.{self.name}.level")

    def _item_environment(self, item: Item) -> tuple:
        """(source file, agent kind, constructor arguments) that item ``item`` plays."""
        return self._environment(item.payload["env"])

    def items(self) -> list[Item]:
        if not self.config.environments:
            raise ConfigError(f"config key 'eval.{self.name}.environments' is empty; name at least one environment")
        items = []
        for name in self.config.environments:
            _, kind, _ = self._environment(name)  # an unknown name or level fails here, before any model call
            items += [Item(f"{name}/{i:03d}", {"env": name, "kind": kind, "episode": i}, group=name)
                      for i in range(self.config.episodes)]
        return items

    def play(self, items, ctx: EvalContext) -> list[ItemRecord]:
        from spade.core.agent import EpisodeJob
        from spade.designer.prompts import agent_prompt
        from spade.envs.intake import intake

        jobs, prompts = [], {kind: agent_prompt(kind, self.config.prompt_style) for kind in ("game", "tool_use")}
        for item in items:
            source, kind, env_kwargs = self._item_environment(item)
            code = intake(source)
            jobs.append(EpisodeJob(item.payload["env"], code.code, code.class_name, kind, ctx.item_seed(item.id),
                                   env_kwargs=env_kwargs))
        # the learning check's config has no tool_format: its environments are games
        episodes = run_episodes(jobs, ctx, self.config.max_turns, prompts, getattr(self.config, "tool_format", "native"))
        records = []
        for item, episode in zip(items, episodes):
            first_prompt, response = episode_texts(episode, ctx.backend.tokenizer)
            records.append(ItemRecord(
                id=item.id,
                prompt_hash=prompt_hash(first_prompt),
                response=response,
                score=1.0 if episode.won else 0.0,
                turns=episode.turns,
                tokens=episode.generated_tokens,
                group=item.group,
                extra={"return": episode.final_return, "outcome": episode.outcome, "failure": episode.failure,
                       "cause": episode.cause, "rewards": episode.rewards},  # cause: spade.core.failures
            ))
        return records

    def aggregate(self, records) -> list[Metric]:
        metrics = [mean_metric("win_rate", [r.score for r in records]),
                   mean_metric("mean_return", [r.extra["return"] for r in records]),
                   mean_metric("env_failure_rate", [r.extra["outcome"] == "env_failure" for r in records])]
        for env in sorted({r.group for r in records}):
            mine = [r for r in records if r.group == env]
            metrics += [mean_metric(f"win_rate/{env}", [r.score for r in mine]),
                        mean_metric(f"mean_return/{env}", [r.extra["return"] for r in mine])]
        return metrics


@dataclass(frozen=True)
class LearningCheckConfig:
    environments: list = option(["symbol_copy"], "Learning-check environments (spade.envs.checks) evaluated on their "
                                "held-out instance space (spade.envs.checks.HELDOUT_ARGS: symbol_copy's letter pairs "
                                "training never shows); a check without one (digit_reply) plays other seeds of its "
                                "training instances.")
    episodes: int = option(32, "Episodes per environment; the 95% interval of a win rate of ~0.3 is about +-0.16 at 32, "
                           "+-0.08 at 128.", min=1)
    max_turns: int = option(1, "Most agent turns per episode (the learning check's training limit, agent.max_turns "
                            "of its run).", min=1)
    prompt_style: str = option("paper", "How each episode starts, as agent.prompt_style of the check run.",
                               choices=AGENT_PROMPT_STYLES)


@register_benchmark
class LearningCheck(HeldoutLibrary):
    """Held-out instances of the learning-check tasks (``spade.envs.checks``): each environment is opened with its
    held-out constructor arguments (``HELDOUT_ARGS``), so ``symbol_copy`` plays only letter pairs its training never
    shows (issue 30). Not a paper benchmark."""

    name = "learning_check"
    config_cls = LearningCheckConfig

    def _environment(self, name: str) -> tuple:
        from spade.envs.checks import HELDOUT_ARGS, check_source

        return check_source(name, f"eval.{self.name}.environments"), "game", dict(HELDOUT_ARGS.get(name, {}))


@dataclass(frozen=True)
class MechanismCheckHeldoutConfig:
    environment: str = option("copy_span", "The mechanism runs' environment template (designer.response_template; "
                              "spade.envs.checks.TEMPLATE_MARKERS): its class takes split='heldout', the difficulty "
                              "'need' and 'instance', the index of a held-out instance training never shows.")
    needs: list = option([1, 2, 3, 4], "Difficulties scored: every held-out instance is played at each (copy_span: "
                         "NEED 1-4, every difficulty its designer can write that a reply can win).")
    instances: int = option(32, "Held-out instances per difficulty (copy_span holds out 32 rows; more would play "
                            "rows twice). The 95% interval of a difference in win rate between two runs over "
                            "32 x 4 paired items is about +-0.1 at each seed.", min=1)
    max_turns: int = option(1, "Most agent turns per episode (the mechanism runs' agent.max_turns).", min=1)
    prompt_style: str = option("bare", "How each episode starts, as agent.prompt_style of the mechanism runs.",
                               choices=AGENT_PROMPT_STYLES)


@register_benchmark
class MechanismCheckHeldout(HeldoutLibrary):
    """The mechanism check's held-out evaluation (issue 48): every held-out instance of the runs' template
    environment at every difficulty in ``needs``, the same items at every checkpoint of every run, so that a
    trained run and its control are compared item by item. Score: 1 for a win at the item's difficulty. Not a
    paper benchmark."""

    name = "mechanism_check_heldout"
    config_cls = MechanismCheckHeldoutConfig

    def _environment(self, name: str) -> tuple:
        from spade.envs.checks import TEMPLATE_MARKERS, check_source

        if name not in TEMPLATE_MARKERS:
            raise ConfigError(f"config key 'eval.{self.name}.environment' is {name!r}, which is not an environment "
                              f"template; allowed: {sorted(TEMPLATE_MARKERS)}")
        return check_source(name, f"eval.{self.name}.environment"), "game", {"split": "heldout"}

    def _item_environment(self, item: Item) -> tuple:
        source, kind, kwargs = self._environment(item.payload["env"])
        return source, kind, {**kwargs, "need": item.payload["need"], "instance": item.payload["instance"]}

    def items(self) -> list[Item]:
        name = self.config.environment
        self._environment(name)  # an unknown template fails here, before any model call
        needs = self.config.needs
        if not needs or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in needs):
            raise ConfigError(f"config key 'eval.{self.name}.needs' must be a non-empty list of integers >= 1, "
                              f"got {needs!r}")
        return [Item(f"need{need}/{i:03d}", {"env": name, "kind": "game", "episode": i, "need": need, "instance": i},
                     group=f"need{need}") for need in needs for i in range(self.config.instances)]

    def play(self, items, ctx: EvalContext) -> list[ItemRecord]:
        """As the library's, but an item whose environment failed stops the evaluation: the template is our own file,
        so a failure there is a setting it refuses (a NEED outside its range), which would otherwise score 0."""
        records = super().play(items, ctx)
        failed = [record for record in records if record.extra["outcome"] == "env_failure"]
        if failed:
            raise ConfigError(f"config keys 'eval.{self.name}.environment' / 'eval.{self.name}.needs': "
                              f"{len(failed)} of {len(records)} items failed in the environment, first "
                              f"{failed[0].id}: {failed[0].extra['failure']}")
        return records
