"""Spark: `check data --engine spark` (`data`, `_session`) and MLlib guards under `run` (`_mllib*`).

pyspark is an optional extra (`pip install pyspark`, or `pip install -e '.[spark]'` in
trainmedic's checkout; Java 17 or newer). Nothing here imports pyspark at package import:
each module that needs it imports it itself, so `trainmedic` without the `spark` extra never
pays for (or fails on) it.
"""
