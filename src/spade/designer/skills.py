"""Skills, tool-use application domains and task variants of the environment designer (spec section 7).

Everything here is plain data plus three small helpers:

- ``active_skills`` picks the skills whose environments are generated at a regeneration round
  (round-robin, wrapping around the skill list);
- ``sample_variant`` draws a tool-use task variant with weights 3:2:1:1;
- ``sample_domain`` draws one of the ten tool-use application domains uniformly.

The descriptions are ours; they are inserted verbatim into design prompts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from spade.envs.library.registry import GAME_SKILLS, TOOL_USE_SKILLS

__all__ = [
    "DOMAINS",
    "DOMAIN_IDS",
    "Domain",
    "GAME_SKILLS",
    "SKILLS",
    "Skill",
    "TOOL_USE_SKILLS",
    "VARIANTS",
    "VARIANT_IDS",
    "Variant",
    "active_skills",
    "get_domain",
    "get_skill",
    "get_variant",
    "sample_domain",
    "sample_variant",
    "skill_kind",
]


@dataclass(frozen=True)
class Skill:
    id: str  # one of GAME_SKILLS or TOOL_USE_SKILLS
    name: str  # human-readable title
    kind: str  # "game" or "tool_use"
    description: str  # one sentence, used in design prompts


@dataclass(frozen=True)
class Domain:
    id: str
    name: str
    description: str  # entities and typical operations of the domain


@dataclass(frozen=True)
class Variant:
    id: str
    weight: int  # relative sampling weight
    description: str  # what the environment must require of the agent


_GAME_SKILL_LIST = (
    Skill("mathematical_reasoning", "Mathematical Reasoning", "game",
          "Work out quantities by calculation, algebra or number theory and arrive at an exact result."),
    Skill("logical_deduction", "Logical Deduction", "game",
          "Combine stated premises and rules to infer facts that are never given directly."),
    Skill("spatial_reasoning", "Spatial Reasoning", "game",
          "Track positions, directions, shapes and movements in a grid or space, including rotations."),
    Skill("pattern_recognition", "Pattern Recognition", "game",
          "Spot the rule behind a sequence of numbers, symbols or words and extend or apply it."),
    Skill("optimization", "Optimization", "game",
          "Choose among many options the one that scores best while respecting every constraint."),
    Skill("causal_inference", "Causal Inference", "game",
          "Find out which factors actually produce an effect, using observations and interventions."),
)
_TOOL_SKILL_LIST = (
    Skill("api_orchestration", "API Orchestration", "tool_use",
          "Chain several tools so that the output of one call supplies the arguments of the next."),
    Skill("data_retrieval", "Data Retrieval", "tool_use",
          "Look up, filter and combine records through read tools to find exactly the needed values."),
    Skill("state_modification", "State Modification", "tool_use",
          "Change the system's records correctly with write tools: create, update, cancel or delete."),
    Skill("error_recovery", "Error Recovery", "tool_use",
          "Notice a failed or rejected call, work out why from the error text, and retry correctly."),
    Skill("tool_selection", "Tool Selection", "tool_use",
          "Pick the one right tool for each request among similar-looking and irrelevant ones."),
    Skill("multi_step_workflows", "Multi-step Workflows", "tool_use",
          "Carry a multi-part request through in the right order, keeping track of what is done."),
)
SKILLS: dict[str, Skill] = {s.id: s for s in _GAME_SKILL_LIST + _TOOL_SKILL_LIST}
assert tuple(s.id for s in _GAME_SKILL_LIST) == GAME_SKILLS
assert tuple(s.id for s in _TOOL_SKILL_LIST) == TOOL_USE_SKILLS

_DOMAIN_LIST = (
    Domain("retail_orders", "Retail orders",
           "Customers, orders, products and shipments: look up orders, cancel, return or exchange items."),
    Domain("travel_booking", "Flight and hotel booking",
           "Flights, hotel rooms, reservations and passengers: search, book, change or cancel trips."),
    Domain("telecom_accounts", "Telecom accounts",
           "Subscribers, phone lines, plans, data add-ons and bills: change plans, suspend or restore lines."),
    Domain("personal_banking", "Personal banking",
           "Accounts, cards, transfers, payees and bills: move money, pay bills, freeze or unfreeze cards."),
    Domain("calendar_reminders", "Calendar and reminders",
           "Events, attendees, time slots and reminders: schedule, move, invite and remind."),
    Domain("file_system", "File system",
           "Folders, files, sizes and permissions: list, create, move, rename, copy and delete."),
    Domain("shopping_cart", "Shopping cart",
           "Catalogue items, stock, cart lines, coupons and checkout: add, remove, discount and buy."),
    Domain("support_crm", "Support tickets and CRM",
           "Customers, tickets, priorities, agents and notes: open, assign, escalate and close tickets."),
    Domain("smart_home", "Smart home",
           "Rooms, devices, settings and automation rules: switch devices, set levels, create schedules."),
    Domain("task_tracker", "Project and task tracker",
           "Projects, tasks, assignees, labels and due dates: create, assign, relabel and complete tasks."),
)
DOMAINS: dict[str, Domain] = {d.id: d for d in _DOMAIN_LIST}
DOMAIN_IDS = tuple(DOMAINS)

_VARIANT_LIST = (
    Variant("execute", 3,
            "Happy path: every instruction states the ids and values needed, so the agent only has to "
            "call the right tools with the right arguments in the right order."),
    Variant("read_then_write", 2,
            "At least one instruction is conditional on data the agent must first read with a tool "
            "(for example 'if the balance is below X, do A, otherwise do B'); the branch taken depends "
            "on the seed and both branches are reachable."),
    Variant("missing_value", 1,
            "At least one instruction leaves out an id the write tool needs (it names the object by a "
            "description instead); the agent must find the id with a read tool, and calls with a wrong "
            "or guessed id return an error."),
    Variant("with_irrelevant", 1,
            "Exactly one instruction asks for something no tool can do; the agent must call "
            "decline_request(reason) for it instead of misusing another tool, then continue."),
)
VARIANTS: dict[str, Variant] = {v.id: v for v in _VARIANT_LIST}
VARIANT_IDS = tuple(VARIANTS)


def get_skill(skill_id: str) -> Skill:
    if skill_id not in SKILLS:
        raise KeyError(f"unknown skill {skill_id!r}; known skills: {sorted(SKILLS)}")
    return SKILLS[skill_id]


def get_domain(domain_id: str) -> Domain:
    if domain_id not in DOMAINS:
        raise KeyError(f"unknown tool-use domain {domain_id!r}; known domains: {list(DOMAIN_IDS)}")
    return DOMAINS[domain_id]


def get_variant(variant_id: str) -> Variant:
    if variant_id not in VARIANTS:
        raise KeyError(f"unknown tool-use variant {variant_id!r}; known variants: {list(VARIANT_IDS)}")
    return VARIANTS[variant_id]


def skill_kind(skill_id: str) -> str:
    """``"game"`` or ``"tool_use"``: the family a skill belongs to."""
    return get_skill(skill_id).kind


def active_skills(step_index: int, skills: tuple, per_round: int) -> tuple:
    """The skills active at regeneration round ``step_index`` (0, 1, 2, ...), round-robin.

    Round r takes ``per_round`` consecutive skills starting at position ``r * per_round`` of
    ``skills``, wrapping around the end of the list: with 6 skills and 3 per round, rounds alternate
    between the first and the last three; with 6 skills and 4 per round, round 1 is skills 4, 5, 0, 1.
    ``per_round`` larger than the number of skills is clamped to it (every skill once per round).
    """
    skills = tuple(skills)
    if not skills:
        raise ValueError("active_skills needs at least one skill")
    if isinstance(step_index, bool) or not isinstance(step_index, int) or step_index < 0:
        raise ValueError(f"step_index must be a non-negative integer (the regeneration round), got {step_index!r}")
    if isinstance(per_round, bool) or not isinstance(per_round, int) or per_round < 1:
        raise ValueError(f"per_round must be a positive integer, got {per_round!r}")
    count = len(skills)
    per_round = min(per_round, count)
    start = (step_index * per_round) % count
    return tuple(skills[(start + offset) % count] for offset in range(per_round))


def sample_variant(rng: random.Random) -> str:
    """One tool-use task variant id, drawn with weights execute 3 : read_then_write 2 : missing_value 1 :
    with_irrelevant 1."""
    return rng.choices(VARIANT_IDS, weights=[VARIANTS[v].weight for v in VARIANT_IDS], k=1)[0]


def sample_domain(rng: random.Random) -> str:
    """One tool-use application domain id, uniformly."""
    return rng.choice(DOMAIN_IDS)
