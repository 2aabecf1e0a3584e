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

    def log(self, rule: str) -> str:
        return f"{self.root}/logs/{rule}.log"

    def benchmark(self, rule: str) -> str:
        return f"{self.root}/benchmarks/{rule}.tsv"

    def rejected(self, run: str) -> str:
        return f"{self.root}/{run}/rejected"
