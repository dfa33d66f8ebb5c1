"""Spark: `check data --engine spark` (`data`, `_session`) and MLlib guards under `run` (`_mllib*`).

pyspark is an optional extra (`pip install 'trainmedic[spark]'`, Java 17 or newer). Nothing
here imports pyspark at package import: each module that needs it imports it itself, so
`trainmedic` without the `spark` extra never pays for (or fails on) it.
"""
