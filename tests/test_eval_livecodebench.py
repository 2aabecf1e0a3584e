"""LiveCodeBench: date window, LCB test decoding (restricted unpickling), real sandbox runs, pass@1 by hand."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest

from scripted_backend import ScriptedBackend
from spade.configtools import ConfigError, from_dict
from spade.evals.base import DataMissing, EvalContext, EvalRun, evaluate, items_path
from spade.evals.livecodebench import SYSTEM_MESSAGE, LiveCodeBench, LiveCodeBenchConfig, decode_tests, extract_program
from spade.evals.livecodebench_grading import grade_program, stdio_match

FIXTURES = Path(__file__).parent / "fixtures" / "evals" / "livecodebench"
ADD = "a, b = map(int, input().split())\nprint(a + b)"
SHIFT = "class Solution:\n    def shiftAll(self, nums, k):\n        return [x + k for x in nums]"


def bench(**overrides) -> LiveCodeBench:
    """The fixture (one file, test6.jsonl) read as a contest-date window (problems 'window')."""
    return LiveCodeBench(LiveCodeBenchConfig(**{"path": str(FIXTURES), "problems": "window", **overrides}))


def encode(obj) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(obj))).decode()


@pytest.fixture(scope="module")
def problems():
    b = bench()
    items = b.items()
    return {item.payload["problem"]: (item.payload["func_name"], b.tests(item.payload["problem"])) for item in items}


def test_window_filters_and_ids():
    assert [i.id for i in bench().items()] == ["03901/0", "abc900_a/0", "abc900_b/0"]
    assert len(bench(samples=2).items()) == 6
    wide = bench(start_date="2025-01-01", end_date="2025-05-02").items()
    assert {i.payload["problem"] for i in wide} == {"03901", "abc900_a", "abc900_b", "abc800_a", "abc999_a"}
    assert len(bench(max_problems=2).items()) == 2
    functional = bench().items()[0].payload
    assert functional["func_name"] == "shiftAll" and functional["starter_code"].startswith("class Solution")


def test_release_v6_takes_every_problem_of_its_six_files_without_a_date_filter(tmp_path):
    """problems 'release_v6' (the reference's lcb_runner release_v6, no date filter): old and new problems of
    test.jsonl ... test6.jsonl alike, a file outside the release ignored; a folder missing one of the six is refused,
    naming the files and both keys. 'window' keeps the contest-date window."""
    rows = [json.loads(line) for line in (FIXTURES / "test6.jsonl").read_text().splitlines() if line.strip()]
    old = {**rows[0], "question_id": "abc001_a", "contest_date": "2023-05-07T00:00:00"}
    files = {"test.jsonl": [old], "test2.jsonl": [], "test3.jsonl": [], "test4.jsonl": [], "test5.jsonl": [],
             "test6.jsonl": rows,
             "test7.jsonl": [{**rows[0], "question_id": "abc999_z", "contest_date": "2024-01-01T00:00:00"}]}
    for name, records in files.items():
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    release = LiveCodeBench(LiveCodeBenchConfig(path=str(tmp_path))).items()  # the schema default: release_v6
    every = {_key(r) for r in rows} | {"abc001_a"}
    assert {item.payload["problem"] for item in release} == every
    window = LiveCodeBench(LiveCodeBenchConfig(path=str(tmp_path), problems="window")).items()
    assert {item.payload["problem"] for item in window} == {"03901", "abc900_a", "abc900_b"}
    (tmp_path / "test3.jsonl").unlink()
    with pytest.raises(ConfigError, match=r"eval\.livecodebench\.path.*lacks \['test3\.jsonl'\].*"
                                          r"eval\.livecodebench\.problems 'release_v6'.*'window'"):
        LiveCodeBench(LiveCodeBenchConfig(path=str(tmp_path))).items()
    with pytest.raises(ConfigError, match=r"lacks \['test3\.jsonl'\]"):  # before any model loads
        LiveCodeBench(LiveCodeBenchConfig(path=str(tmp_path))).check_data()
    with pytest.raises(ConfigError, match=r"eval\.livecodebench\.problems.*'all'.*release_v6.*window"):
        from_dict(LiveCodeBenchConfig, {"problems": "all"}, "eval.livecodebench")


def _key(row: dict) -> str:
    from spade.evals.livecodebench import _problem_key

    return _problem_key(row["question_id"])


def test_private_tests_decoded(problems):
    func_name, tests = problems["abc900_a"]
    assert func_name == "" and [t["input"] for t in tests] == ["1 2\n", "10 -4\n", "1000000000000 1\n"]
    assert [t["output"] for t in problems["03901"][1]] == ["[3, 4, 5]", "[]", "[-6]"]


class Boom:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.makedirs, (self.marker,))


def test_malicious_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(ConfigError, match="refusing to load global"):
        decode_tests(encode(Boom(str(marker))), "test")
    assert not marker.exists()
    with pytest.raises(ConfigError, match="refusing to load global"):  # a JSON string wrapped in a global call
        decode_tests(encode(json.loads), "test")
    with pytest.raises(ConfigError, match="expected a JSON string"):
        decode_tests(encode({1, 2}), "test")
    assert decode_tests(encode('[{"input": "1", "output": "2"}]'), "t") == [{"input": "1", "output": "2"}]


def test_sandbox_verdicts(pool, problems, tmp_path):
    assert pool.level == "bwrap"  # the hostile programs below must never run with weaker isolation
    func_name, tests = problems["abc900_a"]
    grade = lambda program, name=func_name, cases=tests: grade_program(pool, program, name, cases, 3)
    assert grade(ADD)["passed"]
    assert grade("print(sum(map(int, open(0).read().split())))")["passed"]  # LCB also feeds open(0)
    assert grade("if __name__ == '__main__':\n    " + ADD.replace("\n", "\n    ") + "\n    exit(0)")["passed"]
    wrong = grade("a, b = map(int, input().split())\nprint(a - b)")
    assert not wrong["passed"] and wrong["status"] == "wrong_answer" and wrong["tests_passed"] == 0
    late = grade("a, b = map(int, input().split())\nprint(a + b if a < 100 else 0)")
    assert not late["passed"] and late["tests_passed"] == 2  # stops at the first failing test, as LCB
    looping = grade("while True:\n    pass")
    assert not looping["passed"] and looping["status"] == "timeout"
    marker = tmp_path / "made_by_shell"
    shell = grade(f"import os\nprint(3 if os.system('touch {marker}') == 0 else -1)")
    assert not shell["passed"] and not marker.exists()
    before = hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()
    vandal = grade("open('/etc/passwd', 'w').write('x')\n" + ADD)
    assert not vandal["passed"] and vandal["status"] == "runtime_error"
    assert hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest() == before
    assert grade("")["status"] == "no_code" and grade("def broken(:")["status"] == "compile_error"


def test_functional_and_float_comparison(pool, problems):
    func_name, tests = problems["03901"]
    assert grade_program(pool, SHIFT, func_name, tests, 1)["passed"]
    as_tuple = SHIFT.replace("[x + k for x in nums]", "tuple(x + k for x in nums)")
    assert grade_program(pool, as_tuple, func_name, tests, 1)["passed"]  # a top-level tuple counts as a list
    nested = SHIFT.replace("[x + k for x in nums]", "[(x + k,) for x in nums]")
    assert not grade_program(pool, nested, func_name, tests, 1)["passed"]
    _, halves = problems["abc900_b"]
    assert grade_program(pool, "print(int(input()) / 2)", "", halves, 1)["passed"]  # 2.5 == 2.50 as Decimals
    assert not grade_program(pool, "print(int(input()) // 2)", "", halves, 1)["passed"]


def test_large_input_and_output_travel_in_chunks(pool):
    line = "7 " * 200_000
    case = {"input": line + "\n", "output": line.strip() + "\n", "testtype": "stdin"}
    assert grade_program(pool, "print(input().strip())", "", [case], 1)["passed"]
    assert not grade_program(pool, "print(input().strip() + ' 8')", "", [case], 1)["passed"]
    wide = "\u00e9\u4e2d\"" * 150_000  # non-ASCII and quotes: JSON-in-JSON escaping at its largest
    case = {"input": wide + "\n", "output": wide + "\n", "testtype": "stdin"}
    assert grade_program(pool, "print(input())", "", [case], 1)["passed"]


def test_comparison_and_extraction_by_hand():
    assert stdio_match("1 2\n3  \n\n", "1 2\n3") and stdio_match("0.50", "0.5") and not stdio_match("1\n2", "1 2")
    assert not stdio_match("abc", "abd") and not stdio_match("1e400", "2e400")
    reply = "Idea:\n```text\nnot code\n```\n```python\nprint(1)\n```\nthen\n```python\nprint(2)\n```\nDone."
    assert extract_program(reply) == "print(2)\n"
    assert extract_program("```\nprint(3)\n```") == "print(3)\n" and extract_program("print(4)") == ""


REPLIES = {  # per problem (a phrase of its statement), one reply per sample, in order
    "Print A+B": [f"Here it is:\n```python\n{ADD}\n```", "```python\nwhile True:\n    pass\n```"],  # pass, timeout
    "N/2": ["```python\nprint(int(input()) // 2)\n```", "No code."],  # wrong, no code
    "k added": [f"```python\n{SHIFT}\n```",
                "```python\n" + SHIFT.replace("[x + k for x in nums]", "tuple(x + k for x in nums)") + "\n```"],
}


class SharedPool:
    """The session pool, kept open when ``evaluate`` closes its context."""

    def __init__(self, pool):
        self.pool = pool

    def __getattr__(self, name):
        return getattr(self.pool, name)

    def close(self):
        pass


def test_pass_at_1_by_hand(tiny_model, pool, tmp_path):
    seen: dict = {}

    def reply(prompt, seed):
        key = next(k for k in REPLIES if k in prompt)
        index = seen.get(key, 0)
        seen[key] = index + 1
        return REPLIES[key][index]

    backend = ScriptedBackend(tiny_model[1], reply)
    ctx = EvalContext(backend, seed=2, benchmark="livecodebench", max_new_tokens=64,
                      pool_factory=lambda: SharedPool(pool))
    result = evaluate(bench(samples=2), ctx, EvalRun("toy", 0, tmp_path / "lcb.json", 8), progress=False)
    rows = {row["metric"]: row for row in result["rows"]}
    # problems: 03901 (easy) 2/2 pass, abc900_a (easy) 1/2, abc900_b (medium) 0/2
    assert rows["pass@1"]["value"] == pytest.approx(0.5) and rows["pass@1"]["n"] == 3
    assert rows["pass@1/easy"]["value"] == pytest.approx(0.75) and rows["pass@1/medium"]["value"] == 0.0
    records = {r["id"]: r for r in map(json.loads, items_path(tmp_path / "lcb.json").read_text().splitlines())}
    assert records["abc900_a/1"]["extra"]["status"] == "timeout"
    assert records["abc900_b/1"]["extra"]["status"] == "no_code"
    prompts = backend.calls[0][0]
    assert all(SYSTEM_MESSAGE in p for p in prompts)
    assert sum("def shiftAll(self, nums: List[int], k: int)" in p for p in prompts) == 2
    assert sum("# YOUR CODE HERE" in p for p in prompts) == 4


def test_missing_data_and_bad_dates(tmp_path):
    with pytest.raises(DataMissing) as caught:
        LiveCodeBench(LiveCodeBenchConfig(path=str(tmp_path / "absent"))).check_data()
    message = str(caught.value)
    assert "eval.livecodebench.path" in message and "livecodebench/code_generation_lite" in message
    assert "test6.jsonl" in message and "private_test_cases" in message
    with pytest.raises(ConfigError, match=r"eval\.livecodebench\.end_date"):
        from_dict(LiveCodeBenchConfig, {"start_date": "2025-05-01", "end_date": "2025-02-01"}, "eval.livecodebench")
    with pytest.raises(ConfigError, match=r"no problem .*eval\.livecodebench\.start_date=2030-01-01"):
        bench(start_date="2030-01-01", end_date="2030-02-01").items()
    with pytest.raises(ConfigError, match=r"eval\.livecodebench\.start_date.*YYYY-MM-DD"):
        from_dict(LiveCodeBenchConfig, {"start_date": "Feb 2025"}, "eval.livecodebench")
