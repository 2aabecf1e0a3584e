"""Reporting: the shared code behind the tables, figures and quoted numbers, and the run reports.

Each paper artifact's own logic lives in its script under ``paper/scripts/`` (named after its output); this package
holds what several scripts share:

- run folders into tidy tables and provenance: ``report``; the toy-vs-paper scale labels: ``scale``;
- tables: ``table_runs`` (the run mapping and our results), ``tables`` (reported-vs-ours rendering),
  ``benchmark_tables`` (what Tables 1, 2, 3 and 6 share), ``env_tables`` (what Tables 7 and 8 share);
- figures, numbers and the environment-source comparison: ``figures``, ``numbers``, ``comparison``;
- ``deps``: which of these modules a script depends on (the ``lib`` input of its rule);
- the environment cards and browser: ``env_cards`` (the command) with ``env_cards_archive``, ``env_cards_content``,
  ``env_cards_figure`` and ``env_cards_pages`` (what it reads, says, draws and writes);
- the captions of Snakemake's report: ``workflow_report``.
"""
