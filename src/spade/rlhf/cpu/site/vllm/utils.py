"""``vllm.utils.random_uuid`` (stand-in, see ``vllm/__init__``)."""

import uuid


def random_uuid() -> str:
    return uuid.uuid4().hex
