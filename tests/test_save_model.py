"""spade.inference.models.save_model: the same files as save_pretrained, without importing deepspeed (issue 48)."""

import importlib.util
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                reason="deepspeed is not installed: save_pretrained never imports it here")

SCRIPT = """
import filecmp, json, sys
import accelerate.utils.other as accelerate_other
from spade.inference.models import load_model, save_model
model, _ = load_model(sys.argv[1])
probe = accelerate_other.is_deepspeed_available
save_model(model, sys.argv[2] + "/ours", safe_serialization=True)
imported_by_ours = "deepspeed" in sys.modules
restored = accelerate_other.is_deepspeed_available is probe
model.save_pretrained(sys.argv[2] + "/theirs", safe_serialization=True)
imported_by_theirs = "deepspeed" in sys.modules
save_model(model, sys.argv[2] + "/after", safe_serialization=True)  # deepspeed imported: accelerate's test runs
names = ["config.json", "generation_config.json", "model.safetensors"]
same = [filecmp.cmp(f"{sys.argv[2]}/ours/{n}", f"{sys.argv[2]}/{d}/{n}", shallow=False) for d in ("theirs", "after")
        for n in names]
print(json.dumps({"ours": imported_by_ours, "theirs": imported_by_theirs, "restored": restored, "same": same}))
"""


def test_save_model_writes_what_save_pretrained_writes_without_importing_deepspeed(tiny_model_dir, tmp_path):
    # a fresh interpreter: another test of this process may have imported deepspeed already
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tiny_model_dir), str(tmp_path)], capture_output=True,
                          text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["theirs"], "save_pretrained no longer imports deepspeed: save_model has nothing left to avoid"
    assert not result["ours"] and result["restored"]
    assert all(result["same"])
