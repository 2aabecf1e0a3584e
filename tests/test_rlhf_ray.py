"""The coordinator as the real Ray actor (Ray 2.55 on this CPU, no stand-in): created from inside a vLLM-engine-like
actor that sits in a placement group, as OpenRLHF places its engines (issue 15, item 8).

OpenRLHF schedules each vLLM engine actor into a placement group bundle with child-task capture on; the first executor
call then creates the coordinator from inside that actor. Captured into the engine's bundle, whose CPU the engine
itself holds, the coordinator would never be scheduled and every executor call would wait forever.
"""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (setup.sh installs ray==2.55.0)")

from spade.config import load_config  # noqa: E402
from spade.rlhf.launch import prepare_run  # noqa: E402


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False, configure_logging=False,
             _temp_dir=str(tmp_path_factory.mktemp("ray", numbered=True)))
    yield ray
    ray.shutdown()


def test_coordinator_is_created_outside_the_engines_placement_group(local_ray, tiny_model_dir, tmp_path):
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    config = load_config(overrides={"model_card": "tiny-random", "run_name": "ray-probe", "corpus": {"enabled": False},
                                    "selfplay": {"active_skills": 1, "envs_per_skill": 2, "total_steps": 2},
                                    "train": {"global_batch": 4}, "sandbox": {"workers": 1}})
    run_dir = tmp_path / "run"
    prepare_run(config, run_dir, tiny_model_dir)

    @ray.remote(num_cpus=1)
    class EngineLike:
        """Stands where OpenRLHF's vLLM engine actor stands; the executor code running in it makes the coordinator."""

        def settings(self, run_dir: str) -> tuple:
            from spade.rlhf.coordinator import ray_coordinator

            handle = ray_coordinator(run_dir)
            config = ray.get(handle.settings.remote(), timeout=60)
            pg = ray.util.get_current_placement_group()
            return config.run_name, pg is not None

    group = placement_group([{"CPU": 1}])
    ray.get(group.ready(), timeout=60)
    try:
        engine = EngineLike.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            group, placement_group_capture_child_tasks=True)).remote()
        name, in_group = ray.get(engine.settings.remote(str(run_dir)), timeout=120)
        assert (name, in_group) == ("ray-probe", True)  # the engine is in its group, the coordinator answered
        ray.kill(engine)
    finally:
        remove_placement_group(group)
