"""A local OpenAI-compatible chat-completions server over our Hugging Face backend (issue 7, deliverable 1).

The fixed-external-designer ablation (``baseline.mode: fixed_external_designer``) talks to a model behind
an OpenAI-compatible endpoint; the paper's is GPT-5.5. Here there is no API, so at toy scale a FROZEN copy
of the run's own base model stands in for it: this module serves a prepared model folder over HTTP and
the run's designer client (:mod:`spade.designer.external`) reaches it through the very same request path
it would use against a hosted API. What the toy run then measures is "SPADE's loop with an untrained
designer the size of the agent", not "with a stronger external designer" (the paper's point); the
numbers are labelled as such (docs/EXTERNAL_DESIGNER.md).

Endpoints (standard library ``http.server``, one thread per connection):

``GET /v1/models``
    ``{"object": "list", "data": [{"id": <name>, "object": "model", ...}]}``; the run waits on it for
    readiness.
``POST /v1/chat/completions``
    ``model`` (must be the served name), ``messages`` (roles system/developer/user/assistant; content a
    string or a list of ``{"type": "text", "text": ...}`` parts), ``temperature`` (0 to 2, default 1;
    0 = greedy), ``top_p`` (in (0, 1], default 1), ``max_tokens`` or ``max_completion_tokens`` (default
    ``--max-tokens``), ``seed`` and ``n`` (only 1). The chat is rendered by the tokenizer's chat
    template (as the local designer's prompts are) and sampled by :class:`~spade.inference.generation_hf.HFBackend`
    with the request's seed as a per-row seed, so one request's reply depends only on its messages,
    parameters and seed. A request without a seed gets ``derive_seed(server seed, "request", i)`` for the
    ``i``-th such request. A prompt plus token limit longer than the model's context is refused (400,
    ``context_length_exceeded``) unless the server runs with ``--context 0``. The reply carries
    ``choices[0].message.content``, ``finish_reason`` ("stop" at the end-of-turn token, "length" at the
    token limit) and ``usage`` (prompt and completion token counts; completion tokens include the
    end-of-turn token, as the trainer counts them).

Tools (for a user simulator that calls tools, tau2-bench's telecom user): ``tools`` (OpenAI function schemas) with
``tool_choice`` 'auto' or left out, ``assistant`` messages with ``tool_calls`` and ``tool`` messages. The chat template
renders them where it can (probed once, :func:`spade.core.tool_calls.template_support`: the tiny Qwen3 templates do);
where it cannot (SmolLM2's), the schemas follow the first message as text, the calls are written into the assistant's
content as ``<tool_call>`` blocks and tool results come in the ``user`` role, as our agent's fallback does. The reply's
``<tool_call>{"name", "arguments"}</tool_call>`` blocks (Qwen3/Hermes format, ``tool_calls.object_calls``) become its
``tool_calls`` (ids ``call_<seed>_<i>``, so a seeded request is repeatable), the text outside them its content (null
when empty), and ``finish_reason`` is then "tool_calls". A request without tools gets no parsing.

Bad requests are answered 400 with ``{"error": {"message", "type", "param", "code"}}`` naming the field and
what is allowed; an unknown model 404; fields that would change the output and are not implemented
(``stop``, ``tool_choice`` other than 'auto', ``logit_bias``, non-zero penalties, ``response_format``, streaming, ...)
are refused rather than ignored. One generation runs at a time (a lock); ``/v1/models`` answers meanwhile.

With ``--reply-prefix TEXT`` every reply opens with TEXT: its tokens end the prompt and the reply's content starts
with it, as ``designer.response_prefix`` opens the policy's own designs. A run with ``baseline.external_serve`` and
a response prefix (the rehearsal's, configs/rehearsal.yaml) hands its prefix to the server this way, because a
chat API cannot be given an opened reply.

The server binds loopback by default and checks no API key. ``baseline.external_serve: base_model`` makes
the local trainer start it as a child process (:func:`local_designer`), with the same interpreter, on a
free port chosen by the kernel, and stop it when the run ends or fails. By hand:
``spade serve-designer --model results/models/smollm2-135m --port 8000``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from spade.configtools import ConfigError
from spade.inference.generation import SamplingParams
from spade.seeding import derive_seed

log = logging.getLogger(__name__)

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
SUPPORTED = {"model", "messages", "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "n",
             "stream", "tools", "tool_choice"}
IGNORED = {"user", "metadata", "store", "service_tier"}  # no effect on the sampled text
ZERO_OK = {"presence_penalty", "frequency_penalty"}  # accepted only at their neutral value 0
MAX_BODY_BYTES = 16 * 1024 * 1024
SERVE_MODES = ("", "base_model")


class RequestError(ValueError):
    """A request the server refuses: HTTP ``status`` with an OpenAI-style error body."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 code: str | None = None, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.message, self.param, self.status, self.code, self.kind = message, param, status, code, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


class DesignerServerError(RuntimeError):
    """The local designer server did not start or answer (the message holds its log's tail)."""


def _number(body: dict, key: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"'{key}' must be a number, got {value!r}", key)
    if value > high or value < low or (low_open and value == low):
        bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise RequestError(f"'{key}' is {value!r}; allowed: a number in {bound}", key)
    return float(value)


def _integer(body: dict, key: str, low: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"'{key}' must be an integer, got {value!r}", key)
    if value < low:
        raise RequestError(f"'{key}' is {value}; allowed: an integer >= {low}", key)
    return value


def _text(content, where: str, allow_none: bool = False) -> str:
    """A message's content as one string: a string, or a list of text parts (joined); None only where allowed."""
    if content is None and allow_none:
        return ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise RequestError(f"'{where}.content' holds {part!r}; only text parts "
                                   "({'type': 'text', 'text': ...}) are supported", f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    if not isinstance(content, str):
        raise RequestError(f"'{where}.content' must be a string or a list of text parts, got {content!r}",
                           f"{where}.content")
    return content


def _call(raw, where: str) -> dict:
    """One assistant ``tool_calls`` entry as the chat templates take it: ``{"type", "function": {"name", "arguments":
    an object}}`` (the API sends the arguments as a JSON string)."""
    function = raw.get("function") if isinstance(raw, dict) else None
    if not (isinstance(function, dict) and isinstance(function.get("name"), str) and function["name"]):
        raise RequestError(f"'{where}' must be {{'type': 'function', 'function': {{'name', 'arguments'}}}}, got "
                           f"{raw!r}", where)
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            arguments = None
    if not isinstance(arguments, dict):
        raise RequestError(f"'{where}.function.arguments' must be a JSON object (or its text), got "
                           f"{function.get('arguments')!r}", f"{where}.function.arguments")
    return {"id": str(raw.get("id") or ""), "type": "function",
            "function": {"name": function["name"], "arguments": arguments}}


def _messages(raw) -> list:
    if not isinstance(raw, list) or not raw:
        raise RequestError("'messages' must be a non-empty list of {'role', 'content'} objects", "messages")
    out = []
    for index, message in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise RequestError(f"'{where}' must be an object with 'role' and 'content', got {message!r}", where)
        role = message.get("role")
        if role not in ROLES:
            raise RequestError(f"'{where}.role' is {role!r}; allowed: {sorted(ROLES)}", f"{where}.role")
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls is not None and not isinstance(calls, list):
            raise RequestError(f"'{where}.tool_calls' must be a list, got {calls!r}", f"{where}.tool_calls")
        entry = {"role": ROLES[role], "content": _text(message.get("content"), where, allow_none=bool(calls))}
        if calls:
            entry["tool_calls"] = [_call(call, f"{where}.tool_calls[{i}]") for i, call in enumerate(calls)]
        out.append(entry)
    return out


def _tools(body: dict) -> list | None:
    """The request's ``tools`` (OpenAI function schemas) or None; ``tool_choice`` may only be 'auto'."""
    choice = body.get("tool_choice")
    if choice not in (None, "auto"):
        raise RequestError(f"'tool_choice' is {choice!r}; this server supports 'auto' (or leaving it out)",
                           "tool_choice")
    tools = body.get("tools")
    if tools is None or tools == []:
        return None
    if not isinstance(tools, list):
        raise RequestError(f"'tools' must be a list of function schemas, got {tools!r}", "tools")
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not (isinstance(function, dict) and tool.get("type") == "function"
                and isinstance(function.get("name"), str) and function["name"]):
            raise RequestError(f"'tools[{index}]' must be {{'type': 'function', 'function': {{'name', "
                               f"'description', 'parameters'}}}}, got {tool!r}", f"tools[{index}]")
    return tools


def fit_template(messages: list, tools: list | None, support) -> tuple[list, list | None]:
    """``(messages, tools)`` in the form the chat template renders (module docstring): unchanged where it renders
    tools, else the schemas as text after the first message, the calls as ``<tool_call>`` text and the ``tool`` role
    as ``user`` (where it cannot render that either)."""
    from spade.core.tool_calls import call_action, fit_roles, tools_text

    if support.tools:
        return messages, tools
    out = []
    for message in messages:
        if message.get("tool_calls"):
            actions = [call_action({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
                       for c in message["tool_calls"]]
            message = {"role": message["role"], "content": "\n".join(filter(None, [message["content"], *actions]))}
        out.append(message)
    if tools:
        out[0] = {**out[0], "content": out[0]["content"] + tools_text(tools)}
    return fit_roles(out, support), None


def reply_message(text: str, tools: list | None, seed: int) -> tuple[dict, bool]:
    """The assistant message of a reply ``text`` and whether it calls tools: with ``tools``, its ``<tool_call>``
    blocks become ``tool_calls`` (ids ``call_<seed>_<i>``) and the rest its content (None when empty)."""
    from spade.core.tool_calls import CALL_BLOCK_RE, object_calls

    if not tools:
        return {"role": "assistant", "content": text}, False
    calls, _ = object_calls(text)
    if not calls:
        return {"role": "assistant", "content": text}, False
    content = CALL_BLOCK_RE.sub("", text).strip() or None
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": f"call_{seed}_{i}", "type": "function",
                            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}
                           for i, call in enumerate(calls)]}, True


class DesignerService:
    """The model behind the endpoint: request checking, generation (one at a time) and the reply body."""

    def __init__(self, model, tokenizer, name: str, default_max_tokens: int = 1024, seed: int = 0,
                 fingerprint: str | None = None, device: str = "cpu", context: int = -1, reply_prefix: str = ""):
        from spade.core.tool_calls import template_support
        from spade.inference.generation_hf import HFBackend

        self.support = template_support(tokenizer)  # whether the chat template renders tools and tool messages
        self.reply_prefix = reply_prefix
        self.prefix_ids = tokenizer.encode(reply_prefix, add_special_tokens=False) if reply_prefix else []
        self.backend = HFBackend(model, tokenizer, device=device, batch_size=1)
        self.tokenizer, self.name = tokenizer, name
        self.default_max_tokens, self.seed, self.fingerprint = int(default_max_tokens), int(seed), fingerprint
        if context < 0:  # the model's own context (0 when its config names none: unchecked)
            context = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        self.context = int(context)
        self.created = int(time.time())
        self._lock = threading.Lock()
        self._unseeded = 0

    def models(self) -> dict:
        return {"object": "list", "data": [{"id": self.name, "object": "model", "created": self.created,
                                            "owned_by": "spade-local"}]}

    def parse(self, body) -> tuple[list, list | None, SamplingParams, int | None]:
        """``(messages, tools or None, params, seed or None)`` of a chat-completions body; raise
        :class:`RequestError`."""
        if not isinstance(body, dict):
            raise RequestError(f"the request body must be a JSON object, got {type(body).__name__}")
        for key, value in body.items():
            if key in SUPPORTED or key in IGNORED:
                continue
            if key in ZERO_OK and value in (0, 0.0, None):
                continue
            raise RequestError(f"parameter '{key}' is not supported by this local server (supported: "
                               f"{sorted(SUPPORTED)}; {sorted(ZERO_OK)} only at 0)", key)
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise RequestError(f"'model' is required (a string); this server serves {self.name!r}", "model")
        if model != self.name:
            raise RequestError(f"the model {model!r} does not exist here; this server serves {self.name!r}",
                               "model", status=404, code="model_not_found")
        if body.get("stream") not in (None, False):
            raise RequestError("'stream' is not supported; send stream: false or leave it out", "stream")
        n = _integer(body, "n", 1)
        if n not in (None, 1):
            raise RequestError(f"'n' is {n}; this server returns one choice per request (n: 1)", "n")
        limits = {key: _integer(body, key, 1) for key in ("max_tokens", "max_completion_tokens")}
        given = {v for v in limits.values() if v is not None}
        if len(given) > 1:
            raise RequestError(f"'max_tokens' ({limits['max_tokens']}) and 'max_completion_tokens' "
                               f"({limits['max_completion_tokens']}) disagree; send one of them", "max_tokens")
        max_tokens = given.pop() if given else self.default_max_tokens
        temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
        top_p = _number(body, "top_p", 1.0, 0.0, 1.0, low_open=True)
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise RequestError(f"'seed' must be an integer, got {seed!r}", "seed")
        return _messages(body.get("messages")), _tools(body), SamplingParams(temperature, top_p, max_tokens), seed

    def complete(self, body) -> dict:
        """The chat-completion reply to ``body``; raise :class:`RequestError` for a bad request."""
        from jinja2 import TemplateError

        from spade.inference.models import chat_prompt_ids

        messages, tools, params, seed = self.parse(body)
        try:
            prompt = chat_prompt_ids(self.tokenizer, *fit_template(messages, tools, self.support)) + self.prefix_ids
        except (TemplateError, ValueError, TypeError, KeyError) as exc:  # the request's fault (e.g. role order)
            raise RequestError(f"the chat template cannot render these messages: {type(exc).__name__}: {exc}",
                               "messages") from None
        if self.context and len(prompt) + params.max_new_tokens > self.context:
            raise RequestError(f"the prompt is {len(prompt)} tokens and the token limit {params.max_new_tokens}; "
                               f"together they exceed the model's context of {self.context} tokens",
                               "messages", code="context_length_exceeded")
        with self._lock:
            if seed is None:
                seed = derive_seed(self.seed, "request", self._unseeded)
                self._unseeded += 1
            (generation,) = self.backend.generate([prompt], params, [int(seed)])
        message, called = reply_message(self.reply_prefix + generation.text, tools, int(seed))
        reply = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                 "model": self.name, "seed": int(seed),
                 "choices": [{"index": 0, "finish_reason": "tool_calls" if called else generation.finish_reason,
                              "logprobs": None, "message": message}],
                 "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(generation.completion_ids),
                           "total_tokens": len(prompt) + len(generation.completion_ids)}}
        if self.fingerprint:
            reply["system_fingerprint"] = self.fingerprint
        return reply


def build_http_server(service: DesignerService, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server (not yet serving) for ``service``; port 0 lets the kernel pick a free one."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._reply(200, service.models())
            else:
                self._reply(404, RequestError(f"no route GET {self.path}; try GET /v1/models", status=404).body())

        def do_POST(self):
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit() or int(length) > MAX_BODY_BYTES:
                self.close_connection = True
                self._reply(400, RequestError(f"Content-Length must be given and at most {MAX_BODY_BYTES} bytes, "
                                              f"got {length!r}").body())
                return
            raw = self.rfile.read(int(length))
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._reply(404, RequestError(f"no route POST {self.path}; use POST /v1/chat/completions",
                                              status=404).body())
                return
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                self._reply(400, RequestError(f"the request body is not valid JSON: {exc}").body())
                return
            try:
                self._reply(200, service.complete(body))
            except RequestError as exc:
                self._reply(exc.status, exc.body())
            except Exception as exc:  # noqa: BLE001 - a generation failure must reach the client as a 500
                log.exception("generation failed")
                self._reply(500, RequestError(f"generation failed: {type(exc).__name__}: {exc}", status=500,
                                              kind="server_error").body())

        def _reply(self, status: int, data: dict):
            raw = json.dumps(data).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, fmt, *args):
            log.info("%s %s", self.address_string(), fmt % args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def load_service(model_dir: str | Path, name: str = "", default_max_tokens: int = 1024, seed: int = 0,
                 device: str = "cpu", context: int = -1, reply_prefix: str = "") -> DesignerService:
    """The service over the prepared model folder ``model_dir`` (frozen: eval mode, never trained)."""
    from spade.inference.models import load_model, read_provenance

    folder = Path(model_dir)
    model, tokenizer = load_model(folder, device=device)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    provenance = read_provenance(folder) or {}
    sha = provenance.get("weights_sha256")
    return DesignerService(model, tokenizer, name or served_name(folder), default_max_tokens, seed,
                           fingerprint=f"spade-local-{sha[:12]}" if sha else None, device=device, context=context,
                           reply_prefix=reply_prefix)


def served_name(model_dir: str | Path) -> str:
    """The model name the server announces for ``model_dir`` (its folder name, prefixed)."""
    return f"local-{Path(model_dir).resolve().name}"


def serve(model_dir: str | Path, host: str = "127.0.0.1", port: int = 0, name: str = "",
          default_max_tokens: int = 1024, seed: int = 0, device: str = "cpu", ready_file: str | Path | None = None,
          exit_with_parent: bool = False, context: int = -1, reply_prefix: str = "") -> None:
    """Load the model, bind, write ``ready_file`` (JSON: host, port, model, base_url) and serve until SIGTERM."""
    from spade.io import atomic_write_json

    parent = os.getppid()
    service = load_service(model_dir, name, default_max_tokens, seed, device, context, reply_prefix)
    server = build_http_server(service, host, port)
    bound_host, bound_port = server.server_address[:2]
    base_url = f"http://{bound_host}:{bound_port}/v1"
    if ready_file:
        atomic_write_json(ready_file, {"host": bound_host, "port": bound_port, "model": service.name,
                                       "base_url": base_url, "pid": os.getpid()})
    if exit_with_parent:  # an orphaned server (the run was killed) stops by itself
        def watch():
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(0)

        threading.Thread(target=watch, daemon=True).start()

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    log.info("serving %s from %s at %s (one generation at a time)", service.name, model_dir, base_url)
    print(f"serving {service.name} at {base_url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


# ----- the run's own server ----------------------------------------------------------------------------
def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def _models(base_url: str) -> list | None:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=5) as response:
            return [m.get("id") for m in json.loads(response.read()).get("data", [])]
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError, ValueError, AttributeError):
        return None


def start_server(model_dir: str | Path, log_path: str | Path, timeout_s: float, seed: int = 0,
                 default_max_tokens: int = 1024, reply_prefix: str = "",
                 key: str = "baseline.external_serve") -> tuple[subprocess.Popen, str, str]:
    """Start ``spade serve-designer`` on ``model_dir`` as a child process (same interpreter, loopback, a free
    port) and wait until ``GET /v1/models`` lists it; returns ``(process, base_url, model name)``. ``key``: the
    config key that asked for it (its ``_timeout_s`` sibling sets ``timeout_s``), named in the errors.

    The context check is off (``--context 0``): the run's own designer in SPADE mode is not limited either
    (our HF backend samples past ``max_position_embeddings``), so both modes see the same prompts."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    ready = log_path.with_suffix(".ready.json")
    ready.unlink(missing_ok=True)
    name = served_name(model_dir)
    command = [sys.executable, "-m", "spade.cli", "serve-designer", "--model", str(model_dir), "--host",
               "127.0.0.1", "--port", "0", "--name", name, "--seed", str(seed), "--max-tokens",
               str(default_max_tokens), "--context", "0", "--ready-file", str(ready), "--exit-with-parent"]
    if reply_prefix:
        command += ["--reply-prefix", reply_prefix]
    with open(log_path, "ab") as handle:
        handle.write(f"$ {' '.join(command)}\n".encode())
        handle.flush()
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if process.poll() is not None:
                raise DesignerServerError(f"the local server ({key}) exited with code "
                                          f"{process.returncode} before it was ready; its log {log_path}:\n"
                                          f"{_tail(log_path)}")
            if ready.is_file():
                base_url = json.loads(ready.read_text())["base_url"]
                if name in (_models(base_url) or []):
                    log.info("local designer %s ready at %s (pid %d)", name, base_url, process.pid)
                    return process, base_url, name
            if time.monotonic() > deadline:
                raise DesignerServerError(f"the local server ({key}) was not ready after {timeout_s:g} s (config "
                                          f"key {key}_timeout_s); "
                                          f"its log {log_path}:\n{_tail(log_path)}")
            time.sleep(0.2)
    except BaseException:
        stop_server(process)
        raise


def stop_server(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Terminate the child server, killing it when it does not stop within ``grace_s``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def local_designer(config, model_dir: str | Path, run_dir: str | Path):
    """Yield the config the self-play core should use: ``config`` itself, or, with
    ``baseline.external_serve: base_model``, a copy whose endpoint keys point at a server of the frozen base
    model ``model_dir`` started here (log: ``<run_dir>/designer_server.log``) and stopped on exit. A
    ``designer.response_prefix`` goes to the server (``--reply-prefix``) and is cleared in the copy."""
    from spade.core.env_source import EXTERNAL_MODE, baseline_of

    base = baseline_of(config)
    if base.mode != EXTERNAL_MODE or not base.external_serve:
        yield config
        return
    if base.external_serve != "base_model":
        raise ConfigError(f"config key 'baseline.external_serve' is {base.external_serve!r}; allowed: {SERVE_MODES}")
    process, base_url, name = start_server(model_dir, Path(run_dir) / "designer_server.log",
                                           base.external_serve_timeout_s, derive_seed(config.seed, "designer-server"),
                                           config.designer.max_new_tokens, config.designer.response_prefix)
    try:
        # one request at a time is all the server does; more in flight would only queue against the timeout
        yield replace(config, baseline=replace(base, external_base_url=base_url, external_model=name,
                                               external_concurrency=1),
                      designer=replace(config.designer, response_prefix=""))
    finally:
        stop_server(process)
