"""`trainmedic check data TRAIN [--val V] [--test T] [--serving S] --label COL ...`."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from trainmedic.cli.options import fail_on_option, findings_exit_code, format_option, write_ci_format
from trainmedic.errors import UsageError
from trainmedic.report.text import make_console, render_text

if TYPE_CHECKING:
    from trainmedic.data.finetune import FineTuneReport
    from trainmedic.data.runner import DataReport


@click.command("data")
@click.argument("train", type=click.Path(path_type=str))
@click.option("--val", help="Validation split (file, or folder with --images).")
@click.option("--test", help="Test split.")
@click.option("--serving", help="Serving/inference data (schema and drift only; no label needed).")
@click.option("--label", help="Label column (for --images: the label column of a CSV of paths).")
@click.option("--group", help="Group column (patient, user, session): must not span splits.")
@click.option("--time", "time_", metavar="COL", help="Time column: later splits must be later.")
@click.option(
    "--id", "id_", metavar="COL", help="Row id column: left out of the features, used to name rows."
)
@click.option("--ignore", multiple=True, metavar="COL", help="Column to leave out (repeatable).")
@click.option("--images", is_flag=True, help="Splits are image folders (class per folder) or CSVs of paths.")
@click.option(
    "--path-column", default="path", show_default=True, help="With --images: the CSV column of paths."
)
@click.option(
    "--tokenizer",
    metavar="PATH",
    help="Fine-tuning data: a local tokenizer folder (its chat template, token counts).",
)
@click.option(
    "--max-length",
    type=click.IntRange(min=1),
    metavar="N",
    help="Fine-tuning data, with --tokenizer: the trainer's max_length (completions cut at it).",
)
@click.option("--no-label-noise", is_flag=True, help="Skip the label-noise model (the slowest check).")
@click.option(
    "--engine",
    type=click.Choice(["auto", "pandas", "duckdb", "spark"]),
    default="auto",
    show_default=True,
    help="pandas loads the splits; duckdb streams files from disk; spark runs Spark jobs; "
    "auto: pandas while the files fit --memory-budget, else duckdb.",
)
@click.option(
    "--memory-budget",
    metavar="SIZE",
    help="Memory the check may use, at least 512MiB (2GiB, 512MB); default: "
    "$TRAINMEDIC_MEMORY_BUDGET, else half the available memory.",
)
@click.option("--spark-master", metavar="URL", help="With --engine spark: the master (default local[*]).")
@click.option(
    "--spark-conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="With --engine spark: a Spark setting (repeatable).",
)
@format_option
@fail_on_option
def command(  # click passes every parameter by keyword
    *,
    train: str,
    val: str | None,
    test: str | None,
    serving: str | None,
    label: str | None,
    group: str | None,
    time_: str | None,
    id_: str | None,
    ignore: Sequence[str],
    images: bool,
    path_column: str,
    tokenizer: str | None,
    max_length: int | None,
    no_label_noise: bool,
    engine: str,
    memory_budget: str | None,
    spark_master: str | None,
    spark_conf: Sequence[str],
    fmt: str,
    fail_on: str,
) -> int:
    """Leakage, duplicates, labels, imbalance, missing values, schema and drift of a dataset.

    Fine-tuning data (JSONL or Parquet with `messages`, `prompt`/`completion`,
    `chosen`/`rejected` or `text` rows): contamination, empty completions, identical and
    length-biased preference pairs, the chat template (--tokenizer, --serving), double BOS
    (--tokenizer) and truncation (--tokenizer with --max-length).
    """
    report: DataReport | FineTuneReport
    if finetune_data(
        train, tokenizer, max_length, images=images, tabular=(label, group, time_, id_, *ignore)
    ):
        from trainmedic.data.finetune import check_finetune_report

        report = check_finetune_report(train, val, test, serving, tokenizer=tokenizer, max_length=max_length)
    elif images:
        if serving is not None or group or time_ or id_ or ignore:
            raise click.UsageError("--images takes TRAIN, --val, --test, --label and --path-column only")
        from trainmedic.data.image_checks import check_images_report

        report = check_images_report(train, val, test, label=label, path_column=path_column)
    else:
        from trainmedic.data.runner import check_report

        report = check_report(
            train,
            val,
            test,
            serving,
            label=label,
            group=group,
            time=time_,
            id=id_,
            ignore=ignore,
            label_noise=not no_label_noise,
            engine=engine,
            memory_budget=memory_budget,
            spark_master=spark_master,
            spark_conf=spark_settings(spark_conf),
        )
    out = sys.stdout
    if write_ci_format(report.findings, fmt):
        return findings_exit_code(report.findings, fail_on)
    if fmt == "json":
        document = {"summary": report.summary.to_dict(), "findings": [f.to_dict() for f in report.findings]}
        out.write(json.dumps(document, indent=2, allow_nan=False, default=str) + "\n")
    else:
        console = make_console(out)
        console.print(f"trainmedic check data: {train}", style="bold", markup=False)
        for line in report.summary.lines():
            console.print(f"  {line}", markup=False)
        console.print()
        render_text(report.findings, out)
    return findings_exit_code(report.findings, fail_on)


def finetune_data(
    train: str, tokenizer: str | None, max_length: int | None, *, images: bool, tabular: Sequence[str | None]
) -> bool:
    """TRAIN is fine-tuning data (by its keys, or read as such with --tokenizer/--max-length);
    a table, or a split with a tabular role (--label, --group, --time, --id, --ignore), is not."""
    from trainmedic.data.finetune import is_finetune_file

    asked = tokenizer is not None or max_length is not None
    if asked and (images or any(tabular)):
        raise UsageError(
            "--tokenizer and --max-length are for fine-tuning data (JSONL/Parquet of messages, "
            "prompt/completion or preference pairs), not with --images, --label, --group, --time, "
            "--id or --ignore"
        )
    if images or any(tabular):
        return False
    if is_finetune_file(train, asked=asked):
        return True
    if asked:
        raise UsageError(
            f"{train}: --tokenizer and --max-length expect a .jsonl or .parquet file of fine-tuning "
            "rows ('messages', 'prompt' and 'completion', 'chosen' and 'rejected', or 'text')"
        )
    return False


def spark_settings(pairs: Sequence[str]) -> dict[str, str]:
    """--spark-conf KEY=VALUE, repeated, as a dict; anything else is a usage error."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--spark-conf {pair!r}: expected KEY=VALUE, e.g. spark.executor.memory=4g")
        settings[key.strip()] = value
    return settings
