"""GEM game suite: scripted players with known outcomes, seeds, word lists, and one real-model smoke test."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from scripted_backend import ScriptedBackend
from spade.configtools import ConfigError, from_dict
from spade.evals.base import EvalContext, EvalRun, evaluate
from spade.evals.gem_games import GemGames, GemGamesConfig, is_win, observation_text
from spade.evals.nltk_words import load_word_lists, web2_words

GUESS = "game:GuessTheNumber-v0-hard"
HANOI = "game:TowerofHanoi-v0-hard"
WORDLE = "game:Wordle-v0-hard"


# ------------------------------------------------------------------------------------------------ scripted players
def binary_search(prompt: str) -> str:
    """Optimal Guess The Number: halve the range the game's hints leave open (<= 6 guesses for 1..50)."""
    low, high = map(int, re.search(r"between (\d+) and (\d+)", prompt).groups())
    for guess, hint in re.findall(r"you guessed (\d+), and the target number is (higher|lower)", prompt):
        if hint == "higher":
            low = max(low, int(guess) + 1)
        else:
            high = min(high, int(guess) - 1)
    return f"Halving the range: \\boxed{{{(low + high) // 2}}}"


def hanoi_moves(n: int, source="A", spare="B", target="C") -> list:
    if n == 0:
        return []
    return hanoi_moves(n - 1, source, target, spare) + [(source, target)] + hanoi_moves(n - 1, spare, source, target)


def hanoi(prompt: str) -> str:
    """Optimal Tower of Hanoi: the k-th move of the 2^n - 1 solution, k = moves made so far."""
    disks = int(re.search(r"Tower of Hanoi with (\d+) disks", prompt).group(1))
    source, target = hanoi_moves(disks)[prompt.count("you moved disk")]
    return f"\\boxed{{{source} {target}}}"


def wordle_feedback(secret: str, guess: str) -> list:
    """Wordle marks as GEM computes them: greens first, then yellows against the unused secret letters."""
    marks, rest = [None] * len(guess), list(secret)
    for i, (g, s) in enumerate(zip(guess, secret)):
        if g == s:
            marks[i], rest[i] = "G", None
    for i, g in enumerate(guess):
        if marks[i] is None:
            marks[i] = "Y" if g in rest else "X"
            if g in rest:
                rest[rest.index(g)] = None
    return marks


def wordle_player(candidates: list):
    """Guess the first word still consistent with every feedback line so far (always wins eventually)."""
    def play(prompt: str) -> str:
        seen = [(word, re.findall(r"[GYX]", marks)) for word, marks in
                re.findall(r"you guessed ([A-Z]+)\nFeedback:\n[A-Z]+\n\[([^\]]*)\]", prompt)]
        left = [w for w in candidates if all(wordle_feedback(w, g) == m for g, m in seen)]
        left = [w for w in left if w not in {g for g, _ in seen}]
        return f"\\boxed{{{left[0]}}}"
    return play


def by_game(**players):
    """Route each prompt to the player of the game it shows (first words of GEM's instructions)."""
    names = {"guess": "Guess The Number", "hanoi": "Tower of Hanoi", "wordle": "playing Wordle"}

    def reply(prompt, seed):
        for key, player in players.items():
            if names[key] in prompt:
                return player(prompt)
        return "I am not sure what to do here."  # no \boxed{}: a format error in every game
    return reply


def run(tiny_model, tmp_path, reply, seed=5, batch=8, name="r", **config):
    config.setdefault("nltk_data_dir", str(tmp_path / "nltk_data"))
    bench = GemGames(GemGamesConfig(**config))
    ctx = EvalContext(ScriptedBackend(tiny_model[1], reply), seed=seed, benchmark="gem_games", max_new_tokens=64)
    result = evaluate(bench, ctx, EvalRun("toy", 0, tmp_path / f"{name}.json", batch), progress=False)
    rows = {row["metric"]: row for row in result["rows"]}
    records = [json.loads(line) for line in (tmp_path / f"{name}.items.jsonl").read_text().splitlines()]
    return rows, {r["id"]: r for r in records}


@pytest.fixture(scope="module")
def words_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("nltk"))


# ------------------------------------------------------------------------------------------------ tests
def test_optimal_players_win_and_garbage_loses(tiny_model, tmp_path):
    reply = by_game(guess=binary_search, hanoi=hanoi)
    rows, records = run(tiny_model, tmp_path, reply, games=[GUESS, HANOI, "game:Mastermind-v0-hard"], episodes=2)
    assert rows["win_rate/GuessTheNumber-v0-hard"]["value"] == 1.0
    assert rows["win_rate/TowerofHanoi-v0-hard"]["value"] == 1.0
    assert rows["win_rate/Mastermind-v0-hard"]["value"] == 0.0  # the garbage reply
    assert rows["win_rate"]["value"] == pytest.approx(4 / 6) and rows["win_rate"]["n"] == 6
    # returns: GEM pays 1.0 on these wins and -0.1 for a format error
    assert rows["mean_return"]["value"] == pytest.approx((4 * 1.0 - 2 * 0.1) / 6)
    hanoi_record = records["TowerofHanoi-v0-hard/000"]
    assert hanoi_record["turns"] == 31 and hanoi_record["extra"]["outcome"] == "won"  # 2^5 - 1 moves
    assert all(records[f"GuessTheNumber-v0-hard/00{e}"]["turns"] <= 6 for e in range(2))
    garbage = records["Mastermind-v0-hard/000"]
    assert garbage["turns"] == 1 and garbage["extra"]["outcome"] == "format_error"
    assert garbage["extra"]["return"] == pytest.approx(-0.1) and garbage["score"] == 0.0


def test_turn_limit_and_turn_cap(tiny_model, tmp_path):
    out_of_range = by_game(guess=lambda prompt: "\\boxed{99}")  # valid format, never a legal guess
    _, records = run(tiny_model, tmp_path, out_of_range, games=[GUESS], episodes=1)
    record = records["GuessTheNumber-v0-hard/000"]
    assert record["turns"] == 7 and record["extra"]["outcome"] == "turn_limit" and record["score"] == 0.0
    assert record["extra"]["return"] == 0.0 and record["extra"]["actions"] == ["99"] * 7
    _, records = run(tiny_model, tmp_path, out_of_range, name="cap", games=[GUESS], episodes=1, max_turns=3)
    record = records["GuessTheNumber-v0-hard/000"]
    assert record["turns"] == 3 and record["extra"]["outcome"] == "turn_cap" and record["extra"]["turn_limit"] == 3


def test_env_seeds_stable_and_batching_free(tiny_model, tmp_path):
    def moves(prompt, seed):  # 2048 draws new tiles while stepping: the course must not depend on batching
        return "\\boxed{" + ["left", "up", "right", "down"][prompt.count("Observation:") % 4] + "}"

    config = {"games": ["game:Game2048-v0-easy", "game:Minesweeper-v0-easy"], "episodes": 2, "max_turns": 6}
    state = random.getstate()
    _, one = run(tiny_model, tmp_path, moves, batch=1, name="b1", **config)
    assert random.getstate() == state  # GEM reseeds the global generators; we must not leak that
    _, four = run(tiny_model, tmp_path, moves, batch=4, name="b4", **config)
    _, other = run(tiny_model, tmp_path, moves, seed=6, name="s6", **config)
    assert one == four
    assert {i: r["extra"]["env_seed"] for i, r in one.items()} != {i: r["extra"]["env_seed"] for i, r in other.items()}
    assert len({r["extra"]["env_seed"] for r in one.values()}) == 4


def test_word_games_excluded_without_basic_words(tiny_model, tmp_path, words_dir):
    config = {"games": [GUESS, WORDLE, "game:WordSearch-v0-hard"], "episodes": 1, "nltk_data_dir": words_dir}
    bench = GemGames(GemGamesConfig(**config))
    bench.check_data()  # builds NLTK's 'en' list from english-words
    assert (Path(words_dir) / "corpora" / "words" / "en").is_file()
    assert not (Path(words_dir) / "corpora" / "words" / "en-basic").exists()
    assert [item.id for item in bench.items()] == ["GuessTheNumber-v0-hard/000", "WordSearch-v0-hard/000"]
    rows, records = run(tiny_model, tmp_path, by_game(guess=binary_search), **config)
    assert rows["excluded/Wordle-v0-hard"]["value"] == 1.0 and rows["excluded/Wordle-v0-hard"]["n"] == 0
    assert rows["win_rate"]["value"] == 0.5  # WordSearch (NLTK 'en' from english-words) is played, garbage loses
    assert records["WordSearch-v0-hard/000"]["extra"]["outcome"] == "format_error"


def test_wordle_with_web2_stand_in_is_winnable(tiny_model, tmp_path, words_dir):
    candidates = [w.upper() for w in load_word_lists(words_dir, "web2").words("en-basic")
                  if len(w) == 5 and w.isalpha() and w.islower()]
    rows, records = run(tiny_model, tmp_path, by_game(wordle=wordle_player(candidates)), games=[WORDLE],
                        episodes=1, nltk_data_dir=words_dir, basic_words="web2")
    assert rows["win_rate"]["value"] == 1.0 and rows["substituted_words/Wordle-v0-hard"]["value"] == 1.0
    assert records["Wordle-v0-hard/000"]["extra"]["basic_words"] == "web2"


def test_real_basic_words_file_is_used(tiny_model, tmp_path):
    data = tmp_path / "nltk_data"
    (data / "corpora" / "words").mkdir(parents=True)
    (data / "corpora" / "words" / "en-basic").write_text("apple\ngrape\nlemon\nKnown\n", encoding="ascii")
    rows, records = run(tiny_model, tmp_path, by_game(wordle=wordle_player(["APPLE", "GRAPE", "LEMON"])),
                        games=[WORDLE], episodes=2, nltk_data_dir=str(data))
    assert rows["win_rate"]["value"] == 1.0 and "excluded/Wordle-v0-hard" not in rows
    assert all(r["turns"] <= 3 and r["extra"]["basic_words"] == "nltk" for r in records.values())


def test_web2_words_match_nltk_layout():
    words = web2_words()
    assert len(words) > 230_000 and words[:3] == ["A", "a", "aa"]
    assert all(w.isalpha() for w in words[:1000])


def test_bad_config_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"eval\.gem_games\.games.*game:NoSuchGame.*game:GuessTheNumber-v0-hard"):
        GemGames(GemGamesConfig(games=["game:NoSuchGame-v0"])).items()
    with pytest.raises(ConfigError, match="cannot build"):
        GemGames(GemGamesConfig(games=["game:Crosswords-v0-random"])).items()
    with pytest.raises(ConfigError, match="twice"):
        GemGames(GemGamesConfig(games=[GUESS, GUESS])).items()
    with pytest.raises(ConfigError, match=r"gem_games\.basic_words.*allowed values"):
        from_dict(GemGamesConfig, {"basic_words": "ogden"}, "eval.gem_games")


def test_win_needs_the_games_own_success_state():
    assert is_win("Congratulations! You solved the Tower of Hanoi Puzzle", True, False)
    assert not is_win("Congratulations! ...", True, True)  # cut by the turn limit
    assert not is_win("Game over! You hit a mine at (1, 2)", True, False)
    assert observation_text("Welcome.", {"suffix": "Enter your move."}) == "Welcome.\nEnter your move."


def test_hf_backend_smoke(tiny_model, tmp_path):
    from spade.inference.generation_hf import HFBackend

    model, tokenizer = tiny_model
    bench = GemGames(GemGamesConfig(games=[GUESS], episodes=1, max_turns=2, nltk_data_dir=str(tmp_path)))
    ctx = EvalContext(HFBackend(model, tokenizer), seed=1, benchmark="gem_games", max_new_tokens=8)
    result = evaluate(bench, ctx, EvalRun("toy", 0, tmp_path / "hf.json", 2), progress=False)
    rows = {row["metric"]: row for row in result["rows"]}
    assert rows["win_rate"]["n"] == 1 and rows["win_rate"]["value"] in (0.0, 1.0)
    assert 1 <= rows["mean_turns"]["value"] <= 2
