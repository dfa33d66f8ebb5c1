"""Many `trainmedic check data` commands in ONE interpreter (transformers and the tokenizers
loaded once): the tests/data/test_finetune.py scenarios.

    python run_checks.py SCENARIOS_JSON RESULTS_JSON

SCENARIOS_JSON maps a name to the command's arguments (after `trainmedic`); each runs through
the CLI's own entry (`trainmedic.cli.main.main`, what the console script calls), its stdout and
stderr captured. RESULTS_JSON maps each name to its exit status, stdout and stderr.
"""

import contextlib
import io
import json
import sys
from pathlib import Path

from trainmedic.cli.main import main

scenarios = json.loads(Path(sys.argv[1]).read_text())
results = {}
for name, args in scenarios.items():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(args)
    results[name] = {"returncode": status, "stdout": out.getvalue(), "stderr": err.getvalue()}
Path(sys.argv[2]).write_text(json.dumps(results))
