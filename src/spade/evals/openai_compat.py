"""A tiny OpenAI-compatible chat client (standard library only) for the LLM user simulators.

tau2-bench and ACEBench-Agent (multi-turn) play a *user* with a second language model; our model is
the agent. The user model sits behind any server that speaks the OpenAI chat-completions protocol
(``POST <base_url>/chat/completions``): the OpenAI API, a local vLLM or llama.cpp server, etc.

The endpoint comes from three config keys per benchmark (``eval.<benchmark>.user_base_url``,
``user_model``, ``user_api_key_env``: the *name* of an environment variable holding the key, never the
key itself). ``endpoint_from_config`` checks them before any model is loaded; ``chat`` sends one request
and returns the reply's text and tool calls. Failures raise ``EndpointError`` naming the URL and the
config keys.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from spade.configtools import ConfigError

RETRY_STATUS = (408, 409, 429, 500, 502, 503, 504)


class EndpointError(RuntimeError):
    """The user-simulator endpoint failed (unreachable, HTTP error, or a reply we cannot read)."""


@dataclass(frozen=True)
class ChatEndpoint:
    base_url: str  # e.g. "http://127.0.0.1:8000/v1" (the part before /chat/completions)
    model: str
    api_key: str | None = field(default=None, repr=False)  # None: no Authorization header
    timeout_s: float = 120.0
    retries: int = 3  # extra attempts on connection errors and HTTP 408/409/429/5xx (backoff 1, 2, 4 s)
    keys: str = ""  # the config keys that define this endpoint, quoted in error messages


@dataclass(frozen=True)
class ChatReply:
    content: str | None
    tool_calls: list  # [{"id": str, "name": str, "arguments": dict}]
    raw: dict  # the response's first choice, as sent by the server


def endpoint_keys(prefix: str) -> str:
    return f"'{prefix}.user_base_url', '{prefix}.user_model' and '{prefix}.user_api_key_env'"


def endpoint_from_config(base_url: str, model: str, api_key_env: str, prefix: str,
                         timeout_s: float = 120.0) -> ChatEndpoint:
    """Validate the user-simulator keys of config section ``prefix`` (e.g. ``eval.tau2``); no network access."""
    keys = endpoint_keys(prefix)
    if not base_url.strip():
        raise ConfigError(
            f"this benchmark plays the user with an LLM behind an OpenAI-compatible endpoint, but "
            f"'{prefix}.user_base_url' is empty. Set {keys} (for example user_base_url: http://127.0.0.1:8000/v1 "
            f"for a local vLLM server, or https://api.openai.com/v1; user_api_key_env: '' when the server needs no key)")
    parsed = urllib.parse.urlparse(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(f"config key '{prefix}.user_base_url' has value {base_url!r}; allowed: an http(s) URL "
                          f"such as http://127.0.0.1:8000/v1")
    if not model.strip():
        raise ConfigError(f"config key '{prefix}.user_model' is empty; name the user-simulator model served at {base_url}")
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise ConfigError(f"environment variable {api_key_env!r} (named by config key '{prefix}.user_api_key_env') "
                              f"is not set; export the API key in it, or set the key to '' for a server without "
                              f"authentication")
    return ChatEndpoint(base_url.rstrip("/"), model, api_key, timeout_s, keys=keys)


def _clean_message(message: dict) -> dict:
    """Drop ``None`` fields (except content) and normalise tool calls to the plain OpenAI shape."""
    out = {k: v for k, v in message.items() if v is not None or k == "content"}
    if out.get("tool_calls"):
        out["tool_calls"] = [{"id": call.get("id", ""), "type": "function",
                              "function": {"name": call["function"]["name"],
                                           "arguments": call["function"]["arguments"]}}
                             for call in out["tool_calls"]]
    return out


def _parse_tool_calls(raw_calls, endpoint: ChatEndpoint) -> list:
    calls = []
    for call in raw_calls or []:
        function = call.get("function") or {}
        arguments = function.get("arguments") or "{}"
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                raise EndpointError(f"user simulator at {endpoint.base_url} returned tool-call arguments that are not "
                                    f"JSON ({exc}): {arguments[:200]!r}") from None
        if not isinstance(arguments, dict) or not function.get("name"):
            raise EndpointError(f"user simulator at {endpoint.base_url} returned a malformed tool call: {call!r}")
        calls.append({"id": call.get("id") or "", "name": function["name"], "arguments": arguments})
    return calls


def _post(endpoint: ChatEndpoint, body: dict) -> dict:
    url = f"{endpoint.base_url}/chat/completions"
    headers = {"Content-Type": "application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    data = json.dumps(body).encode("utf-8")
    problem = ""
    for attempt in range(endpoint.retries + 1):
        if attempt:
            time.sleep(2.0 ** (attempt - 1))
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=endpoint.timeout_s) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:500]
            problem = f"HTTP {exc.code}: {detail}"
            if exc.code not in RETRY_STATUS:
                break
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            problem = f"cannot connect ({getattr(exc, 'reason', exc)})"
        except json.JSONDecodeError as exc:
            problem = f"the reply is not JSON ({exc})"
            break
    raise EndpointError(f"user simulator request to {url} (model {endpoint.model!r}) failed after "
                        f"{attempt + 1} attempt(s): {problem}. Check the server and the config keys {endpoint.keys}")


def chat(endpoint: ChatEndpoint, messages: list, *, temperature: float, top_p: float | None = None,
         max_tokens: int | None = None, tools: list | None = None, seed: int | None = None) -> ChatReply:
    """One chat completion. ``messages`` are OpenAI message dicts; ``tools`` OpenAI tool schemas or None."""
    body = {"model": endpoint.model, "messages": [_clean_message(m) for m in messages], "temperature": temperature}
    if top_p is not None:
        body["top_p"] = top_p
    if max_tokens:
        body["max_tokens"] = max_tokens
    if tools:
        body["tools"] = tools
    if seed is not None:
        body["seed"] = seed  # honoured by vLLM and (best effort) by OpenAI; makes local user simulators repeatable
    response = _post(endpoint, body)
    try:
        choice = response["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise EndpointError(f"user simulator at {endpoint.base_url} sent a reply without choices[0].message: "
                            f"{json.dumps(response)[:500]}") from None
    content = message.get("content")
    if isinstance(content, list):  # some servers send content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ChatReply(content, _parse_tool_calls(message.get("tool_calls"), endpoint), choice)
