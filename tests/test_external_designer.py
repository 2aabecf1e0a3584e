"""The fixed external designer (``baseline.mode: fixed_external_designer``, spade.designer.external).

A stand-in OpenAI-compatible server runs in a thread on 127.0.0.1: design chats get a fixed valid
environment (the library's job_order_game file, read from src/spade/envs/library/games/), hint chats a
fixed hint. The agent is the tiny random model (HFBackend), so its samples are real sampled tokens.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from spade.core import env_source
from spade.config import SpadeConfig, resolve_layers
from spade.configtools import ConfigError, deep_merge, from_dict
from spade.designer.corpus import CorpusSampler, Document
from spade.designer.external import ExternalDesignerBackend, ExternalDesignerError
from spade.designer.memory import EnvironmentMemory
from spade.envs.validate import Validator
from spade.inference.generation import SamplingParams
from spade.inference.generation_hf import HFBackend
from spade.seeding import derive_seed
from spade.core.selfplay import SelfPlay

ROOT = Path(__file__).resolve().parents[1]
ENV_FILE = ROOT / "src/spade/envs/library/games/job_order_game.py"
DESIGN = "Here is the environment:\n```python\n" + ENV_FILE.read_text() + "```\n"
HINT = "<hint>Order the jobs by due date.</hint>"
KEY_ENV = "SPADE_TEST_EXTERNAL_KEY"
KEY = "sk-test-0123456789"

TINY = {
    "model_card": "tiny-random",
    "selfplay": {"active_skills": 1, "envs_per_skill": 2, "group_size": 2, "regen_interval": 2, "design_attempts": 1,
                 "backfill": False, "skills": ["optimization", "logical_deduction"], "train_designer": False},
    "designer": {"temperature": 0.7, "max_new_tokens": 300, "hint_max_new_tokens": 16},
    "agent": {"max_turns": 2, "max_new_tokens": 4},
    "eval": {"heldout_library": {"environments": ["crt_residue_puzzle"], "episodes": 2}},
}


class StandIn:
    """A chat-completions server: records every request; answers 500 to the first ``fail_first`` ones."""

    def __init__(self, fail_first: int = 0):
        self.requests: list = []  # (path, authorization header, JSON body)
        self.fail_first = fail_first
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stand_in.requests.append((self.path, self.headers.get("Authorization"), body))
                if len(stand_in.requests) <= stand_in.fail_first:
                    self._reply(500, {"error": {"message": "overloaded"}})
                    return
                text = " ".join(m["content"] for m in body["messages"])
                content = DESIGN if "You are an environment designer" in text else HINT
                self._reply(200, {"id": "x", "object": "chat.completion", "model": body["model"],
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": content}}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": len(content.split()),
                                            "total_tokens": 10 + len(content.split())}})

            def _reply(self, status, data):
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):  # keep the test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def bodies(self, role: str) -> list:
        designer = [b for _, _, b in self.requests if "You are an environment designer" in b["messages"][0]["content"]]
        return designer if role == "design" else [b for _, _, b in self.requests if b not in designer]


def external_config(url: str, **baseline):
    data = deep_merge(TINY, {"baseline": {"mode": "fixed_external_designer", "external_base_url": url,
                                          "external_model": "stand-in-designer", "external_api_key_env": KEY_ENV,
                                          "external_backoff_s": 0.01, **baseline}})
    return from_dict(SpadeConfig, resolve_layers(data))


class AgentOnly(HFBackend):
    """The tiny model as the agent; counts its calls so that a designer prompt reaching it would show."""

    def __init__(self, model, tokenizer):
        super().__init__(model, tokenizer)
        self.prompts: list = []

    def generate(self, prompts, params, seed):
        self.prompts += [self.tokenizer.decode(p) for p in prompts]
        return super().generate(prompts, params, seed)


CORPUS = [Document("doc-a", "Scheduling jobs on one machine: earliest due date first.", "test"),
          Document("doc-b", "Knapsack: choose items under a weight budget.", "test")]


def test_external_designer_writes_the_environments_and_only_the_agent_trains(pool, tiny_model, monkeypatch):
    model, tokenizer = tiny_model
    monkeypatch.setenv(KEY_ENV, KEY)
    with StandIn() as server:
        config = external_config(server.url, external_pool="online")
        agent = AgentOnly(model, tokenizer)
        core = SelfPlay(config, agent, Validator(pool), EnvironmentMemory(config.memory),
                        CorpusSampler(CORPUS, seed=3))
        steps = [core.rollout(step) for step in range(3)]
    # every designer/hint call went to the server, with the configured model, key, temperature and seeds
    assert {path for path, _, _ in server.requests} == {"/v1/chat/completions"}
    assert {auth for _, auth, _ in server.requests} == {f"Bearer {KEY}"}
    design, hints = server.bodies("design"), server.bodies("hint")
    assert len(design) == 4 and len(hints) == 4  # 2 slots at each regeneration step (0 and 2)
    assert {b["model"] for b in design + hints} == {"stand-in-designer"}
    assert {b["temperature"] for b in design} == {0.7}
    # designer.top_p and hint_top_p (the recipe's reference values); a chat API gets no top-k
    assert {b["top_p"] for b in design} == {0.95} and {b["top_p"] for b in hints} == {0.9}
    assert not any("top_k" in b for b in design + hints)
    assert {b["temperature"] for b in hints} == {0.3}  # designer.hint_temperature default (reference code)
    assert {b["max_tokens"] for b in design} == {300} and {b["max_tokens"] for b in hints} == {16}
    expected = {derive_seed(derive_seed(config.seed, "design", step, 0), "external", i) for step in (0, 2)
                for i in range(2)}
    assert {b["seed"] for b in design} == expected
    # corpus grounding as usual: every design request carries one of the corpus documents
    assert all(any(d.text in b["messages"][-1]["content"] for d in CORPUS) for b in design)
    # the environments are the server's (the job_order_game file), hints too
    envs = core._envs()
    # round-robin skills: round 1 (step 2) designs for the second skill
    assert [e.env_id for e in envs] == ["s00002-logical_deduction-0", "s00002-logical_deduction-1"]
    assert all(e.valid and e.source == "designer" and e.class_name == "JobOrderGame" for e in envs)
    assert all(e.hint == "Order the jobs by due date." and e.designer_sample is None for e in envs)
    # the agent backend saw agent prompts only
    assert agent.prompts and not any("You are an environment designer" in p or "write one short hint" in p
                                      for p in agent.prompts)
    # no designer samples, ever; agent samples at every step (2 envs x G = 2)
    assert all(s.role == "agent" for samples, _, _ in steps for s in samples)
    assert all(len([s for s in samples if sum(s.loss_mask)]) == len(samples) > 0 for samples, _, _ in steps)
    assert core.state.invalid_samples == []
    # the designer reward is computed when set 0 closes (logging only) and memory records the set
    closed = steps[2][2]
    assert [r["env_id"] for r in closed] == ["s00000-optimization-0", "s00000-optimization-1"]
    assert all(r["designer_reward"] is not None and r["designer_sample"] is None for r in closed)
    assert steps[2][1]["closed_mean_designer_reward"] is not None and steps[2][1]["designer_samples"] == 0
    assert len(core.memory.records) == 2
    metrics = steps[0][1]
    assert metrics["env_source"] == "fixed_external_designer" and metrics["designer_valid"] == 2
    words = len(DESIGN.split())  # the stand-in's usage.completion_tokens
    assert metrics["design_generated_tokens"] == 2 * words and metrics["valid_env_rate"] == 1.0
    assert [m.get("regenerated", False) for _, m, _ in steps] == [True, False, True]


class CountingAgent(AgentOnly):
    """The agent, noting how many requests the stand-in server had seen when the agent first played."""

    def __init__(self, model, tokenizer, server):
        super().__init__(model, tokenizer)
        self.server, self.requests_at_first_play = server, None

    def generate(self, prompts, params, seed):
        if self.requests_at_first_play is None:
            self.requests_at_first_play = len(self.server.requests)
        return super().generate(prompts, params, seed)


def test_offline_external_pool_is_designed_before_training_without_memory(pool, tiny_model, monkeypatch):
    """The default, external_pool 'offline' (paper: a static, memory-free pool generated offline with corpus
    grounding): pool_size 3 with 2 slots takes design rounds 0 and 1 (4 requests, skills optimization then
    logical_deduction), all sent before the agent's first play and none afterwards: no hints, no regeneration.
    The memory holds library seeds, yet no pool prompt carries one; the online switch's prompts do."""
    from spade.core.backend_setup import fresh_memory

    model, tokenizer = tiny_model
    monkeypatch.setenv(KEY_ENV, KEY)
    layers = {"train": {"global_batch": 4}, "selfplay": {"total_steps": 4}}
    with StandIn() as server:
        config = from_dict(SpadeConfig, resolve_layers(deep_merge(
            deep_merge(TINY, layers), {"baseline": {"mode": "fixed_external_designer", "external_base_url": server.url,
                                                    "external_model": "stand-in-designer", "pool_size": 3,
                                                    "external_api_key_env": KEY_ENV, "external_backoff_s": 0.01}})))
        assert config.baseline.external_pool == "offline" and config.memory.enabled
        agent = CountingAgent(model, tokenizer, server)
        memory = fresh_memory(config)
        assert memory.positive_seeds("optimization")  # seeds a design prompt would get with memory
        core = SelfPlay(config, agent, Validator(pool), memory, CorpusSampler(CORPUS, seed=3))
        steps = [core.rollout(step) for step in range(3)]
        design, hints = server.bodies("design"), server.bodies("hint")
        assert len(design) == 4 and hints == [] and agent.requests_at_first_play == 4 == len(server.requests)
        online = SelfPlay(external_config(server.url, external_pool="online"), AgentOnly(model, tokenizer),
                          Validator(pool), fresh_memory(config), CorpusSampler(CORPUS, seed=3))
        online.begin_step(0)
        online_design = server.bodies("design")[4:]
    text = [b["messages"][-1]["content"] for b in design]
    assert not any("<good_example>" in t or "<bad_example>" in t for t in text)  # memory-free
    assert all("<good_example>" in b["messages"][-1]["content"] for b in online_design)
    assert all(any(d.text in t for d in CORPUS) for t in text)  # corpus grounding
    expected = {derive_seed(derive_seed(config.seed, "design", step, 0), "external", i) for step in (0, 2)
                for i in range(2)}  # round r is designed with the seeds of SPADE's regeneration at step r x k
    assert {b["seed"] for b in design} == expected
    assert [e["env_id"] for e in core.state.pool] == ["p00000-optimization", "p00001-optimization",
                                                       "p00002-logical_deduction"]
    assert all(e["class_name"] == "JobOrderGame" for e in core.state.pool)
    metrics = steps[0][1]
    assert metrics["env_source"] == "fixed_external_designer" and metrics["regenerated"]
    assert metrics["pool_size"] == 3 and metrics["pool_rounds"] == 2 and metrics["pool_memory_seeds"] is False
    assert metrics["design_attempts"] == 4 and metrics["design_generated_tokens"] == 4 * len(DESIGN.split())
    assert [m.get("regenerated", False) for _, m, _ in steps] == [True, False, False]
    assert all(len(m["pool_draw"]) == 2 and m["designer_samples"] == 0 for _, m, _ in steps)
    assert all(s.role == "agent" for samples, _, _ in steps for s in samples)
    assert all(not e.hint and e.designer_sample is None for e in core._envs())
    assert [[r["step"] for r in closed] for _, _, closed in steps] == [[], [0, 0], [1, 1]]
    assert all(r["designer_reward"] is None for _, _, closed in steps for r in closed)
    assert not any("You are an environment designer" in p or "write one short hint" in p for p in agent.prompts)


def test_external_pool_switch_is_checked():
    with pytest.raises(ConfigError, match=r"external_pool.*allowed values: \['offline', 'online'\]"):
        external_config("http://127.0.0.1:9/v1", external_pool="cached")
    with pytest.raises(ConfigError, match=r"'baseline.hint_arm' is true.*not 'fixed_external_designer' with "
                                          r"baseline.external_pool 'online'"):
        env_source.check_config(external_config("http://127.0.0.1:9/v1", external_pool="online", hint_arm=True))
    with pytest.raises(ConfigError, match=r"'baseline.pool_size' is 8.*designed pool only.*'online'"):
        env_source.check_config(external_config("http://127.0.0.1:9/v1", external_pool="online", pool_size=8))
    env_source.check_config(external_config("http://127.0.0.1:9/v1", hint_arm=True, pool_size=8))  # offline: fine


def test_transient_errors_are_retried_and_fatal_ones_are_not(monkeypatch):
    params = SamplingParams(0.6, 1.0, 8)
    chat = [{"role": "system", "content": "You are a helper."}, {"role": "user", "content": "hi"}]
    with StandIn(fail_first=1) as server:
        slept = []
        backend = ExternalDesignerBackend(server.url, "m", KEY, timeout_s=5, retries=2, backoff_s=0.5,
                                          sleep=slept.append)
        (reply,) = backend.generate_chats([chat], params, [11])
        assert reply.text == HINT and reply.completion_tokens == len(HINT.split()) and reply.completion_ids == []
        assert len(server.requests) == 2 and slept == [0.5]  # one 500, one backoff, then success
        assert server.requests[1][2]["seed"] == 11
    with StandIn(fail_first=5) as server:
        backend = ExternalDesignerBackend(server.url, "m", KEY, timeout_s=5, retries=2, backoff_s=0.5,
                                          sleep=lambda s: None)
        with pytest.raises(ExternalDesignerError, match=r"127\.0\.0\.1.*/v1/chat/completions failed 3 times.*HTTP 500"):
            backend.generate_chats([chat], params, 0)
        assert len(server.requests) == 3  # 1 try + 2 retries
    # a refused connection is retried, then reported with the URL; a 4xx stops at once
    with StandIn() as server:
        dead = server.url
    backend = ExternalDesignerBackend(dead, "m", KEY, timeout_s=2, retries=1, backoff_s=0.0)
    with pytest.raises(ExternalDesignerError, match=r"failed 2 times") as info:
        backend.complete(chat, params, 0)
    assert KEY not in str(info.value)


def test_client_errors_stop_at_once_and_hide_the_key():
    class Echo(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            raw = json.dumps({"error": f"bad key {self.headers['Authorization']}"}).encode()
            self.send_response(401)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        backend = ExternalDesignerBackend(f"http://127.0.0.1:{server.server_address[1]}/v1/", "m", KEY, retries=3,
                                          sleep=lambda s: pytest.fail("a 401 must not be retried"))
        with pytest.raises(ExternalDesignerError, match=r"HTTP 401 \(not retried\).*<redacted>") as info:
            backend.complete([{"role": "user", "content": "hi"}], SamplingParams(), 1)
        assert KEY not in str(info.value) and "/v1/chat/completions" in str(info.value)
    finally:
        server.shutdown()
        server.server_close()


def test_missing_settings_and_key_are_config_errors(pool, tiny_model, monkeypatch):
    model, tokenizer = tiny_model
    monkeypatch.delenv(KEY_ENV, raising=False)
    config = external_config("http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match=rf"'{KEY_ENV}' \(named by config key 'baseline.external_api_key_env'\)"):
        SelfPlay(config, HFBackend(model, tokenizer), Validator(pool), EnvironmentMemory(config.memory), None)
    monkeypatch.setenv(KEY_ENV, KEY)
    for key in ("external_base_url", "external_model"):
        with pytest.raises(ConfigError, match=rf"'baseline.{key}' is empty.*fixed_external_designer"):
            env_source.check_config(external_config("http://127.0.0.1:9/v1", **{key: ""}))
    with pytest.raises(ConfigError, match=r"'baseline.external_base_url' is 'localhost:8000'.*http"):
        ExternalDesignerBackend.from_config(external_config("localhost:8000"))
    with pytest.raises(ConfigError, match="selfplay.train_designer"):
        env_source.check_config(from_dict(SpadeConfig, resolve_layers(deep_merge(
            TINY, {"selfplay": {"train_designer": True}, "baseline": {
                "mode": "fixed_external_designer", "external_base_url": "http://x/v1", "external_model": "m"}}))))
    with pytest.raises(ConfigError, match=r"external_max_tokens_field.*allowed values"):
        external_config("http://127.0.0.1:9/v1", external_max_tokens_field="limit")
