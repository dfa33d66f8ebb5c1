"""DAT: data readiness before training (`trainmedic check data`), one file a finding.

The data checks (`trainmedic.data`: pandas, DuckDB or Spark; images; the input contract) and
the scikit-learn audit measure and send typed evidence; each finding's file decides and
words its own (`judge`, `message`, `fix`).
"""
