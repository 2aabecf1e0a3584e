"""``vllm.inputs.TokensPrompt``: a dict with ``prompt_token_ids`` (stand-in, see ``vllm/__init__``)."""

from typing import TypedDict


class TokensPrompt(TypedDict, total=False):
    prompt_token_ids: list
    multi_modal_data: dict
