"""The one git reader: the commit and state of the code a run or a checkpoint comes from."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

_GIT_TIMEOUT_S = 5.0


def git_state(where: Path) -> dict[str, Any] | None:
    """Commit and dirty state of the repository holding `where`; None outside git (or without git).

    One git process (git is most of the supervisor's environment capture): `status
    --porcelain=v2 --branch` gives the commit, the branch and every change. Untracked
    entries are counted as git lists them by default, a new folder once: walking every file
    of an untracked `data/` or `runs/` (`--untracked-files=all`) can cost seconds per run.
    The root is the nearest folder holding `.git` (a folder, or the file of a worktree or
    submodule), as git finds it; rev-parse is asked only where GIT_DIR / GIT_WORK_TREE move it.
    """
    found = _worktree_root(where)
    # run at the root: porcelain v2 gives paths relative to the folder git runs in
    status = _git(
        Path(found) if found else where, "status", "--porcelain=v2", "--branch", "--untracked-files=normal"
    )
    if status is None:
        return None
    commit: str | None = None
    branch: str | None = None
    modified: list[str] = []
    untracked = 0
    for line in status.splitlines():
        if line.startswith("# branch.oid "):
            commit = None if line[13:] == "(initial)" else line[13:]
        elif line.startswith("# branch.head "):
            branch = "HEAD" if line[14:] == "(detached)" else line[14:]
        elif line.startswith("? "):
            untracked += 1
        elif line[:2] in ("1 ", "2 ", "u "):
            # "1 XY sub mH mI mW hH hI path", "2 ... X<score> path<TAB>orig", "u ... h1 h2 h3 path"
            fields = {"1": 8, "2": 9, "u": 10}[line[0]]
            modified.append(line.split(" ", fields)[-1].split("\t")[0])
    root = found or _git(where, "rev-parse", "--show-toplevel")
    if root is None:
        return None
    return {
        "root": root,
        "commit": commit,
        "branch": branch if commit is not None else None,  # an unborn branch, as rev-parse saw it
        "dirty": bool(modified),
        "modified": modified[:200],
        "untracked": untracked,
    }


def _worktree_root(where: Path) -> str | None:
    if "GIT_DIR" in os.environ or "GIT_WORK_TREE" in os.environ:
        return None
    here = where.resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return str(folder)
    return None


def _git(where: Path, *args: str) -> str | None:
    try:
        result = subprocess.run(
            ["git", "-C", str(where), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip("\n") if result.returncode == 0 else None  # porcelain lines start with a space


def code_commit(cwd: str | os.PathLike[str] | None = None) -> str | None:
    """The git commit of the code being run (with `+dirty` when tracked files have changes);
    None outside git, without git, or before the first commit. A checkpoint records it."""
    state = git_state(Path.cwd() if cwd is None else Path(cwd))
    if state is None or state["commit"] is None:
        return None
    return str(state["commit"]) + ("+dirty" if state["dirty"] else "")
