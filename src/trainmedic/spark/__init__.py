"""Spark: `check data --engine spark` (`data`, `_session`) and the MLlib guards under `trainmedic run`.

pyspark is an optional extra (`pip install 'trainmedic[spark]'`, Java 17 or newer);
every module here imports it lazily, inside the functions that need it.
"""
