"""Reporting: the shared code behind the tables, figures and quoted numbers, and the run reports.

Each paper artifact's own logic lives in its script under ``paper/scripts/`` (named after its output); this
package holds what several scripts share: loading run folders into tidy tables and provenance (``report``), the
paper-artifact helpers (the tables': ``table_runs``, the run mapping and our results; ``tables``, the rendering;
``benchmark_tables`` and ``env_tables``, what Tables 1, 2, 3, 6 and Tables 7, 8 share; then ``figures``,
``numbers``, ``comparison``), the toy-vs-paper scale labels
(``scale``), the environment cards and browser (``env_cards``, the command; what it reads, says, draws and
writes: ``env_cards_archive``, ``env_cards_content``, ``env_cards_figure``, ``env_cards_pages``) and the captions
of Snakemake's report (``workflow_report``).
"""
