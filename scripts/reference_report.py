"""Regenerate data/reference/cells.csv and the summary table in data/reference/README.md.

    .venv/bin/python scripts/reference_report.py

Predicts every published cell (``distsim.published.reference``) with the
simulator's mechanisms and without them, writes each cell's signed error to
``data/reference/cells.csv`` and prints the per-source summary (median and
largest |error|, before and after) as a Markdown table for the README.
"""

from __future__ import annotations

import csv
from pathlib import Path

from distsim.published.reference import compare_all, error_summary

OUT = Path(__file__).resolve().parents[1] / "data" / "reference" / "cells.csv"


def main() -> None:
    comparisons = compare_all()
    with OUT.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["file", "table", "row", "column", "calibration", "published", "predicted", "error",
                         "predicted_before", "error_before"])
        for c in comparisons:
            writer.writerow([c.file, c.cell.table, c.cell.dataset, c.cell.column, c.cell.calibration,
                             f"{c.cell.published:g}", f"{c.cell.predicted:.4g}", f"{c.cell.error:+.4f}",
                             f"{c.before.predicted:.4g}", f"{c.before.error:+.4f}"])
    print(f"wrote {OUT} ({len(comparisons)} cells)\n")
    print("| source | cells | median |error| | largest |error| | mean |error| | before: median | before: largest |")
    print("|---|---|---|---|---|---|---|")
    for name, s in error_summary(comparisons).items():
        print(f"| {name} | {s['cells']} | {s['median']:.1%} | {s['max']:.1%} | {s['mean']:.1%} | "
              f"{s['median_before']:.1%} | {s['max_before']:.1%} |")


if __name__ == "__main__":
    main()
