"""The fixed external designer (issue 7, deliverable 1): designs and hints from a model behind an
OpenAI-compatible chat-completions endpoint (``baseline.mode: fixed_external_designer``).

The self-play core asks its designer for text only: a design chat (system + user messages, possibly
extended by feedback revisions) and a hint chat go in, the assistant's reply comes out and is validated
or parsed exactly as a local designer's would be. The external model is not trained, so no token ids and
no log-probs are needed; the returned :class:`ExternalGeneration` carries the reply, the finish reason and
the completion-token count the endpoint reports (for the tokens-per-valid-environment metric).

When the core calls it: with ``baseline.external_pool: offline`` (default; the paper's "static pool generated
offline", "memory-free") every design chat is sent at step 0, before the agent's first play, in rounds of one slot
set until ``baseline.pool_size`` environments are valid; the prompts carry a corpus document and no memory seeds,
and no hint chat is sent unless ``baseline.hint_arm`` (``SelfPlay._begin_designed_pool``). With ``online`` the core
sends a set of design chats and its hint chats at every regeneration step, as for SPADE's own designer.

Each chat is one ``POST <base_url>/chat/completions`` request (standard library ``urllib`` only) with
``model``, ``messages``, ``temperature``, the token limit (``max_tokens``, or
``max_completion_tokens`` for endpoints that require it), ``seed`` and ``top_p`` when below 1 (1 is the
API's default, and some models refuse the field). Seeds are explicit: a call with one
seed gives row ``i`` the seed ``derive_seed(seed, "external", i)``; a call with one seed per chat uses
those. Whether the endpoint honours ``seed`` is up to the provider (OpenAI documents it as best effort).

Transient failures (connection errors, timeouts, HTTP 408/409/425/429 and 5xx) are retried with
exponential backoff (``backoff_s * 2**try``, or the server's numeric ``Retry-After`` when larger, capped at
60 s); other HTTP errors stop at once. Every error names the status and the URL; the API key travels only
in the ``Authorization`` header and is removed from any error text. With ``baseline.external_serve`` the
endpoint is the run's own loopback server (:mod:`spade.designer.serve`), which takes no key: the client
then sends no ``Authorization`` header at all.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from spade.configtools import ConfigError
from spade.inference.generation import Generation, SamplingParams
from spade.seeding import derive_seed

RETRY_STATUS = frozenset({408, 409, 425, 429})  # besides every 5xx
MAX_RETRY_AFTER_S = 60.0
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens")


class ExternalDesignerError(RuntimeError):
    """A chat-completions request failed for good (after any retries)."""


@dataclass
class ExternalGeneration(Generation):
    """An external designer's reply: text only (``completion_ids``/``logprobs`` stay empty, nothing is
    trained on it); ``completion_tokens`` is the endpoint's ``usage.completion_tokens`` (0 when absent)."""

    completion_tokens: int = 0


class ExternalDesignerBackend:
    """Designer and hint generation through an OpenAI-compatible chat-completions endpoint."""

    def __init__(self, base_url: str, model: str, api_key: str, timeout_s: float = 600.0, retries: int = 4,
                 backoff_s: float = 2.0, concurrency: int = 8, max_tokens_field: str = "max_tokens",
                 sleep=time.sleep):
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"config key 'baseline.external_base_url' is {base_url!r}; it must be an http:// or "
                              "https:// URL ending before /chat/completions (e.g. https://api.openai.com/v1)")
        if max_tokens_field not in TOKEN_FIELDS:
            raise ConfigError(f"config key 'baseline.external_max_tokens_field' is {max_tokens_field!r}; allowed "
                              f"values: {list(TOKEN_FIELDS)}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self._key = model, api_key
        self.timeout_s, self.retries, self.backoff_s = float(timeout_s), int(retries), float(backoff_s)
        self.concurrency, self.max_tokens_field = max(1, int(concurrency)), max_tokens_field
        self._sleep = sleep
        self.last_stats: dict = {}

    @classmethod
    def from_config(cls, config) -> ExternalDesignerBackend:
        """The backend of ``config.baseline`` (mode 'fixed_external_designer'); the key is read from the
        environment variable the config names, never from the config itself."""
        from spade.core.env_source import baseline_of, check_external

        base = baseline_of(config)
        check_external(base)
        if base.external_serve:  # the run's own loopback server (spade.designer.serve): no key, no header
            if not base.external_base_url:
                raise ConfigError(f"config key 'baseline.external_serve' is {base.external_serve!r}, but no local "
                                  "server was started for this core: only the local trainer (spade train --backend "
                                  "local) starts it; elsewhere run `spade serve-designer` and set "
                                  "baseline.external_base_url and external_model instead")
            return cls(base.external_base_url, base.external_model, "", base.external_timeout_s,
                       base.external_retries, base.external_backoff_s, base.external_concurrency,
                       base.external_max_tokens_field)
        key = os.environ.get(base.external_api_key_env, "")
        if not key:
            raise ConfigError(f"the environment variable {base.external_api_key_env!r} (named by config key "
                              "'baseline.external_api_key_env') is unset or empty; export the external designer's "
                              "API key under that name (the key itself never goes into a config file)")
        return cls(base.external_base_url, base.external_model, key, base.external_timeout_s, base.external_retries,
                   base.external_backoff_s, base.external_concurrency, base.external_max_tokens_field)

    # ----- the core's entry point ----------------------------------------------------------------
    def generate_chats(self, chats: Sequence[list], params: SamplingParams,
                       seed: int | Sequence[int]) -> list[ExternalGeneration]:
        """One reply per chat (a list of ``{"role", "content"}`` messages), in order."""
        if isinstance(seed, int):
            seeds = [derive_seed(seed, "external", i) for i in range(len(chats))]
        else:
            seeds = [int(s) for s in seed]
            if len(seeds) != len(chats):
                raise ValueError(f"{len(seeds)} seeds for {len(chats)} chats")
        start = time.monotonic()
        if len(chats) <= 1 or self.concurrency == 1:
            results = [self.complete(chat, params, s) for chat, s in zip(chats, seeds)]
        else:
            with ThreadPoolExecutor(min(self.concurrency, len(chats))) as pool:
                results = list(pool.map(lambda pair: self.complete(pair[0], params, pair[1]), zip(chats, seeds)))
        seconds = time.monotonic() - start
        tokens = sum(r.completion_tokens for r in results)
        self.last_stats = {"prompts": len(results), "new_tokens": tokens, "seconds": seconds,
                           "tokens_per_s": tokens / seconds if seconds > 0 else float("nan")}
        return results

    def complete(self, messages: list, params: SamplingParams, seed: int) -> ExternalGeneration:
        """One chat completion (with retries)."""
        payload = {"model": self.model, "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
                   "temperature": params.temperature, self.max_tokens_field: params.max_new_tokens,
                   "seed": int(seed), "n": 1}
        if params.top_p < 1.0:  # 1.0 is the API default; some models reject the field altogether
            payload["top_p"] = params.top_p
        body = self._post(json.dumps(payload).encode("utf-8"))
        try:
            data = json.loads(body)
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""  # a refusal or an empty reply: validation rejects it
            finish = choice.get("finish_reason") or "stop"
            usage = data.get("usage") or {}
            tokens = int(usage.get("completion_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ExternalDesignerError(f"the external designer at {self.url} answered with no usable chat "
                                        f"completion ({type(exc).__name__}: {exc}): "
                                        f"{self._redact(body[:500].decode('utf-8', 'replace'))}") from None
        return ExternalGeneration(text=text, finish_reason="length" if finish == "length" else "stop",
                                  completion_tokens=tokens)

    # ----- transport -----------------------------------------------------------------------------
    def _post(self, data: bytes) -> bytes:
        headers = {"Content-Type": "application/json"}
        if self._key:  # an empty key (the run's own local server) sends no Authorization header
            headers["Authorization"] = f"Bearer {self._key}"
        failures = []
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            wait = None
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return response.read()
            except urllib.error.HTTPError as exc:
                detail = self._redact(exc.read()[:500].decode("utf-8", "replace"))
                failures.append(f"HTTP {exc.code}: {detail}")
                if exc.code not in RETRY_STATUS and exc.code < 500:
                    raise ExternalDesignerError(f"the external designer at {self.url} answered HTTP {exc.code} "
                                                f"(not retried): {detail}") from None
                wait = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
                failures.append(f"{type(exc).__name__}: {self._redact(str(exc))}")
            if attempt < self.retries:
                delay = self.backoff_s * 2 ** attempt
                self._sleep(min(max(delay, wait or 0.0), MAX_RETRY_AFTER_S))
        raise ExternalDesignerError(f"the external designer at {self.url} failed {len(failures)} times "
                                    f"(config keys baseline.external_retries / external_timeout_s); last: "
                                    f"{failures[-1]}")

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "<redacted>") if self._key else text


def _retry_after(value) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:  # an HTTP date: fall back to the exponential backoff
        return None
