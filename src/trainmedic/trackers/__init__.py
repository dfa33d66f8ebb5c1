"""Experiment trackers (MLflow, Weights & Biases), both ways.

- Into the tracker: inside a supervised trainer, `learned` records which tracker
  run the script itself opened (`mlflow.start_run`, `MlflowClient.create_run`,
  `wandb.init`); after the run ends, `attach` puts the diagnosis on that run
  (tags or summary keys, findings.json and report.html, a killed run marked
  failed). Nothing is sent anywhere the script did not log to.
- From the tracker: `trainmedic diagnose mlflow://RUN_ID` and a W&B offline run
  folder read the metric histories through the trackers' own clients
  (`trainmedic.diagnose.mlflow_runs`, `trainmedic.diagnose.wandb_runs`).

mlflow and wandb are optional extras, imported only where a run uses them.
"""
