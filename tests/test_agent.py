"""The agent's episode runner: action extraction, token bookkeeping, hints, returns."""

from __future__ import annotations

import pytest

from spade.core.agent import AgentConfig, ChatTokens, EpisodeJob, EpisodeRunner, extract_action, first_boxed
from spade.envs.intake import intake
from spade.envs.library.registry import get_env
from scripted_backend import TurnBackend

SYSTEM = {"game": "You play games.", "tool_use": "You use tools."}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is \\boxed{42}.", "42"),
        ("\\boxed{a {nested} b} then \\boxed{2}", "a {nested} b"),
        ("no box", None),
        ("\\boxed{unclosed", None),
    ],
)
def test_first_boxed(text, expected):
    assert first_boxed(text) == expected


@pytest.mark.parametrize(
    "text, kind, expected",
    [
        ("<think>maybe \\boxed{1}</think> so \\boxed{2} wins", "game", "\\boxed{2}"),
        ("I do not know", "game", "I do not know"),
        ('Calling <tool_call>{"name": "a", "arguments": {}}</tool_call>', "tool_use", '{"name": "a", "arguments": {}}'),
        ('ok {"name": "b"} ', "tool_use", '{"name": "b"}'),
        ("all set <answer>done</answer>", "tool_use", "<answer>done</answer>"),
    ],
)
def test_extract_action(text, kind, expected):
    assert extract_action(text, kind) == expected


def test_continuation_matches_the_template(tiny_model):
    _, tokenizer = tiny_model
    chat = ChatTokens(tokenizer)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "first"}]
    ids = chat.first_prompt(messages)
    reply_ids = chat.encode("my move") + [tokenizer.eos_token_id]
    messages.append({"role": "assistant", "content": "my move"})
    ids += reply_ids + chat.continuation(messages, "second", ended_with_eos=True)
    full = chat.render(messages + [{"role": "user", "content": "second"}], add_generation_prompt=True)
    assert tokenizer.decode(ids) == full


def _job(name, seed, arm="no_hint", hint=""):
    code = intake(get_env(name).source())
    return EpisodeJob(name, code.code, code.class_name, "game", seed, arm, hint)


def test_episode_records_tokens_masks_and_returns(pool, tiny_model):
    _, tokenizer = tiny_model
    backend = TurnBackend(tokenizer, ["\\boxed{1}", "hmm", "\\boxed{2}"])
    runner = EpisodeRunner(backend, pool, AgentConfig(max_turns=3, max_new_tokens=16, max_context_tokens=4096), SYSTEM)
    (record,) = runner.run([_job("crt_residue_puzzle", 5)], seed=0)
    assert record.turns == 3 and record.outcome == "truncated" and record.final_return == 0.0 and not record.won
    assert len(record.token_ids) == len(record.loss_mask) == len(record.rollout_logprobs)
    sampled = [t for t, m in zip(record.token_ids, record.loss_mask) if m]
    expected = []
    for text in ("\\boxed{1}", "hmm", "\\boxed{2}"):
        expected += tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert sampled == expected and record.generated_tokens == len(expected)
    assert all(lp == -0.5 for lp, m in zip(record.rollout_logprobs, record.loss_mask) if m)
    assert backend.prompts[1] == record.token_ids[: len(backend.prompts[1])]  # one growing sequence


def test_winning_episode_and_hint_only_in_first_observation(pool, tiny_model):
    _, tokenizer = tiny_model
    code = intake(get_env("crt_residue_puzzle").source())
    episode = pool.open(code.code, code.class_name, seed=7, env_kwargs={"max_turns": 3})
    episode.reset(7)
    answer = episode.solution().value.splitlines()[0]
    episode.close()
    backend = TurnBackend(tokenizer, [f"\\boxed{{{answer}}}"])
    runner = EpisodeRunner(backend, pool, AgentConfig(max_turns=3, max_new_tokens=16, max_context_tokens=4096), SYSTEM)
    (record,) = runner.run([_job("crt_residue_puzzle", 7, "hint", "THE-HINT")], seed=0)
    assert record.won and record.final_return == 1.0 and record.outcome == "terminated" and record.turns == 1
    assert "THE-HINT" in tokenizer.decode(backend.prompts[0])


def test_broken_environment_is_an_env_failure(pool, tiny_model):
    _, tokenizer = tiny_model
    runner = EpisodeRunner(TurnBackend(tokenizer, []), pool, AgentConfig(max_turns=2), SYSTEM)
    job = EpisodeJob("broken", "raise RuntimeError('no')", "Env", "game", 0)
    (record,) = runner.run([job], seed=0)
    assert record.outcome == "env_failure" and "RuntimeError" in record.failure and record.final_return == 0.0


OWN_LIMIT = '''
class Own:
    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.turn = 0
        return "Say anything.", {}

    def step(self, action):
        self.turn += 1
        return "More.", 0.0, False, self.turn >= self.max_turns, {}
'''


@pytest.mark.parametrize("own, budget, expected", [(True, 5, 3), (True, 2, 2), (False, 5, 5)])
def test_a_designed_class_keeps_its_own_turn_limit_capped_at_the_budget(pool, tiny_model, own, budget, expected):
    """agent.turn_limit 'own' (reference: respect_game_max_turns): the class is built with its own max_turns (3),
    capped at agent.max_turns; 'budget' passes max_turns = agent.max_turns."""
    _, tokenizer = tiny_model
    runner = EpisodeRunner(TurnBackend(tokenizer, ["ok"] * 5), pool,
                           AgentConfig(max_turns=budget, max_new_tokens=16, max_context_tokens=4096), SYSTEM)
    (record,) = runner.run([EpisodeJob("own", OWN_LIMIT, "Own", "game", 0, own_turn_limit=own)], seed=0)
    assert record.turns == expected
    assert record.outcome == "truncated"  # the environment's own truncation, not the runner's turn limit


def test_construct_follows_the_reference_rules():
    from spade.sandbox.worker import construct

    class Plain:  # max_turns attribute of its own
        def __init__(self, max_turns=10):
            self.max_turns = max_turns

    class Required:  # cannot be built without max_turns
        def __init__(self, max_turns):
            self.max_turns = max_turns

    class Unset:  # an attribute that is not a positive integer
        def __init__(self):
            self.max_turns = None

    class Absent:
        def __init__(self):
            pass

    assert construct(Plain, {"max_turns": 25}).max_turns == 25  # no cap: the runner's kwargs, as before
    assert construct(Plain, {}, turn_cap=25).max_turns == 10
    assert construct(Plain, {}, turn_cap=4).max_turns == 4
    assert construct(Required, {}, turn_cap=25).max_turns == 25
    assert construct(Unset, {}, turn_cap=25).max_turns == 25
    assert not hasattr(construct(Absent, {}, turn_cap=25), "max_turns")


def test_reset_seed_picks_the_instance_and_seed_names_the_play(pool, tiny_model):
    """selfplay.same_problem: plays 1 and 2 reset with seed 99 see one instance and keep their own seeds as names;
    without a reset seed, seeds 1 and 2 are two instances (mutation: the runner resetting with ``job.seed`` always
    makes the first assertion fail)."""
    from dataclasses import replace

    _, tokenizer = tiny_model
    backend = TurnBackend(tokenizer, ["\\boxed{1}"] * 4)
    runner = EpisodeRunner(backend, pool, AgentConfig(max_turns=1, max_new_tokens=16, max_context_tokens=4096), SYSTEM)
    jobs = [_job("crt_residue_puzzle", 1), _job("crt_residue_puzzle", 2)]
    shared = runner.run([replace(job, reset_seed=99) for job in jobs], seed=0)
    own = runner.run(jobs, seed=0)
    first = [tokenizer.decode(prompt) for prompt in backend.prompts]
    assert first[0] == first[1] and [r.seed for r in shared] == [1, 2]
    assert first[2] != first[3] and [r.seed for r in own] == [1, 2]


class _CompiledRecorder:
    """A sandbox pool that records the ``compiled`` option of every episode it opens."""

    def __init__(self, pool):
        self.pool, self.config, self.compiled = pool, pool.config, []

    def open(self, code, class_name, **options):
        self.compiled.append(options.get("compiled"))
        return self.pool.open(code, class_name, **options)


def test_each_environment_is_compiled_once_for_its_episodes(pool, tiny_model, monkeypatch):
    """The runner hands the sandbox each environment's code compiled once (its episodes skip compiling); the
    episodes play as they would compiling it themselves; the cache keeps the most recently used COMPILED_KEPT."""
    import spade.core.agent as agent
    from spade.sandbox.pool import precompile

    _, tokenizer = tiny_model
    recorder = _CompiledRecorder(pool)
    runner = EpisodeRunner(TurnBackend(tokenizer, ["\\boxed{1}"] * 4), recorder,
                           AgentConfig(max_turns=1, max_new_tokens=16, max_context_tokens=4096), SYSTEM)
    jobs = [_job("crt_residue_puzzle", seed) for seed in range(3)] + [_job("sequence_next_terms", 0)]
    calls = []
    monkeypatch.setattr(agent, "precompile", lambda code, cap=None: calls.append(code) or precompile(code, cap))
    records = runner.run(jobs, seed=0)
    assert calls == [jobs[0].code, jobs[3].code]  # one compile per environment, not per episode
    expected = [precompile(job.code) for job in jobs]
    assert recorder.compiled == expected and all(expected)
    plain = EpisodeRunner(TurnBackend(tokenizer, ["\\boxed{1}"] * 4), pool,
                          AgentConfig(max_turns=1, max_new_tokens=16, max_context_tokens=4096), SYSTEM)
    monkeypatch.setattr(agent, "precompile", lambda code, cap=None: None)  # every episode compiles its code
    again = plain.run(jobs, seed=0)
    assert [(r.summary(), r.token_ids) for r in again] == [(r.summary(), r.token_ids) for r in records]
    monkeypatch.setattr(agent, "COMPILED_KEPT", 1)
    runner.compiled("x = 1")
    assert list(runner._compiled) == ["x = 1"]
