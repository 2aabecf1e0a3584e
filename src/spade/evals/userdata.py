"""Shared plumbing of the benchmarks whose data the user downloads (AIME, GPQA-Diamond, LiveCodeBench).

These data sets cannot ship with the code (licences, gating, size), so each benchmark reads a local
file named by its config and, when the file is absent, raises ``DataMissing`` at once (before any model
is loaded) with a message in one format: the config key, what to download (data set names as text),
the exact file name and format expected, and an example command that writes it.

Readers accept the formats the usual Hugging Face exports come in: ``.jsonl`` (``Dataset.to_json``),
``.json`` (a list of records, or JSON lines), ``.parquet`` (the hub's own files; needs ``pyarrow``) and
``.csv`` (e.g. GPQA's ``gpqa_diamond.csv``). A path may also be a folder: every supported file in it is
read, in name order. A malformed file raises ``ConfigError`` naming the file, the config key and what
was expected.

Also here: a deterministic subsample for toy-scale runs, and the single-turn sampling loop the three
benchmarks share (one user prompt, one reply, per-item seeds).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from spade.configtools import ConfigError
from spade.evals.base import Conversation, DataMissing, EvalContext, play_conversations
from spade.seeding import derive_seed

SUPPORTED_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
DOCS = "docs/evals/user_data.md"


@dataclass(frozen=True)
class DataSpec:
    """What a user-data file is and where it comes from (the text of the ``DataMissing`` message)."""

    key: str  # full config key, e.g. "eval.aime.paths.2025"
    title: str  # e.g. "AIME 2025"
    download: str  # where to get it: data set ids / URLs, as text
    expected: str  # the file name and format expected at the path
    example: str = ""  # a command that writes the expected file (optional)


def missing_message(spec: DataSpec, path: str) -> str:
    where = f"no file or folder at {path!r}" if path else "no path is set"
    lines = [
        f"config key '{spec.key}': {where}.",
        f"{spec.title} is user data: download it yourself and point '{spec.key}' at it.",
        f"  Download: {spec.download}",
        f"  Expected: {spec.expected}",
    ]
    if spec.example:
        lines.append(f"  Example:  {spec.example}")
    lines.append(f"  See {DOCS}.")
    return "\n".join(lines)


def require_path(raw: str, spec: DataSpec) -> Path:
    """The configured path (relative to the working directory); ``DataMissing`` if unset or absent."""
    path = Path(raw).expanduser() if raw else None
    if path is None or not path.exists():
        raise DataMissing(missing_message(spec, raw))
    return path


def data_files(path: Path, spec: DataSpec) -> list[Path]:
    """``path`` itself, or the supported files directly inside the folder ``path`` (sorted by name)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUPPORTED_SUFFIXES)
        if not files:
            kinds = "/".join(SUPPORTED_SUFFIXES)
            raise DataMissing(missing_message(spec, str(path)) + f"\n  (the folder holds no {kinds} file)")
        return files
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise ConfigError(f"config key '{spec.key}': file {str(path)!r} has an unsupported suffix "
                          f"{path.suffix!r}; allowed: {list(SUPPORTED_SUFFIXES)}")
    return [path]


def _bad(spec: DataSpec, path: Path, problem: str) -> ConfigError:
    return ConfigError(f"config key '{spec.key}': file {str(path)!r} is malformed: {problem}. "
                       f"Expected {spec.expected}")


def _records(rows, spec: DataSpec, path: Path) -> list[dict]:
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise _bad(spec, path, "it does not hold a list of records (JSON objects)")
    return rows


def _jsonl_records(lines, spec: DataSpec, path: Path) -> Iterator[dict]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(spec, path, f"line {number} is not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise _bad(spec, path, f"line {number} is not a JSON object")
        yield record


def _read_jsonl(text: str, spec: DataSpec, path: Path) -> list[dict]:
    return list(_jsonl_records(text.splitlines(), spec, path))


def _read_parquet(path: Path, spec: DataSpec) -> list[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(f"config key '{spec.key}': reading {str(path)!r} needs pyarrow "
                          "(pip install pyarrow==26.0.1), or convert the file to .jsonl") from None
    try:
        return pq.read_table(path).to_pylist()
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise _bad(spec, path, f"not a readable parquet file ({exc})") from None


def read_file(path: Path, spec: DataSpec) -> list[dict]:
    """The records of one file, by suffix."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _read_parquet(path, spec)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _bad(spec, path, f"not UTF-8 text ({exc.reason})") from None
    if suffix == ".csv":
        csv.field_size_limit(1 << 30)
        try:
            return [dict(row) for row in csv.DictReader(text.splitlines(keepends=True))]
        except csv.Error as exc:
            raise _bad(spec, path, f"not valid CSV ({exc})") from None
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return _read_jsonl(text, spec, path)  # JSON lines saved as .json (Dataset.to_json's default)
        return _records(data, spec, path)
    return _read_jsonl(text, spec, path)


def iter_rows(path: Path, spec: DataSpec) -> Iterator[dict]:
    """The records of the file, or of every supported file in the folder, in order; .jsonl is streamed
    line by line (LiveCodeBench files are large, and only a date window of them is kept)."""
    for file in data_files(path, spec):
        if file.suffix.lower() == ".jsonl":
            try:
                with open(file, encoding="utf-8-sig") as handle:
                    yield from _jsonl_records(handle, spec, file)
            except UnicodeDecodeError as exc:
                raise _bad(spec, file, f"not UTF-8 text ({exc.reason})") from None
        else:
            yield from read_file(file, spec)


def read_rows(path: Path, spec: DataSpec) -> list[dict]:
    """Every record (see ``iter_rows``) as a list; ``ConfigError`` when there is none."""
    rows = list(iter_rows(path, spec))
    if not rows:
        raise _bad(spec, path, "it holds no records")
    return rows


def pick(row: dict, names: Sequence[str], spec: DataSpec, path: Path, index: int, what: str):
    """The value of the first of ``names`` present (and not None) in ``row``; ``ConfigError`` if none is."""
    for name in names:
        if row.get(name) is not None:
            return row[name]
    raise _bad(spec, path, f"record {index} has no {what} column (looked for {list(names)}; "
                           f"it has {sorted(row)[:20]})")


def problem_ids(rows: list[dict], id_columns: Sequence[str]) -> list[str]:
    """Stable ids: the first id column whose values are present and unique, else the 1-based row number.

    Numbers are zero-padded to 3 digits so ids sort naturally; '/' is replaced (ids are path-like).
    """
    for column in id_columns:
        values = [row.get(column) for row in rows]
        if all(v is not None and str(v).strip() for v in values) and len({str(v) for v in values}) == len(values):
            return [_clean_id(v) for v in values]
    return [f"{i:03d}" for i in range(1, len(rows) + 1)]


def _clean_id(value) -> str:
    text = str(value).strip()
    if text.isdigit():
        return f"{int(text):03d}"
    return text.replace("/", "_")


def subsample(ids: Sequence[str], limit: int, name: str) -> list[str]:
    """``limit`` ids chosen by a fixed hash order (0 = all), returned in their original order.

    The choice depends only on the ids and ``name``, not on the eval seed, so every checkpoint and every
    run sees the same subset; hashing avoids taking, say, only the earliest (easiest) problems.
    """
    if not limit or limit >= len(ids):
        return list(ids)
    keep = set(sorted(ids, key=lambda i: derive_seed("subsample", name, i))[:limit])
    return [i for i in ids if i in keep]


# ------------------------------------------------------------------------------------------------ sampling
class SingleReply(Conversation):
    """One user prompt, one model reply; scoring happens after sampling."""

    def respond(self, text: str) -> None:
        return None


def render(ctx: EvalContext, messages: list) -> str:
    """The prompt text exactly as ``play_conversations`` renders it (for ``prompt_hash``)."""
    return ctx.backend.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def sample_replies(ctx: EvalContext, prompts: Sequence[list], seeds: Sequence[int]) -> list[SingleReply]:
    """Sample one reply per chat prompt, each with its own seed; batched into one backend call."""
    conversations = [SingleReply(messages) for messages in prompts]
    play_conversations(ctx, conversations, seeds, max_turns=1)
    return conversations


def reply_text(conversation: SingleReply) -> str:
    """The reply, or '' when the prompt alone filled the context (``stop_reason == 'context_limit'``)."""
    return conversation.replies[-1] if conversation.replies else ""
