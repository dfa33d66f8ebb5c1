"""Spark: data checks computed as Spark jobs, and Spark MLlib guards under `trainmedic run`.

Nothing here imports pyspark at package import: each module that needs it imports it
itself, so `trainmedic` without the `spark` extra never pays for (or fails on) it.
"""
