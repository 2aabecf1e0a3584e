"""The longest prompt the policy can be given as a designer, against ``--data.max_len``, checked before launch.

The engines start with ``max_model_len`` = ``--data.max_len`` (``spade.rlhf.placement.data_max_len``). A design
prompt plus ``designer.max_new_tokens`` over it fails its step in the plugin (``spade.rlhf.plan.designer_response``),
hours into a run on the cluster (issue 46). A design prompt is its skill's instructions (for tool use, a domain and a
variant too), a corpus document cut to ``corpus.<kind>_max_words`` words, and the memory's examples; a hint's or the
tool-use screen's prompt is an environment's code in fixed instructions. ``designer_prompt_bounds`` renders each with
the run's tokenizer and chat template, two ways:

- ``built``: a design prompt the run builds at its start, measured: the corpus document of most tokens after its cut
  with the skill's longest library environments as its good examples (the memory as ``memory.seed_library`` fills
  it). Over the budget, the launcher refuses the run: the engines would refuse a prompt the run is about to make.
- ``prompt_tokens``: an upper bound over the whole run, every skill (and domain and variant): the same document, the
  memory full (``memory.n_positive`` good examples and one to avoid), and with ``designer_feedback.revisions`` the
  last revision's chat (``_revision_turns``); the hint and screen prompts around the longest environment they can be
  written for (``_hinted_code_tokens``: the policy's longest reply, or a backfilled library environment). Over the
  budget, the launcher warns and records it in the run's summary: such a prompt is possible, not certain, and the
  bound counts text of known characters at one token each.

A good example is of the prompt's skill: a library environment the memory was seeded with (measured) or one the
policy wrote, at most ``designer.max_new_tokens`` tokens (``CODE_MARGIN`` more for re-tokenising the code cut out of
its reply): ``example_code_tokens``. Shown as the reference shows it (``memory.examples: reference``), the code is cut
to ``memory.example_chars`` characters, counted as one token each, which holds for ASCII code under a byte-level BPE
(a token is at least one byte). An example to avoid has a measured win rate, so the policy wrote it: shown whole
(``full``), or named only (``reference``), its class name counted at ``NAME_TOKENS``. Beyond the bound, and still
refused by the plugin at its step: longer names, non-ASCII code, feedback lists over ``LISTS_CHARS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from spade.configtools import ConfigError

CODE_MARGIN = 8  # tokens: code cut out of a reply may tokenise a little longer than it did inside it
NAME_TOKENS = 64  # tokens allowed for the class name of an example to avoid (memory.examples: reference)
PLACEHOLDER_CODE = "pass"  # stands for an example's code in the rendered prompt; its own tokens are taken off
TRIM_TOKENS = 16  # the marker of a trimmed text, "...[N characters omitted]...", at most
LISTS_CHARS = 512  # the checks passed and the automatic repairs a feedback message names (today at most 9 and 3: about
# 150 and 130 characters)
CODE_KEYS = "designer.max_new_tokens (the longest code the policy writes)"
DESIGN_KEYS = ("corpus.games_max_words / corpus.tool_use_max_words, memory.n_positive, memory.example_chars, "
               "memory.examples, " + CODE_KEYS)


@dataclass(frozen=True)
class PromptBound:
    """The most tokens one kind of designer prompt can take, with the tokens its reply may add."""

    what: str  # e.g. "design prompt (skill logical_deduction, document corpus:17, ...)"
    prompt_tokens: int  # the upper bound over the run
    new_tokens: int
    keys: str  # the config keys that shorten it
    built: int | None = None  # tokens of the prompt the run builds at its start (design prompts), measured
    built_what: str = ""  # e.g. "design prompt (skill logical_deduction, document corpus:17, 2 library examples)"

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.new_tokens


def policy_designs(config) -> bool:
    """Whether the policy writes environments on the engines: 'spade' and 'fixed_env_grpo' (its pool); the pool
    modes have no designer, and the fixed external designer's prompts go to its own server."""
    from spade.core.env_source import baseline_of

    return baseline_of(config).mode in ("spade", "fixed_env_grpo")


def _count(chat, messages: list, prefix_ids: list) -> int:
    return len(chat.first_prompt(messages)) + len(prefix_ids)


def longest_document(config, tokenizer, corpus_path) -> tuple[str | None, str]:
    """The corpus document of most tokens after its word cut, and its id; (None, "") with the corpus off or absent."""
    from spade.core.backend_setup import corpus_sampler
    from spade.designer.corpus import truncate_words

    sampler = corpus_sampler(config, corpus_path)
    if sampler is None:
        return None, ""
    best, best_tokens = (None, ""), -1
    for start in range(0, len(sampler.documents), 256):
        chunk = sampler.documents[start:start + 256]
        texts = [truncate_words(d.text, sampler.max_words).strip() for d in chunk]
        for document, text, ids in zip(chunk, texts, tokenizer(texts, add_special_tokens=False)["input_ids"]):
            if len(ids) > best_tokens:
                best, best_tokens = (text, document.doc_id), len(ids)
    return best


def _seeded(records: list, tokenizer, shown_chars: int | None, skill: str) -> list[tuple[int, object]]:
    """(tokens of the code as shown, record) of each of ``records`` (the library environments the memory starts with,
    ``fresh_memory``) of ``skill``; ``shown_chars``: the code is cut to that many characters (None: whole)."""
    records = [record for record in records if record.skill == skill]
    if not records:
        return []
    codes = [record.code.strip()[:shown_chars] for record in records]
    return [(len(ids), record) for ids, record in zip(tokenizer(codes, add_special_tokens=False)["input_ids"], records)]


def example_code_tokens(config, shown_chars: int | None, seeded: list) -> int:
    """The most tokens an example's code can take in a prompt: a library environment the memory was seeded with, of
    the prompt's skill (``seeded``, from ``_seeded``: a good example is of the prompt's skill), measured, or the
    policy's longest reply (``designer.max_new_tokens`` + ``CODE_MARGIN``); ``shown_chars``: the code is cut to that
    many characters (one token each at most, for ASCII code)."""
    written = config.designer.max_new_tokens + CODE_MARGIN
    if shown_chars is not None:
        written = min(written, shown_chars)
    return max([written] + [tokens for tokens, _ in seeded])


def _hinted_code_tokens(config, tokenizer) -> int:
    """The most tokens of an environment a hint or the screen is written for: one the policy wrote
    (``designer.max_new_tokens`` + ``CODE_MARGIN``), or with ``selfplay.backfill`` one of the backfill pool,
    measured."""
    from spade.core.selfplay import backfill_pool

    written = config.designer.max_new_tokens + CODE_MARGIN
    if not config.selfplay.backfill:
        return written
    codes = [entry.source().strip() for entry in backfill_pool(config)]
    return max([written] + [len(ids) for ids in tokenizer(codes, add_special_tokens=False)["input_ids"]])


def _placeholder(skill: str):
    """A memory example whose header is as long as a measured one can be (win rate 0.50, regret -0.99)."""
    return SimpleNamespace(code=PLACEHOLDER_CODE, skill=skill, win_rate=0.5, regret=-0.99, env_id="")


def _revision_turns(config, chat, prefix_ids: list) -> int:
    """The most tokens one feedback revision adds to a design chat (``spade.designer.feedback.revision_chat``): the
    designer's previous answer, trimmed to ``designer_feedback.answer_chars`` characters (one token each) and no longer
    than its reply, and the feedback message around a report message of ``report_chars`` characters, its lists of
    checks and repairs at ``LISTS_CHARS``, its reason the one of longest advice. Revision r's chat holds r of them."""
    from spade.designer.feedback import REASON_ADVICE, revision_chat

    feedback = config.designer_feedback
    reason = max(REASON_ADVICE, key=lambda r: len(REASON_ADVICE[r]))
    report = {"valid": False, "reason": reason, "message": "", "checks": [], "changes": []}
    base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    turns = revision_chat(base, "", report, 1, max(feedback.revisions, 1), feedback.answer_chars, feedback.report_chars)
    rendered = len(chat.first_prompt(turns)) - len(chat.first_prompt(base))
    answer = min(feedback.answer_chars + TRIM_TOKENS,
                 config.designer.max_new_tokens + len(prefix_ids) + CODE_MARGIN)  # its text opens with the prefix
    return rendered + answer + feedback.report_chars + TRIM_TOKENS + LISTS_CHARS


def designer_prompt_bounds(config, tokenizer, corpus_path) -> list[PromptBound]:
    """The most tokens of each kind of prompt the policy is given as a designer in this run (module docstring):
    one bound per skill (tool use: per skill, domain and variant, the longest kept) for the design prompt, and one
    each for the hint and, with ``validation.llm_screen`` on tool use, the screen."""
    from spade.core.agent import ChatTokens, template_kwargs
    from spade.core.backend_setup import fresh_memory
    from spade.designer.prompts import design_prompt, flavour_kind, hint_prompt, screen_prompt
    from spade.designer.skills import DOMAIN_IDS, VARIANT_IDS

    chat = ChatTokens(tokenizer, template_kwargs(config.designer.enable_thinking))
    opening = config.designer.opening()
    prefix_ids = chat.encode(opening) if opening else []
    flavour, memory = config.selfplay.flavour, config.memory
    reference = memory.examples == "reference"
    shown = memory.example_chars if reference else None  # characters of an example's code shown (None: whole)
    library_records = fresh_memory(config).records if memory.enabled else []  # built once: it reads the library
    placeholder_tokens = len(tokenizer(PLACEHOLDER_CODE, add_special_tokens=False)["input_ids"])
    document, doc_id = longest_document(config, tokenizer, corpus_path)
    # an example to avoid is a measured record, so one the policy wrote: named (reference style), or its whole reply
    avoided = NAME_TOKENS if reference else config.designer.max_new_tokens + 2 * CODE_MARGIN - placeholder_tokens
    revisions = config.designer_feedback.revisions
    revision_turns = _revision_turns(config, chat, prefix_ids) if revisions else 0
    tool_use = flavour_kind(flavour) == "tool_use"
    pairs = [(d, v) for d in DOMAIN_IDS for v in VARIANT_IDS] if tool_use else [(None, None)]
    bounds = []
    for skill in config.selfplay.skills:
        parts = [f"skill {skill}"] + ([f"document {doc_id}"] if document else [])
        positives, negative, extra = [], None, 0
        seeded = _seeded(library_records, tokenizer, shown, skill)
        if memory.enabled:
            per_example = example_code_tokens(config, shown, seeded)
            positives, negative = [_placeholder(skill)] * memory.n_positive, _placeholder(skill)
            # each good example: its code in place of the placeholder's, and CODE_MARGIN for a cut one's wording
            extra = memory.n_positive * (per_example - placeholder_tokens + CODE_MARGIN) + avoided
            parts.append(f"{memory.n_positive} good examples of {per_example} code tokens each, one to avoid "
                         + (f"named in {NAME_TOKENS} tokens" if reference else "shown whole"))
        tokens = max(_count(chat, design_prompt(flavour, skill, document, positives, negative, domain, variant,
                                                examples=memory.examples, example_chars=memory.example_chars),
                            prefix_ids) for domain, variant in pairs)
        # the memory's seeded library environments of the skill whose shown code has the most tokens
        longest = [record for _, record in sorted(seeded, key=lambda p: -p[0])[:memory.n_positive]]
        built = max(_count(chat, design_prompt(flavour, skill, document, longest, None, domain, variant,
                                               examples=memory.examples, example_chars=memory.example_chars),
                           prefix_ids) for domain, variant in pairs)
        built_parts = parts[:1 + bool(document)] + ([f"{len(longest)} library examples"] if longest else [])
        bounds.append(PromptBound(f"design prompt ({', '.join(parts)})", tokens + extra,
                                  config.designer.max_new_tokens, DESIGN_KEYS, built,
                                  f"design prompt ({', '.join(built_parts)})"))
        if revisions:
            bounds.append(PromptBound(f"revision {revisions} prompt ({', '.join(parts)})",
                                      tokens + extra + revisions * revision_turns, config.designer.max_new_tokens,
                                      "designer_feedback.revisions, .answer_chars, .report_chars, " + DESIGN_KEYS))
    code = _hinted_code_tokens(config, tokenizer) - placeholder_tokens + CODE_MARGIN
    bounds.append(PromptBound("hint prompt (an environment's whole code)",
                              _count(chat, hint_prompt(PLACEHOLDER_CODE, flavour), []) + code,
                              config.designer.hint_max_new_tokens, "designer.hint_max_new_tokens, " + CODE_KEYS))
    if tool_use and config.validation.llm_screen:
        bounds.append(PromptBound("screen prompt (an environment's whole code)",
                                  _count(chat, screen_prompt(PLACEHOLDER_CODE), []) + code,
                                  config.validation.screen_max_new_tokens,
                                  "validation.screen_max_new_tokens, " + CODE_KEYS))
    return bounds


def check_designer_prompts_fit(config, tokenizer, corpus_path, max_len: int) -> list[PromptBound]:
    """``designer_prompt_bounds`` against ``max_len`` (``--data.max_len``): raises ``ConfigError`` when a prompt the run
    builds at its start does not fit, naming it, its tokens and the keys that decide it; returns the bounds (none when
    the policy does not design). ``over_budget`` gives the ones whose upper bound does not fit (a warning)."""
    if not policy_designs(config):
        return []
    bounds = designer_prompt_bounds(config, tokenizer, corpus_path)
    over = [b for b in bounds if b.built is not None and b.built + b.new_tokens > max_len]
    if over:
        worst = max(over, key=lambda b: b.built)
        raise ConfigError(
            f"the {worst.built_what}, which this run builds at its start, takes {worst.built} tokens, plus "
            f"{worst.new_tokens} new ones = {worst.built + worst.new_tokens}, over "
            f"--data.max_len {max_len} (config key 'openrlhf.max_len', or when it is 0 'openrlhf.design_prompt_tokens' "
            f"+ 'designer.max_new_tokens'): the engines would refuse it. Raise openrlhf.design_prompt_tokens (or "
            f"openrlhf.max_len), or shorten it: {worst.keys}.")
    return bounds


def over_budget(bounds: list, max_len: int) -> list[str]:
    """One line per prompt whose upper bound does not fit ``max_len``: possible, not certain (module docstring)."""
    return [f"the longest {b.what} can take up to {b.prompt_tokens} tokens (an upper bound), plus {b.new_tokens} new "
            f"ones = {b.total}, over --data.max_len {max_len}: if one does, the plugin stops its step. To rule it out, "
            f"raise openrlhf.design_prompt_tokens (or openrlhf.max_len), or shorten it: {b.keys}."
            for b in bounds if b.total > max_len]
