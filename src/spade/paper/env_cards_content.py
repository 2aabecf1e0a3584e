"""What an environment card and an entry of the environment browser say, the same on the figure and the pages.

The cards: the run's steps cut into thirds (early / middle / late) and, per third, the environment picked for its
card; the texts of each field (win rates, regret, designer reward, code statistics, the corpus document); the scale
note every artifact shows. The first observation, which run archives do not keep, is replayed here in the sandbox.
What the archives do not hold reads "not recorded", never filled in.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

from spade.core.failures import counts_text, report_stage, summed
from spade.core.rewards import WIN_THRESHOLD
from spade.paper.env_cards_archive import EnvRecord, RunArchive

PHASES = ("early", "middle", "late")
NOT_RECORDED = "not recorded"


# ----- scale ----------------------------------------------------------------------------------------------
def scale_note(archive: RunArchive) -> tuple[bool, str]:
    """(toy, text): whether the run is off the paper's scale, and the sentence every artifact shows about it."""
    from spade.paper.figures import SIZE_BACKBONES
    from spade.paper.scale import banner, comparable

    scale = _run_scale(archive)
    backbones = list(SIZE_BACKBONES.values())
    matched = [backbone for backbone in backbones if comparable(scale, backbone)]
    if matched:
        return False, f"Paper scale: run {archive.run} trained {matched[0]} for {archive.total_steps} steps."
    return True, banner([scale], backbones)


def scale_word_of(archive: RunArchive) -> str:
    """The word of a run off the paper's scale, as its banner says it: REHEARSAL for a rehearsal run, else TOY
    SCALE (``spade.paper.scale.scale_word``)."""
    from spade.paper.scale import scale_word

    return scale_word([_run_scale(archive)])


def _run_scale(archive: RunArchive):
    """The run's ``spade.paper.scale.RunScale``, from its archive."""
    from spade.paper.scale import RunScale

    return RunScale(archive.run, archive.model_card, archive.total_steps, archive.rehearsal_model)


# ----- what a card shows ---------------------------------------------------------------------------------
def phase_windows(total_steps: int) -> list:
    """[(phase, first step, end step)]: the run's steps cut into thirds (end exclusive)."""
    cuts = [0, math.ceil(total_steps / 3), math.ceil(2 * total_steps / 3), total_steps]
    return [(name, cuts[i], cuts[i + 1]) for i, name in enumerate(PHASES)]


def steps_label(lo: int, hi: int) -> str:
    """The steps [lo, hi) in words."""
    if hi <= lo:
        return "no steps"
    return f"step {lo}" if hi - lo == 1 else f"steps {lo}-{hi - 1}"


def empty_phase_text(lo: int, hi: int) -> str:
    if hi <= lo:
        return "The run has too few steps to have this third of training."
    return f"No environment set was regenerated in {steps_label(lo, hi)} of this run."


def _card_rank(env: EnvRecord) -> tuple:
    reward = env.data.get("designer_reward")
    has_reward = isinstance(reward, (int, float)) and not isinstance(reward, bool) and math.isfinite(reward)
    return (not env.designer_written, not has_reward, -(reward if has_reward else 0.0), env.step, env.index)


def pick_cards(archive: RunArchive) -> list:
    """[(phase, first step, end step, EnvRecord or None)]: per third of training, the valid environment with the
    highest designer reward (designer-written ones first, then earliest step and archive order)."""
    picked = []
    for name, lo, hi in phase_windows(archive.phase_end):
        candidates = [env for env in archive.envs if env.valid and lo <= env.step < hi]
        picked.append((name, lo, hi, min(candidates, key=_card_rank) if candidates else None))
    return picked


def finite_number(value) -> float | None:
    """``value`` as a float when it is a finite int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _returns(env: EnvRecord, key: str) -> list:
    values = env.data.get(key) or []
    return [float(v) for v in values if finite_number(v) is not None]


def _share(wins: int, n: int) -> str:
    return f"{wins / n:.2f} ({wins}/{n} plays)"


def win_rate_without_hint(env: EnvRecord) -> str:
    episodes, wins = env.data.get("episodes"), env.data.get("wins")
    if not isinstance(episodes, int) or not isinstance(wins, int) or episodes <= 0:
        return "no no-hint play was recorded"
    return f"{_share(wins, episodes)} over the set's window"


def mean_return_without_hint(env: EnvRecord) -> str:
    """The mean no-hint return over the window (partial rewards count here, not in the win rate)."""
    episodes, total = env.data.get("episodes"), finite_number(env.data.get("return_sum"))
    if not isinstance(episodes, int) or episodes <= 0 or total is None:
        return "no no-hint play was recorded"
    return f"{total / episodes:.3f} over the set's window ({episodes} plays)"


def win_rate_with_hint(env: EnvRecord) -> str:
    hinted = _returns(env, "hint_returns")
    if not hinted:
        return "no hinted play was recorded" + ("" if env.data.get("hint") else " (no hint was written)")
    text = f"{_share(sum(r >= WIN_THRESHOLD for r in hinted), len(hinted))} at the regeneration step"
    paired = _returns(env, "paired_returns")
    if paired:
        text += f"; without the hint there: {_share(sum(r >= WIN_THRESHOLD for r in paired), len(paired))}"
    return text


def regret_text(env: EnvRecord) -> str:
    value = finite_number(env.data.get("regret"))
    if value is not None:
        return f"{value:+.3f}"
    return "none: no hinted play was recorded" if not _returns(env, "hint_returns") else "none recorded"


def designer_reward_text(env: EnvRecord) -> str:
    value = finite_number(env.data.get("designer_reward"))
    if value is not None:
        return f"{value:.3f}"
    if not env.designer_written:
        return f"none: the designer did not write this environment ({env.source})"
    return "none recorded"


def corpus_text(env: EnvRecord) -> str:
    if env.source != "designer":
        return f"none: {env.source} is a built-in environment, not designed from a document"
    return f"{NOT_RECORDED} (run archives keep no grounding document)"


def code_stats(env: EnvRecord) -> tuple[str, str]:
    """(lines of code, state variables) of the archived code, counted statically."""
    from spade.analysis import hidden_state_variables, program_length

    code = env.data.get("code") or ""
    if not code:
        return "no code (empty slot)", "no code (empty slot)"
    try:
        lines = str(program_length(code))
    except ValueError as exc:
        lines = f"not counted: {exc}"
    try:
        names = hidden_state_variables(code, env.data.get("class_name") or None)
        variables = f"{len(names)}: {', '.join(names)}" if names else "0"
    except ValueError as exc:
        variables = f"not counted: {exc}"
    return lines, variables


def _episode_seed(env: EnvRecord) -> int | None:
    for key in ("paired_seeds", "hint_seeds"):
        seeds = env.data.get(key) or []
        if seeds and isinstance(seeds[0], int) and not isinstance(seeds[0], bool):
            return seeds[0]
    return None


@dataclass(frozen=True)
class Observation:
    text: str | None  # the observation reset() returned; None when it was not replayed or the replay failed
    note: str  # how it was obtained, or why there is none
    tools: tuple = ()  # names of the tools a tool-use environment offered (its info["tools"])


def _replay_key(env: EnvRecord, max_turns: int | None) -> str:
    data = {"code": env.data.get("code"), "class": env.data.get("class_name"), "seed": _episode_seed(env),
            "kwargs": env.data.get("env_kwargs") or {}, "max_turns": max_turns}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def replay_first_observations(envs: list, pool, max_turns: int | None) -> dict:
    """{EnvRecord.anchor: Observation}: ``reset(seed)`` of each valid environment in the sandbox ``pool``, with the
    first recorded no-hint episode seed (the first hinted one when none) and the constructor arguments the agent's
    episodes had (``max_turns`` and the archived ``env_kwargs``). Identical replays run once."""
    done: dict = {}
    out = {}
    for env in envs:
        if not env.valid or not env.data.get("code"):
            continue
        seed = _episode_seed(env)
        if seed is None:
            out[env.anchor] = Observation(None, f"{NOT_RECORDED}: the archive holds no episode seed to replay")
            continue
        key = _replay_key(env, max_turns)
        if key not in done:
            kwargs = dict(env.data.get("env_kwargs") or {})
            if max_turns is not None:
                kwargs["max_turns"] = max_turns
            episode = pool.open(env.data["code"], env.data.get("class_name") or "", seed=seed, env_kwargs=kwargs)
            try:
                outcome = episode.reset(seed) if episode.opened.ok else episode.opened
            finally:
                episode.close()
            turns = f"max_turns={max_turns}" if max_turns is not None else "the class's default max_turns"
            how = f"replayed in the sandbox: reset(seed={seed}), {turns}"
            if outcome.ok:
                text, info = outcome.value
                tools = info.get("tools") if isinstance(info, dict) else None
                names = tuple(str(t.get("function", t).get("name", "?")) for t in tools
                              if isinstance(t, dict)) if isinstance(tools, list) else ()
                done[key] = Observation(text, how, names)
            else:
                done[key] = Observation(None, f"the replay failed ({how}): {outcome.describe()}")
        out[env.anchor] = done[key]
    return out


def no_replay(envs: list) -> dict:
    return {env.anchor: Observation(None, f"{NOT_RECORDED} (run archives keep no observation; replay is off)")
            for env in envs if env.valid}


def observation_text(observation: Observation | None) -> str:
    if observation is None:
        return "no observation: the slot holds no valid environment"
    if observation.text is None:
        return observation.note
    tools = f"\n[+ {len(observation.tools)} tool schemas: {', '.join(observation.tools)}]" if observation.tools else ""
    return observation.text + tools


def card_fields(env: EnvRecord, observation: Observation | None) -> list:
    """[(label, value)] of one card, the same for the figure and the pages."""
    lines, variables = code_stats(env)
    return [
        ("environment", f"{env.env_id} (set of step {env.step}; source {env.source})"),
        ("skill", str(env.data.get("skill") or NOT_RECORDED)),
        ("lines of code", lines),
        ("state variables", variables),
        ("corpus document", corpus_text(env)),
        ("first observation", observation_text(observation)),
        ("hint", str(env.data.get("hint") or "none written")),
        ("win rate, no hint", win_rate_without_hint(env)),
        ("mean return, no hint", mean_return_without_hint(env)),
        ("win rate, with hint", win_rate_with_hint(env)),
        ("regret", regret_text(env)),
        ("designer reward", designer_reward_text(env)),
    ]


def attempt_stage(report: dict) -> str:
    """The stage at which an archived design attempt failed (spade.core.failures), "ok" for a valid one, "unknown"
    for a reason code the stages do not know (the reason code itself is shown beside it)."""
    if report.get("valid"):
        return "ok"
    try:
        return report_stage(report)
    except ValueError:
        return "unknown"


def stage_text(report: dict) -> str:
    """``attempt_stage``, with "(text cut at designer.max_new_tokens)" when the text was cut but the cut is not its
    stage (prose cut at the budget, or code that intake could read)."""
    stage = attempt_stage(report)
    return stage + (" (text cut at designer.max_new_tokens)" if report.get("cut") and stage != "cut" else "")


def causes_text(causes) -> str:
    """Episodes by cause (spade.core.failures), e.g. "no_action 3, cut 1"; why none is shown otherwise."""
    if not isinstance(causes, dict):
        return NOT_RECORDED
    return counts_text(causes) or "no play"


def set_diagnosis(envs: list) -> tuple[str, str]:
    """(rejected design attempts by stage, no-hint plays by cause) of one archived set."""
    reports = [r for env in envs for r in env.data.get("reports") or [] if isinstance(r, dict) and not r.get("valid")]
    stages = summed({attempt_stage(r): 1} for r in reports)
    logged = [env.data["causes"] for env in envs if isinstance(env.data.get("causes"), dict)]
    return counts_text(stages) or "none", causes_text(summed(logged)) if logged else NOT_RECORDED


def window_stats(env: EnvRecord) -> list:
    """[(label, value)] of the browser's statistics of one slot's window."""
    data = env.data
    end = env.window_end
    window = f"steps {env.step}-{end - 1}" if end is not None else f"from step {env.step} (end not recorded)"
    hinted, paired = _returns(env, "hint_returns"), _returns(env, "paired_returns")
    regen = data.get("regen_episodes")
    distinct = data.get("distinct_rewards") or []
    return [
        ("window", window),
        ("win rate, no hint", win_rate_without_hint(env)),
        ("mean return, no hint", mean_return_without_hint(env)),
        ("plays left out (environment failures)", str(data.get("dropped", "-"))),
        ("no-hint plays by cause", causes_text(data.get("causes"))),
        ("hinted plays by cause", causes_text(data.get("hint_causes"))),
        ("distinct rewards seen", ", ".join(f"{v:g}" for v in distinct if finite_number(v) is not None) or "-"),
        ("regeneration step, no hint (paired seeds)",
         f"mean {sum(paired) / len(paired):.3f} over {len(paired)} plays" if paired else "-"),
        ("regeneration step, with hint", f"mean {sum(hinted) / len(hinted):.3f} over {len(hinted)} plays"
         if hinted else "-"),
        ("win rate, with hint", win_rate_with_hint(env)),
        ("plays with return > 0 at regeneration", f"{data.get('regen_positive', '-')}/{regen}" if regen else "-"),
        ("regret", regret_text(env)),
        ("designer reward", designer_reward_text(env)),
    ]
