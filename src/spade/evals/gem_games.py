"""GEM game suite: overall win rate on GEM's multi-turn language games (spec section 9, "GEM game suite").

The games are GEM's own (``gem-llm==0.1.0``, built with ``gem.make(id)``); the model plays each episode
as a chat: GEM's first observation -> model reply -> ``env.step(reply)`` -> next observation, until the
game ends or its own turn limit is reached. The raw reply goes to ``env.step``: every GEM game extracts
its action itself (the last ``\\boxed{...}`` that matches its move syntax), as GEM's reference rollout
loop does. One item = one (game, episode); the episode's reset seed derives from the evaluation seed,
so every checkpoint of a run plays the same boards.

Win: the game ended the episode itself (``terminated`` and not ``truncated``) with its success message.
Every GEM 0.1.0 game, and only at its win state, returns an observation starting "Congratulations!".
GEM's rewards are dense and partial (Wordle, Hangman, Minesweeper, Sudoku, Mastermind and WordSearch pay
progress along the way, so their winning step pays less than 1), so the final reward alone does not
tell a win; the return (sum of rewards, GEM's own "accuracy" in its evaluation loop) is reported too.

Metrics (the paper's column is the overall win rate):
- ``win_rate``: mean of the item scores (1 = won) over all episodes of all games;
- ``win_rate/<game>`` and ``mean_return/<game>`` per game (``<game>`` = the id without ``game:``);
- ``mean_return`` (sum of GEM's rewards per episode, format errors cost -0.1) and ``mean_turns``;
- ``excluded/<game>`` (value 1, n 0) for each configured game left out because NLTK's ``en-basic``
  word list is missing (see ``spade.evals.nltk_words``), and ``substituted_words/<game>`` (value 1)
  for games that ran with the ``web2`` stand-in for it.

Deviations (see docs/evals/gem_games.md): the suite (game list, difficulty, episodes) is not given in
the paper; by default every GEM game at its ``-hard`` variant except Game2048 (512 cannot be reached
within its 50 turns). GEM's oat loop replaces a reply cut by the token limit with an invalid action;
``play_conversations`` does not expose the cut, so such a reply is passed on as it is.
"""

from __future__ import annotations

import copy
import logging
import random
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from spade.configtools import ConfigError, option
from spade.evals.base import (Benchmark, Conversation, EvalContext, Item, ItemRecord, Metric, mean_metric,
                              play_conversations, prompt_hash)
from spade.evals.base import max_new_tokens_option, temperature_option, top_k_option, top_p_option
from spade.evals.nltk_words import BASIC_CHOICES, WordLists, has_basic_words, load_word_lists
from spade.evals.registry import register_benchmark

DEFAULT_GAMES = [
    "game:GuessTheNumber-v0-hard",
    "game:Mastermind-v0-hard",
    "game:Minesweeper-v0-hard",
    "game:Wordle-v0-hard",
    "game:FifteenPuzzle-v0-hard",
    "game:Hangman-v0-hard",
    "game:Sudoku-v0-hard",
    "game:TowerofHanoi-v0-hard",
    "game:Sokoban-v0-hard",
    "game:Crosswords-v0-hard",
    "game:WordSearch-v0-hard",
]
# Registered in gem 0.1.0 but their constructor fails (a None size reaches arithmetic / no matching words).
BROKEN_GAMES = {
    "game:FifteenPuzzle-v0-random": "TypeError in its constructor (num_rows=None)",
    "game:Crosswords-v0-random": "ValueError in its constructor (no words with hardcore=None)",
}
WIN_PREFIX = "Congratulations!"
FORMAT_ERROR_REWARD = -0.1  # gem.utils.constants.LanguageGameReward.format_error_reward
# GEM's game prompt template (examples/train_oat: "qwen3_game"), applied to every observation.
PROMPT_HEAD = "You are playing language games. Make valid actions to win.\nObservation: "
PROMPT_TAIL = "\nPlease reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class GemGamesConfig:
    games: list = option(
        list(DEFAULT_GAMES), "GEM game ids as given to gem.make ('game:<Name>-v0-<easy|hard|random>'). Default: "
        "every GEM 0.1.0 game at its -hard variant except Game2048 (unwinnable in 50 turns). Fewer games or "
        "-easy variants make a faster toy suite.")
    episodes: int = option(8, "Episodes per game (paper: not stated; 8 as in the Reasoning Gym protocol).", min=1)
    max_turns: int = option(
        0, "0 = each game's own turn limit (paper). N > 0 caps the model turns per episode at min(N, the game's "
        "limit); an episode cut by the cap counts as not won (toy runs only).", min=0)
    nltk_data_dir: str = option(
        "results/cache/nltk_data", "NLTK data folder for Wordle/Hangman/WordSearch (relative to the working "
        "directory). corpora/words/en is built there from the english-words package when absent; put NLTK's "
        "real corpus there (python -m nltk.downloader -d DIR words) to get its en-basic list too.")
    basic_words: str = option(
        "exclude", "What to do when NLTK's en-basic list (Ogden's 850 words; Wordle, Hangman, easy WordSearch) "
        "is not in nltk_data_dir: 'exclude' leaves those games out and lists them in the result; 'web2' lets "
        "the 236k-word en list stand in (harder secret words; recorded in the result).", choices=BASIC_CHOICES)
    temperature: float = temperature_option(0.6, "not in its configs; the defaults of its games file, eval_offline/configs/_games_gem.yaml:14")
    top_p: float = top_p_option(0.8, "spade/core/eval/gem_evaluator.py:296, every GEM task")
    top_k: int = top_k_option(20, "spade/core/eval/gem_evaluator.py:297, every GEM task")
    max_new_tokens: int = max_new_tokens_option(8192, "eval_offline/configs/_games_gem.yaml:15")


# ------------------------------------------------------------------------------------------------ gem access
def import_gem():
    """``import gem`` without its side effect on logging (its ``__init__`` calls ``logging.basicConfig``)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    import gem

    root.handlers[:] = handlers
    root.setLevel(level)
    return gem


def game_registry() -> dict:
    """GEM's registered game specs by id (``game:*``)."""
    import_gem()
    from gem.envs.registration import ENV_REGISTRY

    return {env_id: spec for env_id, spec in ENV_REGISTRY.items() if env_id.startswith("game:")}


def word_lists_needed(spec) -> set:
    """Which NLTK ``words`` lists a game reads (from its entry point and registered kwargs)."""
    module = spec.entry_point.split(":")[0] if isinstance(spec.entry_point, str) else ""
    hardcore = spec.kwargs.get("hardcore")
    if module.endswith(".wordle"):
        return {"en-basic"}
    if module.endswith(".hangman"):
        return {"en"} if hardcore else {"en-basic"}
    if module.endswith(".word_search"):
        return {"en"} if hardcore is True else {"en-basic"} if hardcore is False else {"en", "en-basic"}
    return set()


def game_name(game_id: str) -> str:
    return game_id.split(":", 1)[-1]


def validate_games(games: list) -> dict:
    """The specs of the configured games; unknown, broken or repeated ids raise ``ConfigError``."""
    registered = game_registry()
    if not games:
        raise ConfigError("config key 'eval.gem_games.games' is empty; allowed values: "
                          f"{sorted(set(registered) - set(BROKEN_GAMES))}")
    specs = {}
    for game_id in games:
        if game_id not in registered:
            raise ConfigError(f"config key 'eval.gem_games.games' has unknown game {game_id!r}; allowed values: "
                              f"{sorted(set(registered) - set(BROKEN_GAMES))}")
        if game_id in BROKEN_GAMES:
            raise ConfigError(f"config key 'eval.gem_games.games' names {game_id!r}, which gem-llm 0.1.0 cannot "
                              f"build ({BROKEN_GAMES[game_id]}); use its -easy or -hard variant")
        if game_id in specs:
            raise ConfigError(f"config key 'eval.gem_games.games' lists {game_id!r} twice")
        specs[game_id] = registered[game_id]
    return specs


@contextmanager
def gem_word_lists(words: WordLists):
    """Let GEM's word games read ``words`` instead of NLTK's downloader and corpus loader.

    Patches, for the duration only, ``nltk.download`` (offline it would try the network) and the
    ``words`` corpus object that wordle/hangman/word_search imported from ``nltk.corpus``.
    """
    import nltk
    from gem.envs.game_env import hangman, word_search, wordle

    def offline_download(info_or_id=None, *args, **kwargs):
        if info_or_id != "words":
            raise RuntimeError(f"nltk.download({info_or_id!r}) called offline; only 'words' is provided")
        return True

    modules = (wordle, hangman, word_search)
    saved = [module.words for module in modules], nltk.download
    try:
        nltk.download = offline_download
        for module in modules:
            module.words = words
        yield
    finally:
        for module, original in zip(modules, saved[0]):
            module.words = original
        nltk.download = saved[1]


@contextmanager
def private_random(state: dict):
    """Run GEM code on the episode's own ``random``/``numpy.random`` states (``state``, updated in place).

    GEM games draw from the global generators (at reset, and in 2048/Minesweeper also while stepping) and
    reseed them on every reset. Swapping in a per-episode state keeps each episode's course independent of
    batching and leaves the caller's global generators as they were.
    """
    import numpy as np

    saved = random.getstate(), np.random.get_state()
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    try:
        yield
    finally:
        state["python"], state["numpy"] = random.getstate(), np.random.get_state()
        random.setstate(saved[0])
        np.random.set_state(saved[1])


def new_random_state(seed: int) -> dict:
    import numpy as np

    return {"python": random.Random(seed).getstate(), "numpy": np.random.RandomState(seed).get_state()}


def observation_text(observation: str, info: dict) -> str:
    """The text GEM shows after a reset or step: the observation, then the game's state suffix
    (as ``gem.wrappers.ObservationWrapper`` joins them)."""
    text = observation
    suffix = (info or {}).get("suffix", "")
    if suffix:
        text = (text if not text or text.endswith("\n") else text + "\n") + suffix
    return text


def user_message(observation: str, info: dict) -> str:
    return PROMPT_HEAD + observation_text(observation, info) + PROMPT_TAIL


def is_win(observation: str, terminated: bool, truncated: bool) -> bool:
    """The game itself ended the episode at its success state (see the module docstring)."""
    return bool(terminated) and not truncated and observation.lstrip().startswith(WIN_PREFIX)


_TEMPLATES: dict = {}  # (game id, id(word lists)) -> (word lists, a built game); see ``template_env``


def template_env(game_id: str, words: WordLists | None):
    """A built game to copy for each episode (built once per process).

    ``gem.make`` resets the new game once without a seed, which for Sokoban-hard alone costs 1-20 s of
    room generation; copying a built game and resetting the copy with the episode's seed skips that.
    """
    key = (game_id, id(words))
    if key not in _TEMPLATES:
        gem = import_gem()
        with private_random(new_random_state(0)), (gem_word_lists(words) if words is not None else nullcontext()):
            _TEMPLATES[key] = (words, gem.make(game_id))
    return _TEMPLATES[key][1]


# ------------------------------------------------------------------------------------------------ episode
class GemEpisode(Conversation):
    """One GEM game episode played as a chat; ``respond`` steps the game with the model's reply."""

    def __init__(self, game_id: str, env_seed: int, turn_cap: int = 0, words: WordLists | None = None):
        self.game_id, self.env_seed, self.words = game_id, env_seed, words
        self.rng = new_random_state(env_seed)
        with self._env_calls():
            self.env = copy.deepcopy(template_env(game_id, words))
            observation, info = self.env.reset(seed=env_seed)
        own_limit = int(self.env.max_turns)
        self.limit = min(turn_cap, own_limit) if turn_cap else own_limit
        super().__init__([{"role": "user", "content": user_message(observation, info)}])
        self.rewards: list = []
        self.actions: list = []
        self.outcome = ""
        self.won = False
        self.final_observation = ""
        self.error = ""

    @contextmanager
    def _env_calls(self):
        """Every call into the game: on the episode's private RNG, with the word lists patched in."""
        words = gem_word_lists(self.words) if self.words is not None else nullcontext()
        with private_random(self.rng), words:
            yield

    def respond(self, text: str) -> str | None:
        from gem.utils.parsing import extract_last_boxed_answer

        action = extract_last_boxed_answer(text)  # logged only: the game parses the raw reply itself
        self.actions.append(None if action is None else action[:200])
        try:
            with self._env_calls():
                observation, reward, terminated, truncated, info = self.env.step(text)
        except Exception as exc:  # noqa: BLE001 - a GEM bug hit by an odd reply must not stop the evaluation
            self.outcome, self.error = "env_error", f"{type(exc).__name__}: {exc}"[:500]
            return None
        self.rewards.append(float(reward))
        if terminated or truncated:
            self.won = is_win(observation, terminated, truncated)
            self.final_observation = observation[:500]
            if self.won:
                self.outcome = "won"
            elif truncated:
                self.outcome = "turn_limit"
            elif float(reward) == FORMAT_ERROR_REWARD:
                self.outcome = "format_error"
            else:
                self.outcome = "lost"
            return None
        if len(self.replies) >= self.limit:
            self.outcome = "turn_cap"  # our max_turns override, below the game's own limit
            return None
        return user_message(observation, info)


# ------------------------------------------------------------------------------------------------ benchmark
@register_benchmark
class GemGames(Benchmark):
    name = "gem_games"
    config_cls = GemGamesConfig

    def _specs(self) -> dict:
        return validate_games(list(self.config.games))

    def excluded_games(self) -> list:
        """Configured games left out: they read ``en-basic``, which is absent, and basic_words = 'exclude'."""
        if self.config.basic_words != "exclude" or has_basic_words(self.config.nltk_data_dir):
            return []
        return [game_id for game_id, spec in self._specs().items() if "en-basic" in word_lists_needed(spec)]

    def _word_lists(self) -> WordLists:
        return load_word_lists(self.config.nltk_data_dir, self.config.basic_words)

    def check_data(self) -> None:
        specs = self._specs()
        if any(word_lists_needed(spec) for spec in specs.values()):
            self._word_lists()  # builds the corpus; a missing english-words package raises ConfigError

    def items(self) -> list[Item]:
        excluded = set(self.excluded_games())
        items = []
        for game_id in self._specs():
            if game_id in excluded:
                continue
            name = game_name(game_id)
            items += [Item(f"{name}/{e:03d}", {"game": game_id, "episode": e}, group=name)
                      for e in range(self.config.episodes)]
        return items

    def play(self, items, ctx: EvalContext) -> list[ItemRecord]:
        specs = self._specs()
        needs_words = any(word_lists_needed(specs[item.payload["game"]]) for item in items)
        words = self._word_lists() if needs_words else None
        episodes = []
        for item in items:
            game_id = item.payload["game"]
            episodes.append(GemEpisode(game_id, ctx.item_seed(item.id, "env"), self.config.max_turns,
                                       words if word_lists_needed(specs[game_id]) else None))
        play_conversations(ctx, episodes, [ctx.item_seed(item.id) for item in items],
                           max_turns=max(e.limit for e in episodes))
        records = []
        for item, episode in zip(items, episodes):
            uses_basic = "en-basic" in word_lists_needed(specs[item.payload["game"]])
            records.append(ItemRecord(
                id=item.id,
                prompt_hash=prompt_hash(episode.messages[0]["content"]),
                response=episode.replies[-1] if episode.replies else "",  # the last reply
                score=1.0 if episode.won else 0.0,
                turns=len(episode.replies),
                tokens=episode.tokens,
                group=item.group,
                extra={"game": item.payload["game"], "env_seed": episode.env_seed,
                       "return": sum(episode.rewards), "rewards": episode.rewards,
                       "outcome": episode.outcome or episode.stop_reason, "turn_limit": episode.limit,
                       "actions": episode.actions, "final_observation": episode.final_observation,
                       "error": episode.error,
                       "basic_words": words.basic_source if (uses_basic and words) else ""},
            ))
        return records

    def aggregate(self, records) -> list[Metric]:
        metrics = [mean_metric("win_rate", [r.score for r in records]),
                   mean_metric("mean_return", [r.extra["return"] for r in records]),
                   mean_metric("mean_turns", [r.turns for r in records])]
        for game in sorted({r.group for r in records}):
            mine = [r for r in records if r.group == game]
            metrics += [mean_metric(f"win_rate/{game}", [r.score for r in mine]),
                        mean_metric(f"mean_return/{game}", [r.extra["return"] for r in mine])]
            if any(r.extra.get("basic_words") == "web2" for r in mine):
                metrics.append(Metric(f"substituted_words/{game}", 1.0, len(mine), float("nan")))
        metrics += [Metric(f"excluded/{game_name(g)}", 1.0, 0, float("nan")) for g in self.excluded_games()]
        return metrics
