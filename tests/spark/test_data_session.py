"""Starting Spark for a check: master URLs, the Java version, local settings (no JVM needed)."""

from __future__ import annotations

import ast
import socket

import pytest

from trainmedic.errors import UsageError
from trainmedic.spark._session import java_major, local_settings, master_endpoints, require_reachable


@pytest.mark.parametrize(
    ("master", "endpoints"),
    [
        ("spark://head:7077", [("head", 7077)]),
        ("spark://a:7077,b:7078", [("a", 7077), ("b", 7078)]),
        ("spark://head", [("head", 7077)]),
        ("k8s://https://api.example:6443", [("api.example", 6443)]),
        ("k8s://api.example", [("api.example", 443)]),
        ("local[*]", []),
        ("yarn", []),
    ],
)
def test_master_endpoints(master: str, endpoints: list[tuple[str, int]]) -> None:
    assert master_endpoints(master) == endpoints


def test_a_master_url_without_a_valid_port_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"^--spark-master spark://head:port: .*expected spark://HOST:PORT$"):
        master_endpoints("spark://head:port")


def test_a_listening_master_port_passes_and_a_closed_one_names_the_reason() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        require_reachable(f"spark://127.0.0.1:{port}")
    with pytest.raises(UsageError, match=rf"cannot connect \(127\.0\.0\.1:{port}: Connection refused\)$"):
        require_reachable(f"spark://127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("shown", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ("no version here", None),
    ],
)
def test_java_major(shown: str, major: int | None) -> None:
    assert java_major(shown) == major


def test_local_masters_get_two_shuffle_partitions_per_core() -> None:
    assert local_settings("local[3]")["spark.sql.shuffle.partitions"] == "6"
    assert local_settings("local")["spark.sql.shuffle.partitions"] == "2"
    assert local_settings("local[2,4]")["spark.sql.shuffle.partitions"] == "4"


def test_every_test_taking_the_spark_session_is_handed_out_with_the_others() -> None:
    """`make test`'s workers share one local Spark per worker only if its users go to one worker:
    tests/conftest.py hands the files of ONE_UNIT out as one unit."""
    from ..conftest import ONE_UNIT, REPO

    users = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test"):
                continue
            if "spark" in [a.arg for a in node.args.args]:
                users.add(path.relative_to(REPO).as_posix())
    assert users == {path for path, unit in ONE_UNIT.items() if unit == "local Spark"}
