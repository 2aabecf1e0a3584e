"""Registration of every built-in environment (one ``register_env`` call per file).

``levels``: the single-turn puzzles also take ``level="easy"``, smaller instances of the same task (issue 16), meant
for models too small for the standard tier; SmolLM2-135M still won none of 60 easy episodes (docs/FIDELITY.md). The
toy can backfill and evaluate at that level (``selfplay.library_level``, ``eval.heldout_library.level``)."""

from spade.envs.library.registry import LibraryEnv, register_env

# ----- games: mathematical reasoning ----------------------------------------------------------------
register_env(LibraryEnv(
    name="crt_residue_puzzle",
    skill="mathematical_reasoning",
    flavour="puzzle",
    hidden_state=False,
    description="Find the smallest positive number with three or four given remainders (Chinese remainder theorem).",
    levels=("standard", "easy"),
))
register_env(LibraryEnv(
    name="hidden_linear_system",
    skill="mathematical_reasoning",
    flavour="interactive",
    hidden_state=True,
    description="Query weighted sums (all coefficients 1-9) of 3-4 hidden integers, solve the linear system, "
    "submit the values; partial credit per value.",
))

# ----- games: logical deduction ----------------------------------------------------------------------
register_env(LibraryEnv(
    name="knights_knaves_puzzle",
    skill="logical_deduction",
    flavour="puzzle",
    hidden_state=False,
    description="Knights and knaves with 3-5 inhabitants and a unique solution; answer K/N per inhabitant.",
    levels=("standard", "easy"),
))
register_env(LibraryEnv(
    name="secret_profile_probe",
    skill="logical_deduction",
    flavour="interactive",
    hidden_state=True,
    description="Ask a tight budget of yes/no set-membership questions to deduce a hidden object's four "
    "attributes; partial credit per attribute.",
))

# ----- games: spatial reasoning ----------------------------------------------------------------------
register_env(LibraryEnv(
    name="rotating_robot_maze",
    skill="spatial_reasoning",
    flavour="game",
    hidden_state=False,
    description="Drive a robot to the goal of a walled 7x7 grid with relative commands (forward, left, right).",
))
register_env(LibraryEnv(
    name="treasure_distance_scan",
    skill="spatial_reasoning",
    flavour="interactive",
    hidden_state=True,
    description="Locate 2-3 buried treasures with Manhattan-distance scans and a few digs; partial credit "
    "per treasure found.",
))

# ----- games: pattern recognition --------------------------------------------------------------------
register_env(LibraryEnv(
    name="sequence_next_terms",
    skill="pattern_recognition",
    flavour="puzzle",
    hidden_state=False,
    description="Give the next two terms of an integer sequence from one of several rule families.",
    levels=("standard", "easy"),
))
register_env(LibraryEnv(
    name="shift_cipher_probe",
    skill="pattern_recognition",
    flavour="interactive",
    hidden_state=True,
    description="Encrypt short probe words to expose a repeating-key shift cipher, then decode a secret word; "
    "partial credit per letter.",
))

# ----- games: optimization ---------------------------------------------------------------------------
register_env(LibraryEnv(
    name="knapsack_selection",
    skill="optimization",
    flavour="puzzle",
    hidden_state=False,
    description="0/1 knapsack over 6-8 items; any selection reaching the optimal value is accepted.",
    levels=("standard", "easy"),
))
register_env(LibraryEnv(
    name="job_order_game",
    skill="optimization",
    flavour="game",
    hidden_state=False,
    description="Run jobs one per turn under precedence rules to minimise total weighted completion time; "
    "reward = optimal cost / achieved cost.",
))
register_env(LibraryEnv(
    name="oil_field_survey",
    skill="optimization",
    flavour="interactive",
    hidden_state=True,
    description="Pick plots to drill under a cost budget when yields are known only as ranges; three surveys "
    "reveal exact yields; reward = yield / best yield.",
))

# ----- games: causal inference -----------------------------------------------------------------------
register_env(LibraryEnv(
    name="causal_switch_intervention",
    skill="causal_inference",
    flavour="interactive",
    hidden_state=True,
    description="Clamp relays of a hidden forward-ordered OR network to discover its direct links, then declare "
    "them; reward = Jaccard overlap with the true links.",
))
register_env(LibraryEnv(
    name="switch_lamp_log",
    skill="causal_inference",
    flavour="puzzle",
    hidden_state=False,
    description="From a log of switch settings and lamp states, infer which switch drives each lamp and whether "
    "through an inverter.",
    levels=("standard", "easy"),
))

# ----- tool use --------------------------------------------------------------------------------------
register_env(LibraryEnv(
    name="retail_order_support",
    skill="data_retrieval",
    flavour="tool_use",
    hidden_state=False,
    description="Retail orders, missing-value variant: find the customer and the order holding a named item "
    "before cancelling, re-addressing or returning it.",
))
register_env(LibraryEnv(
    name="calendar_planner",
    skill="multi_step_workflows",
    flavour="tool_use",
    hidden_state=False,
    description="Calendar, read-then-write variant: move or create a meeting depending on the calendar, book the "
    "earliest free 2-hour slot, add a reminder, clear an event.",
))
register_env(LibraryEnv(
    name="smart_home_hub",
    skill="tool_selection",
    flavour="tool_use",
    hidden_state=False,
    description="Smart home, with-irrelevant variant: set lights, thermostat and locks found via list_devices, "
    "and decline one request no tool serves.",
))
register_env(LibraryEnv(
    name="bank_account_ops",
    skill="state_modification",
    flavour="tool_use",
    hidden_state=False,
    description="Personal banking, execute variant: transfer, pay a bill, freeze a card and set a savings goal "
    "with the ids the user gives.",
))
