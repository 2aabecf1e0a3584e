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

    def eval_file(self, run: str, step: int | str) -> str:
        """``step`` may be the wildcard pattern ``"{step}"``; numbers are zero-padded to 6 digits."""
        label = f"{int(step):06d}" if str(step).isdigit() else step
        return f"{self.root}/runs/{run}/eval/step_{label}.json"

    @property
    def results_table(self) -> str:
        return f"{self.root}/tables/results.csv"

    def run_table(self, run: str) -> str:
        return f"{self.root}/tables/{run}_run.md"

    def training_figure(self, run: str) -> str:
        return f"{self.root}/figures/{run}_training.pdf"

    def log(self, rule: str) -> str:
        return f"{self.root}/logs/{rule}.log"

    def benchmark(self, rule: str) -> str:
        return f"{self.root}/benchmarks/{rule}.tsv"
