"""The command line: one module per command; parse -> call -> render -> exit code."""
