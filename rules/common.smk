# Shared helpers: config validation at parse time, the interpreter and the output paths.

import json
import shlex
import sys

from snakemake.exceptions import WorkflowError

from spade import paths
from spade.config import ConfigError, SpadeConfig, resolve_layers
from spade.configtools import from_dict

try:  # recipe < model card < run file and --config overrides; fail before any job runs, naming the key
    SPADE = from_dict(SpadeConfig, resolve_layers(config))
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration: {exc}")

PYTHON = shlex.quote(sys.executable)  # the interpreter snakemake runs in (the project's venv)
CONFIG_JSON = shlex.quote(json.dumps(config, sort_keys=True))  # the merged config, overrides included
OUT = paths.ResultPaths(SPADE.results_dir)


def library_outputs():
    return [OUT.library_check_json, OUT.library_report_md]
