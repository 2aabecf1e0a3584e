"""The local OpenAI-compatible designer server (spade.designer.serve) and the run mode that starts it
(``baseline.external_serve: base_model``): the toy stand-in for the fixed external designer.

The tiny random model answers gibberish, which is all these tests need: the replies are compared token for
token with what our own HF backend samples for the same chat and seed.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spade.core import env_source
from spade.config import load_config
from spade.configtools import ConfigError
from spade.designer.external import ExternalDesignerBackend, ExternalDesignerError
from spade.designer.serve import DesignerServerError, DesignerService, build_http_server, local_designer, start_server
from spade.inference.generation import SamplingParams
from spade.inference.generation_hf import HFBackend
from spade.inference.models import chat_prompt_ids
from spade.seeding import derive_seed

CHAT = [{"role": "system", "content": "You are an environment designer."},
        {"role": "user", "content": "Write a small game."}]
NAME = "tiny-designer"


@pytest.fixture(scope="module")
def served(tiny_model):
    """The tiny model served in a thread on a free loopback port: (service, base URL)."""
    model, tokenizer = tiny_model
    service = DesignerService(model, tokenizer, NAME, default_max_tokens=6, seed=123)
    server = build_http_server(service)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def call(url: str, body, method: str = "POST", raw: bytes | None = None) -> tuple[int, dict]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_replies_are_the_backends_samples_and_seeds_reproduce(served, tiny_model):
    service, url = served
    model, tokenizer = tiny_model
    prompt = chat_prompt_ids(tokenizer, CHAT)
    direct = HFBackend(model, tokenizer)
    client = ExternalDesignerBackend(url, NAME, "", timeout_s=60, retries=0)
    params = SamplingParams(0.9, 1.0, 12)
    first, again, other = client.generate_chats([CHAT, CHAT, CHAT], params, [17, 17, 18])
    (expected,) = direct.generate([prompt], params, [17])
    assert first.text == expected.text and first.finish_reason == expected.finish_reason
    assert first.completion_tokens == len(expected.completion_ids) == 12  # the random model never stops early
    assert again.text == first.text and other.text != first.text
    # greedy (temperature 0) is the backend's greedy decode; top_p is passed through
    greedy = SamplingParams(0.0, 1.0, 5)
    assert client.complete(CHAT, greedy, 0).text == direct.generate([prompt], greedy, [0])[0].text
    nucleus = SamplingParams(1.0, 0.5, 6)
    assert client.complete(CHAT, nucleus, 4).text == direct.generate([prompt], nucleus, [4])[0].text
    # the raw reply: usage counts, seed echoed, max_completion_tokens honoured, text parts joined
    parts = [CHAT[0], {"role": "user", "content": [{"type": "text", "text": "Write a "},
                                                    {"type": "text", "text": "small game."}]}]
    status, reply = call(f"{url}/chat/completions", {"model": NAME, "messages": parts, "seed": 17,
                                                     "temperature": 0.9, "max_completion_tokens": 12, "n": 1})
    assert status == 200 and reply["object"] == "chat.completion" and reply["model"] == NAME
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": expected.text}
    assert reply["choices"][0]["finish_reason"] == "length" and reply["seed"] == 17
    assert reply["usage"] == {"prompt_tokens": len(prompt), "completion_tokens": 12,
                              "total_tokens": len(prompt) + 12}
    # no seed: the server derives one per unseeded request from its own seed (123); no limit: its default (6)
    seeds = [call(f"{url}/chat/completions", {"model": NAME, "messages": CHAT})[1] for _ in range(2)]
    assert [r["seed"] for r in seeds] == [derive_seed(123, "request", 0), derive_seed(123, "request", 1)]
    assert [r["usage"]["completion_tokens"] for r in seeds] == [6, 6]
    status, listing = call(f"{url}/models", None, method="GET")
    assert status == 200 and [m["id"] for m in listing["data"]] == [NAME]


@pytest.mark.parametrize("body, status, fragment", [
    (b"{not json", 400, "not valid JSON"),
    ([], 400, "must be a JSON object"),
    ({"messages": CHAT}, 400, "'model' is required"),
    ({"model": "gpt-5.5", "messages": CHAT}, 404, "'gpt-5.5' does not exist here; this server serves 'tiny-designer'"),
    ({"model": NAME}, 400, "'messages' must be a non-empty list"),
    ({"model": NAME, "messages": [{"role": "robot", "content": "x"}]}, 400, "'messages[0].role' is 'robot'"),
    ({"model": NAME, "messages": [{"role": "user", "content": 5}]}, 400, "'messages[0].content' must be a string"),
    ({"model": NAME, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "only text parts"),
    ({"model": NAME, "messages": CHAT, "n": 2}, 400, "'n' is 2"),
    ({"model": NAME, "messages": CHAT, "stream": True}, 400, "'stream' is not supported"),
    ({"model": NAME, "messages": CHAT, "temperature": 3}, 400, "'temperature' is 3; allowed: a number in [0.0, 2.0]"),
    ({"model": NAME, "messages": CHAT, "top_p": 0}, 400, "'top_p' is 0; allowed: a number in (0.0, 1.0]"),
    ({"model": NAME, "messages": CHAT, "max_tokens": 0}, 400, "'max_tokens' is 0; allowed: an integer >= 1"),
    ({"model": NAME, "messages": CHAT, "max_tokens": 4, "max_completion_tokens": 5}, 400, "disagree"),
    ({"model": NAME, "messages": CHAT, "seed": "7"}, 400, "'seed' must be an integer"),
    ({"model": NAME, "messages": CHAT, "stop": ["\n"]}, 400, "parameter 'stop' is not supported"),
    ({"model": NAME, "messages": CHAT, "presence_penalty": 0.5}, 400, "parameter 'presence_penalty'"),
    ({"model": NAME, "messages": CHAT, "max_tokens": 5000}, 400, "exceed the model's context of 4096 tokens"),
    ({"model": NAME, "messages": CHAT, "tools": {"type": "function"}}, 400, "'tools' must be a list"),
    ({"model": NAME, "messages": CHAT, "tools": [{"type": "function", "function": {}}]}, 400, "'tools[0]' must be"),
    ({"model": NAME, "messages": CHAT, "tools": ["f"]}, 400, "'tools[0]' must be"),
    ({"model": NAME, "messages": CHAT, "tool_choice": "required"}, 400, "'tool_choice' is 'required'"),
    ({"model": NAME, "messages": [{"role": "assistant", "content": None}]}, 400, "'messages[0].content' must be"),
    ({"model": NAME, "messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "[1"}}]}]}, 400,
     "'messages[0].tool_calls[0].function.arguments' must be a JSON object"),
])
def test_bad_requests_get_an_error_naming_the_field(served, body, status, fragment):
    _, url = served
    got, reply = call(f"{url}/chat/completions", None if isinstance(body, bytes) else body,
                      raw=body if isinstance(body, bytes) else None)
    assert got == status and fragment in reply["error"]["message"], reply
    assert reply["error"]["type"] == "invalid_request_error"


def test_unknown_routes_and_client_side_errors(served):
    _, url = served
    assert call(f"{url}/completions", {"model": NAME})[0] == 404
    assert call(url.replace("/v1", "/health"), None, method="GET")[0] == 404
    # neutral penalties are accepted (some clients always send them)
    status, _ = call(f"{url}/chat/completions", {"model": NAME, "messages": CHAT, "presence_penalty": 0,
                                                 "frequency_penalty": 0.0, "max_tokens": 2})
    assert status == 200
    # the designer client reports a 400 at once, with the server's message
    client = ExternalDesignerBackend(url, NAME, "", retries=3, sleep=lambda s: pytest.fail("a 400 is not retried"))
    with pytest.raises(ExternalDesignerError, match=r"HTTP 400 \(not retried\).*'temperature' is 3"):
        client.complete(CHAT, SamplingParams(3.0, 1.0, 4), 0)


def test_an_empty_key_sends_no_authorization_header():
    seen = []

    class Record(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers.get("Authorization"))
            raw = json.dumps({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        for key in ("", "sk-1"):
            assert ExternalDesignerBackend(url, "m", key).complete(CHAT, SamplingParams(), 0).text == "ok"
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [None, "Bearer sk-1"]


SERVE_RUN = {
    "model_card": "tiny-random",
    "run_name": "tiny_fixed_ed",
    "selfplay": {"active_skills": 1, "envs_per_skill": 2, "group_size": 2, "regen_interval": 2, "total_steps": 1,
                 "checkpoint_every": 1, "design_attempts": 1, "backfill": True, "train_designer": False},
    "designer": {"max_new_tokens": 8, "hint_max_new_tokens": 4},
    "agent": {"max_new_tokens": 4, "max_turns": 1, "max_context_tokens": 8192},
    "corpus": {"enabled": False},
    "train": {"learning_rate": 1e-3, "global_batch": 4, "micro_batch": 4},
    "eval": {"heldout_library": {"environments": ["crt_residue_puzzle"], "episodes": 2}},
    "baseline": {"mode": "fixed_external_designer", "external_serve": "base_model"},
}


def test_serve_mode_config_checks(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = load_config(overrides=SERVE_RUN)
    env_source.check_config(config)  # no base URL, model or key needed in this mode
    with pytest.raises(ConfigError, match=r"no local server was started.*spade serve-designer"):
        ExternalDesignerBackend.from_config(config)  # e.g. the OpenRLHF coordinator, which does not start one
    with pytest.raises(ConfigError, match=r"'baseline.external_serve' is 'base_model'.*'fixed_external_designer' "
                                          r"only, not 'fixed_env_grpo'"):
        env_source.check_config(load_config(overrides={**SERVE_RUN, "baseline": {
            "mode": "fixed_env_grpo", "external_serve": "base_model"}}))
    with pytest.raises(ConfigError, match=r"external_serve.*allowed values"):
        load_config(overrides={**SERVE_RUN, "baseline": {"mode": "fixed_external_designer",
                                                         "external_serve": "gpt-5.5"}})
    from spade.cli import main

    assert main(["train", "--model", "m", "--run-dir", "r", "--backend", "openrlhf",
                 "--config-json", json.dumps(SERVE_RUN)]) == 2


def test_the_child_server_reports_why_it_did_not_start(tmp_path):
    reason = r"(?s)exited with code 2 before it was ready.*error: .*no-model.*no config\.json"
    with pytest.raises(DesignerServerError, match=reason):
        start_server(tmp_path / "no-model", tmp_path / "server.log", timeout_s=120)
    with pytest.raises(DesignerServerError, match=r"(?s)not ready after 0\.2 s.*external_serve_timeout_s"):
        start_server(tmp_path / "no-model", tmp_path / "late.log", timeout_s=0.2)


@pytest.mark.slow
def test_a_fixed_external_designer_step_runs_against_the_served_base_model(tiny_model_dir, tmp_path, monkeypatch):
    from spade.train.trainer import train_run

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # no key anywhere: the local server needs none
    config = load_config(overrides=SERVE_RUN)
    with local_designer(config, tiny_model_dir, tmp_path / "probe") as served_config:
        base = served_config.baseline
        assert base.external_base_url.startswith("http://127.0.0.1:") and base.external_concurrency == 1
        assert base.external_model == f"local-{tiny_model_dir.name}"
        reply = ExternalDesignerBackend.from_config(served_config).complete(CHAT, SamplingParams(1.0, 1.0, 3), 1)
        assert reply.completion_tokens == 3
        pid = json.loads((tmp_path / "probe/designer_server.ready.json").read_text())["pid"]
    with pytest.raises(ProcessLookupError):  # stopped (and reaped) on exit
        os.kill(pid, 0)

    train_run(config, tiny_model_dir, None, tmp_path / "run")
    (metrics,) = [json.loads(line) for line in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
    assert metrics["env_source"] == "fixed_external_designer" and metrics["designer_samples"] == 0
    assert metrics["design_attempts"] == 2 and metrics["design_generated_tokens"] == 2 * 8  # 2 slots x 8 tokens
    assert metrics["backfilled_share"] == 1.0  # the tiny model writes no valid environment
    server_log = (tmp_path / "run/designer_server.log").read_text()
    # the offline pool (baseline.external_pool default): 2 designs (pool_size 0 = ceil(1 step / k 2) x 2 slots), no hints
    assert server_log.count('"POST /v1/chat/completions HTTP/1.1" 200') == 2 and metrics["pool_size"] == 2
    pid = json.loads((tmp_path / "run/designer_server.ready.json").read_text())["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_reply_prefix_opens_every_reply_and_ends_every_prompt(tiny_model):
    """`--reply-prefix` (the rehearsal's fixed external designer): the reply is the prefix followed by the backend's
    continuation of the chat prompt with the prefix's tokens appended, as designer.response_prefix opens the policy's
    own designs. The config accepts a response prefix for the external designer only with our own server."""
    model, tokenizer = tiny_model
    prefix = "```python\nclass Game:\n    # note:"
    service = DesignerService(model, tokenizer, NAME, default_max_tokens=6, seed=123, reply_prefix=prefix)
    reply = service.complete({"model": NAME, "messages": CHAT, "seed": 5, "max_tokens": 7})
    prompt = chat_prompt_ids(tokenizer, CHAT) + tokenizer.encode(prefix, add_special_tokens=False)
    (expected,) = HFBackend(model, tokenizer).generate([prompt], SamplingParams(1.0, 1.0, 7), [5])
    assert reply["choices"][0]["message"]["content"] == prefix + expected.text
    assert reply["usage"]["prompt_tokens"] == len(prompt)
    opened = {"designer": {"response_prefix": prefix}}
    load_config(overrides={**SERVE_RUN, **opened})  # our server opens it
    with pytest.raises(ConfigError, match=r"cannot be given an opened reply \(only our own server"):
        load_config(overrides={**SERVE_RUN, **opened, "baseline": {**SERVE_RUN["baseline"], "external_serve": ""}})


TOOLS = [{"type": "function", "function": {"name": "toggle_airplane_mode", "description": "Turn airplane mode on or off.",
                                            "parameters": {"type": "object", "properties": {}}}}]
# a user's exchange with a tool (tau2's telecom user): a call of its own, the tool's result, and the agent's next line
TOOL_CHAT = [{"role": "system", "content": "You are a customer."},
             {"role": "user", "content": "Please turn off airplane mode."},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "u1", "type": "function", "function": {"name": "toggle_airplane_mode", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "u1", "content": "Airplane mode is off."},
             {"role": "user", "content": "Is it working now?"}]
CALL = '<tool_call>\n{"name": "toggle_airplane_mode", "arguments": {}}\n</tool_call>'


# a ChatML template that ignores tools= and renders any role, as SmolLM2's does
PLAIN_TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
                  "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


@pytest.mark.parametrize("template", ["qwen3", "plain"])
def test_tools_are_rendered_and_tool_call_blocks_come_back_as_tool_calls(tiny_model, template):
    """A user simulator that calls tools (tau2's telecom user; issue 46): the request's tools, calls and tool results
    reach the prompt through the chat template (the tiny Qwen3 template renders them; a template that ignores tools
    gets the schemas as text after the first message and the calls as <tool_call> text), and a <tool_call> block of
    the reply (opened here by a reply prefix, as a random model never writes one) comes back as tool_calls."""
    import copy

    from spade.inference.tiny_tokenizer import TINY_QWEN3_CHAT_TEMPLATE

    model, tokenizer = tiny_model
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.chat_template = TINY_QWEN3_CHAT_TEMPLATE if template == "qwen3" else PLAIN_TEMPLATE
    service = DesignerService(model, tokenizer, NAME, default_max_tokens=6, seed=123, reply_prefix=CALL + "\n")
    body = {"model": NAME, "messages": TOOL_CHAT, "tools": TOOLS, "tool_choice": "auto", "seed": 5, "max_tokens": 4}
    reply = service.complete(body)
    if template == "qwen3":
        rendered = tokenizer.apply_chat_template(
            [*TOOL_CHAT[:2], {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "toggle_airplane_mode", "arguments": {}}}]}, *TOOL_CHAT[3:]],
            tools=TOOLS, add_generation_prompt=True, tokenize=False)
        assert "<tools>" in rendered and CALL in rendered and "<tool_response>\nAirplane mode is off." in rendered
    else:
        rendered = tokenizer.apply_chat_template(
            [{"role": "system", "content": "You are a customer.\n\nTools (OpenAI function schemas):\n"
              + json.dumps(TOOLS, indent=1)}, TOOL_CHAT[1],
             {"role": "assistant", "content": CALL.replace("\n", "")},
             {"role": "tool", "content": "Airplane mode is off."}, TOOL_CHAT[4]],
            add_generation_prompt=True, tokenize=False)
        assert "toggle_airplane_mode" not in tokenizer.apply_chat_template(TOOL_CHAT[:2], tools=TOOLS, tokenize=False)
    prompt = list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    prompt += tokenizer.encode(CALL + "\n", add_special_tokens=False)
    assert reply["usage"]["prompt_tokens"] == len(prompt)
    (expected,) = HFBackend(model, tokenizer).generate([prompt], SamplingParams(1.0, 1.0, 4), [5])
    choice = reply["choices"][0]
    assert choice["message"]["tool_calls"] == [{"id": "call_5_0", "type": "function",
                                                "function": {"name": "toggle_airplane_mode", "arguments": "{}"}}]
    assert choice["message"]["content"] == (expected.text.strip() or None)
    assert choice["finish_reason"] == "tool_calls"
    # without tools nothing is parsed: the same opened reply is text
    plain = service.complete({"model": NAME, "messages": CHAT, "seed": 5, "max_tokens": 4})["choices"][0]
    assert "tool_calls" not in plain["message"] and plain["message"]["content"].startswith(CALL)
