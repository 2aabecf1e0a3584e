"""Designer feedback revisions: the chat that returns a validation report to the designer."""

from __future__ import annotations

import pytest
from conftest import GOOD_STEP, env_source

from spade.designer.feedback import MAX_REVISIONS, REASON_ADVICE, feedback_message, revision_chat
from spade.designer.prompts import design_prompt
from spade.envs.validate import REASONS, ValidationConfig, Validator


def test_every_rejection_reason_has_advice():
    assert set(REASON_ADVICE) == set(REASONS)
    assert MAX_REVISIONS == 2


def test_revision_chat_from_a_real_rejection(pool):
    chat = design_prompt("game", "mathematical_reasoning", None, None, None)
    answer = "```python\n" + env_source(GOOD_STEP).replace("return str(self.target)", "return 'x'") + "```"
    report = Validator(pool, ValidationConfig(solution_gate=True)).validate(answer)
    assert report.reason == "solution_failed"
    messages = revision_chat(chat, answer, report.to_dict(), revision=1)
    assert messages[: len(chat)] == chat
    assert [m["role"] for m in messages[len(chat):]] == ["assistant", "user"]
    assert messages[-2]["content"] == answer
    feedback = messages[-1]["content"]
    assert "revision 1 of 2" in feedback and "Reason: solution_failed." in feedback
    assert "episode return 0" in feedback  # the validator's own message
    assert "Checks passed before the failure: intake, load, reset_step_contract, second_seed, determinism." in feedback
    # The second revision extends the first one's chat.
    second = revision_chat(messages, "def broken(:", {"valid": False, "reason": "syntax_error",
                                                        "message": "line 1: invalid syntax"}, revision=2)
    assert len(second) == len(messages) + 2 and "revision 2 of 2" in second[-1]["content"]
    assert "Checks passed before the failure: none." in second[-1]["content"]


def test_long_answers_and_messages_are_trimmed():
    answer = "A" * 600 + "B" * 600
    report = {"valid": False, "reason": "step_failed", "message": "x" * 5000, "changes": ["stripped a fence"]}
    messages = revision_chat([{"role": "user", "content": "design"}], answer, report, 1, answer_chars=200)
    assert messages[1]["content"].startswith("A" * 100) and messages[1]["content"].endswith("B" * 100)
    assert "[1000 characters omitted]" in messages[1]["content"]
    assert "[2000 characters omitted]" in messages[2]["content"]  # 5000 - 3000 kept
    assert "Automatic repairs already applied to your text: stripped a fence." in messages[2]["content"]


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"revision": 3}, "revision must be a whole number in 1..2"),
        ({"revision": 0}, "revision must be"),
        ({"report": {"valid": True, "reason": "ok"}}, "rejected ValidationReport"),
        ({"report": {"valid": False, "reason": "made_up"}}, "not a known rejection reason"),
        ({"max_revisions": 0}, "max_revisions"),
    ],
)
def test_bad_feedback_arguments(kwargs, fragment):
    args = {"report": {"valid": False, "reason": "load_failed", "message": "m"}, "revision": 1, **kwargs}
    with pytest.raises(ValueError, match=fragment):
        feedback_message(**args)


def test_bad_chats():
    report = {"valid": False, "reason": "empty", "message": "no code"}
    with pytest.raises(ValueError, match="non-empty list"):
        revision_chat([], "x", report, 1)
    with pytest.raises(ValueError, match="end with the user turn"):
        revision_chat([{"role": "assistant", "content": "hi"}], "x", report, 1)
    with pytest.raises(ValueError, match="role system/user/assistant"):
        revision_chat([{"role": "tool", "content": "hi"}], "x", report, 1)
