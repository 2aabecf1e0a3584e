"""Every output path of the pipeline, in one place. Paths derive from config, never from timestamps."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResultPaths:
    root: str = "results"

    @property
    def library_check_json(self) -> str:
        return f"{self.root}/library/check.json"

    @property
    def library_report_md(self) -> str:
        return f"{self.root}/library/report.md"

    @property
    def sandbox_bench_json(self) -> str:
        return f"{self.root}/bench/sandbox.json"

    def model_dir(self, card: str) -> str:
        return f"{self.root}/models/{card}"

    def corpus(self, kind: str) -> str:
        return f"{self.root}/corpus/{kind}.jsonl"

    def run_dir(self, run: str) -> str:
        return f"{self.root}/runs/{run}"

    def run_summary(self, run: str) -> str:
        return f"{self.root}/runs/{run}/summary.json"

    def run_metrics(self, run: str) -> str:
        return f"{self.root}/runs/{run}/metrics.jsonl"

    def checkpoint(self, run: str, step: int) -> str:
        return f"{self.root}/runs/{run}/checkpoints/step_{int(step):06d}"

    def eval_file(self, run: str, step: int | str, benchmark: str) -> str:
        """One evaluation result; ``step`` may be the wildcard ``"{step}"``, numbers are zero-padded to 6 digits.

        The item records go beside it (``step_NNNNNN.items.jsonl``, see ``spade.evals.base.items_path``).
        """
        label = f"{int(step):06d}" if str(step).isdigit() else step
        return f"{self.root}/runs/{run}/eval/{benchmark}/step_{label}.json"

    def fidelity_file(self, run: str, step: int | str) -> str:
        """The designer-fidelity report of one checkpoint (``spade fidelity``); ``step`` as in :meth:`eval_file`."""
        label = f"{int(step):06d}" if str(step).isdigit() else step
        return f"{self.root}/runs/{run}/fidelity/step_{label}.json"

    def selected_checkpoint(self, run: str) -> str:
        return f"{self.root}/runs/{run}/selected_checkpoint.json"

    @property
    def eval_throughput_json(self) -> str:
        return f"{self.root}/bench/eval_throughput.json"

    @property
    def results_table(self) -> str:
        return f"{self.root}/tables/results.csv"

    @property
    def suite_table(self) -> str:
        """The tidy table of the training-time and the final-checkpoint evaluations (``eval_toy``)."""
        return f"{self.root}/tables/suite.csv"

    def run_table(self, run: str) -> str:
        return f"{self.root}/tables/{run}_run.md"

    def training_figure(self, run: str) -> str:
        return f"{self.root}/figures/{run}_training.pdf"

    def env_cards_figure(self, run: str) -> str:
        """The environment cards of a run across training (the paper's Figure 2; ``spade.paper.env_cards``); the PNG and
        the provenance sidecar go beside it."""
        return f"{self.root}/figures/{run}_env_cards.pdf"

    def env_cards_page(self, run: str) -> str:
        return f"{self.root}/env_cards/{run}/cards.html"

    def env_browser_page(self, run: str) -> str:
        """The page of every environment the run designed or rejected."""
        return f"{self.root}/env_cards/{run}/environments.html"

    @property
    def integration_openrlhf_dir(self) -> str:
        """The CPU integration run of the OpenRLHF path (``spade.rlhf.cpu.run``): model, runs, logs, report."""
        return f"{self.root}/integration/openrlhf_cpu"

    @property
    def preflight_dir(self) -> str:
        """The cluster preflight (``spade.rlhf.preflight``): versions, model, run, records, report."""
        return f"{self.root}/preflight"

    def rehearsal_report(self, run: str) -> str:
        """One rehearsal run's checks and signal (``spade.rlhf.rehearsal``, configs/rehearsal.yaml)."""
        return f"{self.root}/rehearsal/{run}.json"

    @property
    def rehearsal_table(self) -> str:
        """Every rehearsal run with its steps, checks and signal, and the verdict."""
        return f"{self.root}/tables/rehearsal.md"

    def log(self, rule: str) -> str:
        return f"{self.root}/logs/{rule}.log"

    def benchmark(self, rule: str) -> str:
        return f"{self.root}/benchmarks/{rule}.tsv"
