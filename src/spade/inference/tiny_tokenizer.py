"""The tiny random models' tokenizer: byte-level BPE trained offline on a fixed text, with our own chat templates.

For ``tiny.architecture`` 'llama' a ChatML template with optional tools; for the Qwen3 family ('qwen3', 'qwen3_moe')
Qwen3's token set and templates of ours that render conversations as Qwen3's do (``tiny.thinking`` 'none' for the
Instruct-2507 models, 'hybrid' for Qwen3-8B's enable_thinking switch). Byte-identical for the same arguments.
"""

from __future__ import annotations

import hashlib
# Special tokens of the tiny tokenizer, in the same order (ids 0, 1, 2) as SmolLM2's.
TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Architectures of the tiny random model: 'qwen3' and 'qwen3_moe' are the paper's backbone families.
TINY_ARCHITECTURES = ("llama", "qwen3", "qwen3_moe")
QWEN3_FAMILY = ("qwen3", "qwen3_moe")
# tiny.thinking: 'none' (Qwen3-*-Instruct-2507: no thinking mode) or 'hybrid' (Qwen3-8B: enable_thinking switch)
THINKING_MODES = ("none", "hybrid")
# Tags the Qwen3 tokenizer holds as single added tokens that are NOT special (a decode that skips special tokens keeps
# them, so replies still show their reasoning and tool calls); the tiny Qwen3-family tokenizer puts them last.
QWEN3_ADDED_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")


TINY_CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "{{- 'You can call these tools. To call one, reply with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>.\\n' }}"
    "{%- for tool in tools %}{{- (tool | tojson) + '\\n' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (tools and loop.first and message['role'] == 'system') %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}{%- endif %}"
    "{%- if message['tool_calls'] is defined and message['tool_calls'] %}"
    "{%- for call in message['tool_calls'] %}"
    "{%- set fn = call['function'] if call['function'] is defined else call %}"
    "{{- '<tool_call>{\"name\": ' + (fn['name'] | tojson) + ', \"arguments\": ' + (fn['arguments'] | tojson) + '}</tool_call>' }}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

def _qwen3_family_template(hybrid: bool) -> str:
    """Our own chat template for the tiny Qwen3-family models; it renders conversations the way Qwen3's templates do.

    ChatML turns ``<|im_start|>{role}\n{content}<|im_end|>\n``. With ``tools`` a system turn (after the first
    message's text when that is a system message) lists one JSON schema per line between ``<tools>`` and ``</tools>``
    and asks for calls as ``<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>``; an assistant message's
    ``tool_calls`` are rendered as such blocks (a newline before each but a first one with no text before it); a run
    of ``tool`` messages becomes one user turn of ``\n<tool_response>\n...\n</tool_response>`` blocks. The generation
    prompt is ``<|im_start|>assistant\n``.

    ``hybrid`` (Qwen3-8B): ``enable_thinking`` false (the default is true) adds an empty ``<think>\n\n</think>\n\n``
    after the generation prompt; assistant turns before the last user message lose everything up to their last
    ``</think>`` (and the newlines after it), while the turns after it, the current tool loop, keep their reasoning,
    as Qwen3 does. Not hybrid (the Instruct-2507 models): ``enable_thinking`` is never read and assistant turns are
    rendered as written.
    """
    strip_reasoning = (
        "{%- if loop.index0 < state.last_user and '</think>' in reply %}"
        "{%- set reply = (reply.split('</think>') | last).lstrip('\\n') %}"
        "{%- endif %}"
    ) if hybrid else ""
    empty_thought = (
        "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    ) if hybrid else ""
    return (
        "{%- set state = namespace(last_user=-1) %}"
        "{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set state.last_user = loop.index0 %}"
        "{%- endif %}{%- endfor %}"
        "{%- if tools %}"
        "{{- '<|im_start|>system\\n' }}"
        "{%- if messages and messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
        "{{- '# Tools\\n\\nThese functions are available to help with the request. Each line between <tools> and "
        "</tools> is the JSON signature of one of them:\\n<tools>' }}"
        "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
        "{{- '\\n</tools>\\n\\nTo use a function, reply with its name and a JSON object of arguments between "
        "<tool_call> and </tool_call>, one block per call:\\n<tool_call>\\n{\"name\": <function name>, \"arguments\": "
        "<arguments object>}\\n</tool_call><|im_end|>\\n' }}"
        "{%- endif %}"
        "{%- for message in messages %}"
        "{%- set text = message['content'] if message['content'] is string else "
        "('' if message['content'] is none else (message['content'] | tojson)) %}"
        "{%- if message['role'] == 'system' and loop.first and tools %}"
        "{%- elif message['role'] == 'tool' %}"
        "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
        "{{- '\\n<tool_response>\\n' + text + '\\n</tool_response>' }}"
        "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
        "{%- elif message['role'] == 'assistant' %}"
        "{%- set reply = text %}"
        + strip_reasoning +
        "{{- '<|im_start|>assistant\\n' + reply }}"
        "{%- if message['tool_calls'] is defined and message['tool_calls'] %}"
        "{%- for call in message['tool_calls'] %}"
        "{%- set fn = call['function'] if call['function'] is defined else call %}"
        "{%- if reply or not loop.first %}{{- '\\n' }}{%- endif %}"
        "{%- set arguments = fn['arguments'] if fn['arguments'] is string else (fn['arguments'] | tojson) %}"
        "{{- '<tool_call>\\n{\"name\": ' + (fn['name'] | tojson) + ', \"arguments\": ' + arguments + '}\\n</tool_call>' }}"
        "{%- endfor %}"
        "{%- endif %}"
        "{{- '<|im_end|>\\n' }}"
        "{%- else %}"
        "{{- '<|im_start|>' + message['role'] + '\\n' + text + '<|im_end|>\\n' }}"
        "{%- endif %}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
        + empty_thought +
        "{%- endif %}"
    )


# The tiny Qwen3-family templates: Qwen3-*-Instruct-2507 (no thinking) and Qwen3-8B (hybrid thinking).
TINY_QWEN3_CHAT_TEMPLATE = _qwen3_family_template(hybrid=False)
TINY_QWEN3_HYBRID_CHAT_TEMPLATE = _qwen3_family_template(hybrid=True)


# A few KB of text that looks like what the pipeline feeds the model: chat, games, arithmetic with
# boxed answers, JSON tool calls and Python. Only the BPE merges depend on it; the byte-level alphabet
# makes every string encodable whatever this text holds.
_TINY_CORPUS = r"""
The assistant reads the task, thinks step by step, and gives the final answer as \boxed{42}.
What is 2+3? The answer is 5, so we write \boxed{5}. What is 7*8? It is 56: \boxed{56}.
What is 12-9? Three. \boxed{3}. What is 100/4? It is 25, \boxed{25}. Add 0, 1, 2, 3, 4, 5, 6, 7, 8, 9.
Solve for x: 3x + 4 = 19, so 3x = 15 and x = 5. Final answer: \boxed{x = 5}.
The sum of the first ten numbers is 55; the product of 6 and 7 is 42; 2^10 = 1024; 17 % 5 = 2.
You are playing a game. Guess a digit between 0 and 9. Your guess was too low. Try again.
You win! You lose. The game is over. It is your turn. Make a move: up, down, left or right.
The board is a grid of 3 by 3 cells. Place your mark in an empty cell, for example \boxed{(1, 2)}.
Each turn you get feedback: "correct", "wrong", "too high" or "too low". Reward: 1.0 or 0.0.
A user asks for help with a file system, a bank account, a trip or a message to a friend.
Call a tool with JSON arguments: {"name": "list_files", "arguments": {"path": "/home/user"}}
{"name": "send_message", "arguments": {"to": "alice", "text": "Hello, how are you?"}}
{"name": "get_balance", "arguments": {"account_id": 12345, "currency": "USD"}}
{"type": "function", "function": {"name": "book_flight", "parameters": {"type": "object",
"properties": {"from": {"type": "string"}, "to": {"type": "string"}, "date": {"type": "string"}},
"required": ["from", "to"]}}}
[{"id": 1, "done": true}, {"id": 2, "done": false}, {"id": 3, "done": null}]
The tool returned an error: "file not found". Please check the path and try again.
def step(self, action):
    self.turn += 1
    if action.strip() == "\\boxed{" + str(self.target) + "}":
        return "Correct.", 1.0, True, False, {"turn": self.turn}
    return "Wrong.", 0.0, False, self.turn >= self.max_turns, {"turn": self.turn}

class Env:
    def __init__(self, max_turns=5, **kwargs):
        self.max_turns = max_turns
        self.reset()

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.target = self.rng.randint(0, 9)
        return "Guess a digit.", {"turn": 0}

import json, math, random
for i in range(10):
    print(i, i * i, math.sqrt(i))
x = [a + b for a, b in zip(xs, ys) if a > b]
result = {"score": 0.75, "valid": True, "errors": []}
# Comments start with a hash; strings use 'single' or "double" quotes; escapes like \n and \t.
Symbols: ~ ! @ # $ % ^ & * ( ) _ + - = { } [ ] | \ : ; " ' < > , . ? / `
Upper case letters: ABCDEFGHIJKLMNOPQRSTUVWXYZ. Lower case letters: abcdefghijklmnopqrstuvwxyz.
Once upon a time there was a small robot that liked puzzles. Every morning it solved one puzzle,
wrote the answer in a box, and checked it twice. When the answer was right, it was happy; when it
was wrong, it tried to learn from the mistake and did better the next day.
An environment has a reset method and a step method. The step method returns an observation,
a reward, whether the episode terminated, whether it was truncated, and an info dictionary.
The designer writes new environments; the solver plays them; both learn from the rewards.
Think about the question. First, find the numbers. Second, apply the operation. Third, check.
Yes. No. Maybe. Five. Seven. Ten. Twenty. One hundred. True. False. None. OK. Thanks!
"""


def _tiny_corpus_lines() -> list[str]:
    return [line for line in _TINY_CORPUS.strip("\n").split("\n") if line]


def build_tiny_tokenizer(vocab_size: int = 512, architecture: str = "llama", thinking: str = "none"):
    """A byte-level BPE tokenizer trained offline on the built-in text (deterministic).

    ``architecture`` 'llama': the special tokens ``TINY_SPECIAL_TOKENS`` (bos ``<|im_start|>``, eos and pad
    ``<|im_end|>``) and ``TINY_CHAT_TEMPLATE``. The Qwen3 family ('qwen3', 'qwen3_moe'): Qwen3's token set, the same
    three special tokens at ids 0-2 (pad ``<|endoftext|>``, eos ``<|im_end|>``, no bos or unk, as Qwen3's tokenizer)
    and ``QWEN3_ADDED_TOKENS`` as the last ids of the ``vocab_size``, not special; the template of ``thinking``.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if architecture not in TINY_ARCHITECTURES:
        raise ValueError(f"tiny.architecture {architecture!r} is not one of {list(TINY_ARCHITECTURES)}")
    if thinking not in THINKING_MODES:
        raise ValueError(f"tiny.thinking {thinking!r} is not one of {list(THINKING_MODES)}")
    qwen3 = architecture in QWEN3_FAMILY
    added = QWEN3_ADDED_TOKENS if qwen3 else ()
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(added), min_frequency=2, show_progress=False,
                                  special_tokens=list(TINY_SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    # Repeat the text so frequent pairs clearly outrank rare ones; the result does not depend on order
    # of dictionary iteration (the trainer breaks count ties by the pair itself).
    core.train_from_iterator(_tiny_corpus_lines() * 4, trainer=trainer)
    if not qwen3:
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=core, bos_token="<|im_start|>", eos_token="<|im_end|>", unk_token="<|endoftext|>",
            pad_token="<|im_end|>", padding_side="left", clean_up_tokenization_spaces=False,
            model_max_length=1_000_000,
        )
        tokenizer.chat_template = TINY_CHAT_TEMPLATE
        return tokenizer
    core.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in added])
    if core.get_vocab_size() != vocab_size:
        raise ValueError(f"tiny.vocab_size {vocab_size}: the built-in text gave a vocabulary of "
                         f"{core.get_vocab_size()} tokens; choose a smaller tiny.vocab_size")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left",
        clean_up_tokenization_spaces=False, model_max_length=1_000_000,
    )
    tokenizer.chat_template = TINY_QWEN3_HYBRID_CHAT_TEMPLATE if thinking == "hybrid" else TINY_QWEN3_CHAT_TEMPLATE
    return tokenizer


def tiny_corpus_sha256() -> str:
    """The SHA-256 of the built-in text the tokenizer's merges are trained on (recorded in provenance.json)."""
    return hashlib.sha256("\n".join(_tiny_corpus_lines()).encode()).hexdigest()
