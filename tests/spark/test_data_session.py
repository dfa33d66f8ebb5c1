"""Starting Spark for a check: master URLs, the Java version, local settings (no JVM needed)."""

from __future__ import annotations

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
