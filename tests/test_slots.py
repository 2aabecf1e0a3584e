"""slot_dict: the stored form of an environment slot (spade.core.slots)."""

from dataclasses import asdict

from spade.core.slots import EnvSlot, slot_dict


def test_slot_dict_equals_asdict_and_copies_the_designer_sample():
    sample = {"token_ids": [1, 2, 3], "loss_mask": [0, 1, 1], "rollout_logprobs": [0.0, -0.5, -0.25]}
    slot = EnvSlot("s00000-x-0", "pattern_recognition", 0, "designer", valid=True, hint_returns=[1.0, 0.0],
                   designer_sample=sample)
    data = slot_dict(slot)
    assert data == asdict(slot)
    assert data["designer_sample"]["token_ids"] is not sample["token_ids"]  # a copy: the state never aliases the slot
    sample["token_ids"].append(4)
    assert data["designer_sample"]["token_ids"] == [1, 2, 3]
    assert slot_dict(EnvSlot("e", "s", 0, "designer")) == asdict(EnvSlot("e", "s", 0, "designer"))
