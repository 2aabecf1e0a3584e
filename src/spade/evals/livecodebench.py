"""LiveCodeBench v6 code generation: Pass@1 of generated Python programs (spec section 9).

What is measured: each problem of the date window is sampled ``samples`` times with LiveCodeBench's
own chat prompt; the last fenced Python block of a reply is run on every public and private test case
of the problem, in order, until one fails; a sample passes when all pass. Metric ``pass@1`` (paper
column ``lcb_v6``) = mean over problems of the fraction of passing samples (with one sample, the share
of problems solved); ``pass@1/<difficulty>`` per LCB difficulty.

Which problems (``eval.livecodebench.problems``): 'release_v6' (the reference's offline suite, which loads
lcb_runner's ``release_v6`` with no date filter): every problem of the files ``test.jsonl``, ``test2.jsonl`` ...
``test6.jsonl``; 'window': problems with ``start_date <= contest_date < end_date``, default 2025-02-01 ..
2025-05-01, the window the Qwen3 model cards call "LiveCodeBench v6 (25.02-25.05)" (the paper's base scores,
e.g. 35.1 for Qwen3-4B-Instruct-2507, are those cards' numbers).

Data: user-provided, ``eval.livecodebench.path`` (default the folder ``data/livecodebench``): the
``test*.jsonl`` files of the Hugging Face dataset ``livecodebench/code_generation_lite`` (release_v6: all six;
the window lies in ``test5.jsonl``/``test6.jsonl``, extra files are filtered out by date), or a parquet/json
export with the same columns (taken whole under 'release_v6'): question_id, question_title, question_content, platform, contest_date,
starter_code, difficulty, public_test_cases (JSON string), private_test_cases (JSON string, or base64
of zlib of a pickle of that JSON string), metadata (JSON string with ``func_name`` for LeetCode).
The pickle is read with ``PlainUnpickler``, which refuses every global (no class, no function), so a
tampered file cannot run code; the result must be a string, bytes, or a list of test dicts.

Execution and comparison (``spade.evals.livecodebench_grading``): every test case runs in a fresh episode of our
sandbox, never on the host; the host compares the program's output with the expected one as LCB's ``testing_util``
does, so a program cannot fake a verdict.

Deviations from LCB's harness: the sandbox allows neither threads nor child processes (programs that
start a thread for a bigger stack fail), only the standard library is importable (no numpy), each
test runs in a fresh process (LCB reuses one process and one ``Solution`` instance per problem), the
program is run as a module (LCB wraps it in a function), code is taken from the last ```python block
(LCB: the last pair of ``` lines, any language), and an output longer than twice the expected output
plus 64 KiB counts as wrong without being transferred.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from spade.configtools import ConfigError, option
from spade.evals.base import Benchmark, EvalContext, Item, ItemRecord, Metric, mean_metric, prompt_hash
from spade.evals.base import max_new_tokens_option, temperature_option, top_k_option, top_p_option
from spade.evals.livecodebench_grading import grade_program
from spade.evals.registry import register_benchmark
from spade.evals.userdata import DataSpec, iter_rows, render, reply_text, require_path, sample_replies, subsample

# LiveCodeBench's prompt for chat models (lcb_runner/prompts/code_generation.py, generic template)
SYSTEM_MESSAGE = ("You are an expert Python programmer. You will be given a question (problem specification) and "
                  "will generate a correct Python program that matches the specification and passes all tests.")
WITH_STARTER = ("You will use the following starter code to write the solution to the problem and enclose your "
                "code within delimiters.")
WITHOUT_STARTER = ("Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test "
                   "on the sample inputs). Enclose your code within delimiters as follows. Ensure that when the python "
                   "program runs, it reads the inputs, runs the algorithm and writes output to STDOUT.")
MAX_DECOMPRESSED = 1 << 30  # bytes; a private-test blob larger than this is refused (zlib bomb guard)

DATA = DataSpec(
    key="eval.livecodebench.path",
    title="LiveCodeBench (code generation, lite)",
    download="the Hugging Face dataset 'livecodebench/code_generation_lite' "
             "(https://huggingface.co/datasets/livecodebench/code_generation_lite): files test.jsonl, test2.jsonl ... "
             "test6.jsonl (release_v6, eval.livecodebench.problems 'release_v6'); the 'window' setting needs test5.jsonl "
             "and test6.jsonl only (problems outside the date window are skipped)",
    expected="the folder data/livecodebench/ holding test.jsonl and test2.jsonl ... test6.jsonl (with problems "
             "'window': test5.jsonl and test6.jsonl), or one .jsonl/.json/.parquet file: "
             "one problem per record with columns question_id, question_content, starter_code, contest_date, "
             "difficulty, platform, public_test_cases (JSON string), private_test_cases (JSON string or "
             "base64(zlib(pickle(JSON string)))), metadata (JSON string, func_name for LeetCode)",
    example="huggingface-cli download livecodebench/code_generation_lite test.jsonl test2.jsonl test3.jsonl test4.jsonl "
            "test5.jsonl test6.jsonl --repo-type dataset --local-dir data/livecodebench",
)
# the files of LiveCodeBench's release_v6 (code_generation_lite's version tag: every release up to v6)
RELEASE_V6_FILES = ("test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl")
PROBLEM_SETS = ("release_v6", "window")


def _iso_date(key: str, value: str) -> date:
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ConfigError(f"config key '{key}' has value {value!r}; allowed: an ISO date YYYY-MM-DD") from None


@dataclass(frozen=True)
class LiveCodeBenchConfig:
    path: str = option("data/livecodebench", "Folder of code_generation_lite test*.jsonl files, or one "
                       "jsonl/json/parquet file; see docs/evals/user_data.md.")
    problems: str = option(
        "release_v6", "Which problems are evaluated. 'release_v6' (reference code: eval_offline/suites/"
        "livecodebench.py:59-71, 170-171 load lcb_runner's release_v6 with no date filter, lcb_runner pinned at 28fef95 "
        "in scripts/setup_lcb.sh): every problem of test.jsonl, test2.jsonl ... test6.jsonl (a folder must hold all "
        "six; a single file is taken whole). 'window' (ours before issue 40): the problems with start_date <= "
        "contest_date < end_date, the Qwen3 cards' 'LiveCodeBench v6 (25.02-25.05)'.", choices=PROBLEM_SETS)
    start_date: str = option("2025-02-01", "problems 'window': first contest date included (ISO). Default = LCB v6 as "
                             "in the Qwen3 cards (25.02-25.05).")
    end_date: str = option("2025-05-01", "problems 'window': first contest date excluded (ISO).")
    samples: int = option(1, "Programs sampled per problem (n); pass@1 = mean fraction passing. Paper: Pass@1.", min=1)
    max_problems: int = option(0, "0 = every problem of the window; else a fixed subsample of N (hash order of the "
                               "question ids) for toy runs.", min=0)
    temperature: float = temperature_option(0.2, "eval_offline/configs/games.yaml:22")
    top_p: float = top_p_option(0.95, "eval_offline/configs/games.yaml:23")
    top_k: int = top_k_option(0, "not set")
    max_new_tokens: int = max_new_tokens_option(16384, "eval_offline/configs/games.yaml:24")

    def __post_init__(self):
        start = _iso_date("eval.livecodebench.start_date", self.start_date)
        end = _iso_date("eval.livecodebench.end_date", self.end_date)
        if end <= start:
            raise ConfigError(f"config key 'eval.livecodebench.end_date' has value {self.end_date!r}; it must be "
                              f"after eval.livecodebench.start_date ({self.start_date!r})")


# ------------------------------------------------------------------------------------------------ data
class PlainUnpickler(pickle.Unpickler):
    """Loads only pickle's built-in primitives (str, bytes, list, dict, numbers); every global is refused.

    Without ``find_class`` no callable can be reached, so REDUCE/BUILD/INST/OBJ/EXT opcodes (the ways a
    pickle runs code) all fail before anything is called.
    """

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name} from a data file")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refusing a persistent id in a data file")


def _plain(value, depth: int = 0) -> bool:
    """Only str/bytes/list/dict (and the scalars inside test records) may come out of a data pickle."""
    if depth > 16:
        return False
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return True
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def decode_tests(raw, where: str) -> list[dict]:
    """LCB test cases from a JSON string, a list, or base64(zlib(pickle(JSON string))); ConfigError if bad."""
    value = raw
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            try:
                blob = base64.b64decode(value, validate=False)
                inflater = zlib.decompressobj()
                data = inflater.decompress(blob, MAX_DECOMPRESSED)
                if inflater.unconsumed_tail:
                    raise ConfigError(f"{where}: test cases decompress to more than {MAX_DECOMPRESSED} bytes")
                value = PlainUnpickler(io.BytesIO(data)).load()
            except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as exc:
                raise ConfigError(f"{where}: test cases are neither JSON nor base64(zlib(pickle)) of JSON "
                                  f"({type(exc).__name__}: {str(exc)[:200]})") from None
            if not _plain(value):
                raise ConfigError(f"{where}: the test-case pickle holds {type(value).__name__}, expected a JSON string")
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{where}: unpickled test cases are not JSON ({exc.msg})") from None
    def well_formed(test) -> bool:
        return isinstance(test, dict) and isinstance(test.get("input"), str) and isinstance(test.get("output"), str)

    if not isinstance(value, list) or not all(well_formed(t) for t in value):
        raise ConfigError(f"{where}: test cases must be a list of {{'input': str, 'output': str, 'testtype': ...}}")
    return value


def _metadata(raw, where: str) -> dict:
    if raw in (None, ""):
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except (TypeError, json.JSONDecodeError):
        raise ConfigError(f"{where}: metadata is not a JSON object string: {str(raw)[:100]!r}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: metadata is not a JSON object: {str(raw)[:100]!r}")
    return value


def contest_day(raw, where: str) -> date:
    if isinstance(raw, datetime):
        return raw.date()
    if isinstance(raw, date):
        return raw
    try:
        return date.fromisoformat(str(raw).strip()[:10])
    except ValueError:
        raise ConfigError(f"{where}: contest_date {str(raw)[:40]!r} is not an ISO date") from None


def _problem_key(question_id) -> str:
    text = str(question_id).strip().replace("/", "_")
    return f"{int(text):05d}" if text.isdigit() else text


# ------------------------------------------------------------------------------------------------ prompt + code
def user_prompt(question: str, starter_code: str) -> str:
    """LCB's generic question template."""
    prompt = f"### Question:\n{question}\n\n"
    if starter_code:
        prompt += f"### Format: {WITH_STARTER}\n```python\n{starter_code}\n```\n\n"
    else:
        prompt += f"### Format: {WITHOUT_STARTER}\n```python\n# YOUR CODE HERE\n```\n\n"
    return prompt + "### Answer: (use the provided format with backticks)\n\n"


FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)


def extract_program(reply: str) -> str:
    """The last ```python (or ```py / ```python3) block; else the last untagged block; else ''."""
    blocks = [(lang.lower(), body) for lang, body in FENCE.findall(reply)]
    for wanted in (("python", "py", "python3"), ("",)):
        chosen = [body for lang, body in blocks if lang in wanted]
        if chosen:
            return chosen[-1]
    return ""


# ------------------------------------------------------------------------------------------------ benchmark
@register_benchmark
class LiveCodeBench(Benchmark):
    name = "livecodebench"
    config_cls = LiveCodeBenchConfig
    offline = False

    def __init__(self, config):
        super().__init__(config)
        self._rows: dict = {}  # problem key -> raw record (tests are decoded when played)

    def check_data(self) -> None:
        path = require_path(self.config.path, DATA)
        if self.config.problems == "release_v6" and path.is_dir():
            self._release_files(path)

    def _release_files(self, path: Path) -> list[Path]:
        """release_v6's six files in folder ``path``; ConfigError naming the missing ones and both keys."""
        missing = [name for name in RELEASE_V6_FILES if not (path / name).is_file()]
        if missing:
            raise ConfigError(f"config key '{DATA.key}': {str(path)!r} lacks {missing}; eval.livecodebench.problems "
                              f"'release_v6' needs {list(RELEASE_V6_FILES)} (download: {DATA.example}), or set it to "
                              f"'window' (allowed: {list(PROBLEM_SETS)}) to evaluate a contest-date window")
        return [path / name for name in RELEASE_V6_FILES]

    def _candidates(self, path: Path):
        """The records to choose from: release_v6's six files of a folder (all required), a single file whole, or
        (problems 'window') every supported file of the folder."""
        if self.config.problems == "window" or not path.is_dir():
            yield from iter_rows(path, DATA)
            return
        for file in self._release_files(path):
            yield from iter_rows(file, DATA)

    def problems(self) -> list[dict]:
        """Records of the problem set (``problems``), keyed by problem key, after the configured subsample."""
        path = require_path(self.config.path, DATA)
        start, end = date.fromisoformat(self.config.start_date), date.fromisoformat(self.config.end_date)
        window = self.config.problems == "window"
        chosen = {}
        for index, row in enumerate(self._candidates(path)):
            where = f"config key '{DATA.key}': {str(path)!r} record {index}"
            required = ("question_id", "question_content", "contest_date", "public_test_cases")
            missing = [c for c in required if c not in row]
            if missing:
                raise ConfigError(f"{where} lacks column(s) {missing}; expected {DATA.expected}")
            day = contest_day(row["contest_date"], where)
            if not window or start <= day < end:
                chosen.setdefault(_problem_key(row["question_id"]), row)  # a problem in two files counts once
        if not chosen and not window:
            raise ConfigError(f"config key '{DATA.key}': {str(path)!r} holds no problem")
        if not chosen:
            raise ConfigError(f"config key '{DATA.key}': no problem in {str(path)!r} has a contest_date in "
                              f"[eval.livecodebench.start_date={self.config.start_date}, "
                              f"eval.livecodebench.end_date={self.config.end_date}); check the dates or the files")
        keys = subsample(sorted(chosen), self.config.max_problems, "livecodebench")
        self._rows = {key: chosen[key] for key in keys}
        return [self._rows[key] for key in keys]

    def items(self) -> list[Item]:
        self.problems()
        width = len(str(self.config.samples - 1))
        items = []
        for key, row in self._rows.items():
            where = f"config key '{DATA.key}': problem {key}"
            payload = {
                "problem": key,
                "title": str(row.get("question_title") or ""),
                "question": str(row["question_content"]),
                "starter_code": str(row.get("starter_code") or ""),
                "func_name": str(_metadata(row.get("metadata"), where).get("func_name") or ""),
                "platform": str(row.get("platform") or ""),
                "contest_date": contest_day(row["contest_date"], where).isoformat(),
            }
            for sample in range(self.config.samples):
                items.append(Item(f"{key}/{sample:0{width}d}", {**payload, "sample": sample},
                                  group=str(row.get("difficulty") or "")))
        return items

    def tests(self, key: str) -> list[dict]:
        """Public then private test cases of a problem (decoded on demand; they can be large)."""
        if key not in self._rows:
            self.problems()
        row = self._rows[key]
        where = f"config key '{DATA.key}': problem {key}"
        tests = decode_tests(row["public_test_cases"], where + " public_test_cases")
        if row.get("private_test_cases") not in (None, ""):
            tests += decode_tests(row["private_test_cases"], where + " private_test_cases")
        return tests

    def play(self, items, ctx: EvalContext) -> list[ItemRecord]:
        prompts = [[{"role": "system", "content": SYSTEM_MESSAGE},
                    {"role": "user", "content": user_prompt(item.payload["question"], item.payload["starter_code"])}]
                   for item in items]
        seeds = [ctx.item_seed(item.id) for item in items]
        conversations = sample_replies(ctx, prompts, seeds)
        cache: dict = {}
        records = []
        for item, messages, seed, conversation in zip(items, prompts, seeds, conversations):
            reply = reply_text(conversation)
            program = extract_program(reply)
            key = item.payload["problem"]
            if key not in cache:
                cache = {key: self.tests(key)}  # items of one problem are adjacent (sorted ids)
            verdict = grade_program(ctx.pool, program, item.payload["func_name"], cache[key], seed)
            records.append(ItemRecord(
                id=item.id, prompt_hash=prompt_hash(render(ctx, messages)), response=reply,
                score=1.0 if verdict["passed"] else 0.0, turns=len(conversation.replies), tokens=conversation.tokens,
                group=item.group, extra={"problem": key, "sample": item.payload["sample"],
                                         "stop_reason": conversation.stop_reason, **verdict},
            ))
        return records

    def aggregate(self, records) -> list[Metric]:
        """``pass@1``: mean over problems of the fraction of passing samples; also per difficulty."""
        def per_problem(rows):
            by_problem: dict = {}
            for record in rows:
                by_problem.setdefault(record.extra["problem"], []).append(record.score)
            return [sum(s) / len(s) for s in by_problem.values()]

        metrics = [mean_metric("pass@1", per_problem(records))]
        for group in sorted({r.group for r in records if r.group}):
            metrics.append(mean_metric(f"pass@1/{group}", per_problem([r for r in records if r.group == group])))
        return metrics
