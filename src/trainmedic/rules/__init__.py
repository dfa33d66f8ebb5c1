"""Rules: pure functions from a RunRecord (or a data frame, for DAT) to findings.

No rule does I/O or imports a framework; each family lives in its own module
with the catalogue entries (and their documentation) of its codes.
"""
