"""Mechanism families after VHD-Play: solved decision models rendered as environments (issue 7, item 3).

Usage::

    from spade.envs.mechanisms import sample_instance, render, admit_instance
    inst = sample_instance("inventory", seed=3)          # theta, u*, u0, plans, provenance
    source = render(inst, "agentic")                     # a normal environment file for our runtime
                                                         # ('written' / 'written_out': parameters shown)
    report = admit_instance(inst, pool)                  # C1-C3 through the sandbox

See docs/MECHANISMS.md.
"""

from spade.envs.mechanisms import (  # noqa: F401
    facility,
    inventory,
    knapsack,
    lp,
    scheduling,
    stopping,
    tardiness,
)
from spade.envs.mechanisms.admission import (
    DRIVERS,
    REASONS,
    AdmissionConfig,
    AdmissionReport,
    admit,
    admit_instance,
    drivers_for,
)
from spade.envs.mechanisms.base import (
    PRESENTATIONS,
    MechanismFamily,
    MechanismInstance,
    SamplerConfig,
    families,
    get_family,
    params_hash,
    register_mechanism,
    sample_instance,
)
from spade.envs.mechanisms.render import WRITTEN_OUT_PLAN, class_name, render, written_out_intro

__all__ = [
    "DRIVERS", "PRESENTATIONS", "WRITTEN_OUT_PLAN", "REASONS", "AdmissionConfig", "AdmissionReport", "MechanismFamily",
    "MechanismInstance", "SamplerConfig", "admit", "admit_instance", "class_name", "drivers_for", "families",
    "get_family", "params_hash", "register_mechanism", "render", "sample_instance",
    "written_out_intro",
]
