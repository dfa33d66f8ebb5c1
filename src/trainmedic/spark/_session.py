"""Get or start the SparkSession a Spark data check runs in, or fail with one line.

A check reuses the SparkSession already running in the process (the one the user's
Spark DataFrames belong to); under `spark-submit` it joins the JVM spark-submit started,
with its `--master` and `--conf`; otherwise it starts one for `--spark-master` (default
`local[*]`: Spark in a JVM child of this process).

Starting Spark can go wrong in ways that end, by default, in a minute of retries and
a Java stack trace; each becomes one `UsageError` line instead:

- pyspark missing: the install command;
- no Java, or Java older than 17: what was found and what Spark needs;
- a `spark://` or `k8s://` master whose port does not answer within
  `CONNECT_TIMEOUT_S`: `--spark-master URL: cannot connect (...)`, before any JVM
  starts (Spark's own client retries for 60 s);
- anything else the JVM reports at start: its last error line.

The driver JVM's console output (its log4j log, progress bars, JDK notices) goes to a
temporary file, removed at exit (`TRAINMEDIC_SPARK_LOG=PATH` keeps it there), so the
terminal shows trainmedic's report only.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from trainmedic.errors import UsageError, install_hint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
CONNECT_TIMEOUT_S = 5.0
JAVA_MAJOR_NEEDED = 17
LOG_ENV = "TRAINMEDIC_SPARK_LOG"
SUBMIT_GATEWAY = "PYSPARK_GATEWAY_PORT"  # set by spark-submit for the Python program it runs
INSTALL_HINT = install_hint("pyspark", "spark")
_STANDALONE_PORT = 7077
_HTTPS_PORT = 443

# Settings of a session trainmedic starts; `--spark-conf` overrides any of them.
_QUIET_SETTINGS = {
    "spark.app.name": "trainmedic check data",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # times in evidence read the same on every machine (and as pandas shows a UTC column)
    "spark.sql.session.timeZone": "UTC",
}
# A local master runs in this machine only: no web UI port to collide with another run,
# and no dependence on how the host name resolves.
_LOCAL_SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
_PANDAS_VERSION_WARNING = "PySpark does not yet fully support pandas"
_PANDAS_COPY_WARNING = "The copy keyword is deprecated"  # pyspark's astype(copy=False) under pandas 3


def require_pyspark() -> None:
    """pyspark is the `spark` extra: say how to get it, not a traceback."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"--engine spark needs pyspark: {INSTALL_HINT}") from exc


def active_session() -> SparkSession | None:
    """The SparkSession already running in this process, if any (never starts one)."""
    require_pyspark()
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def spark_session(master: str | None = None, conf: Mapping[str, str] | None = None) -> SparkSession:
    """The active SparkSession, or a new one on `master` with `conf` (quiet, bounded start)."""
    conf = dict(conf or {})
    active = active_session()
    if active is not None:
        adopt(active, master, conf)
        return active
    if SUBMIT_GATEWAY in os.environ:
        # under spark-submit its JVM is running, and its --master and --conf stand
        if master not in (None, DEFAULT_MASTER):
            raise UsageError(
                f"--spark-master {master}: under spark-submit the master is spark-submit's; "
                "pass it as spark-submit --master"
            )
        return _start("spark-submit", {"spark.ui.showConsoleProgress": "false", **conf})
    master = master or DEFAULT_MASTER
    require_reachable(master)
    settings = {**_QUIET_SETTINGS, **(local_settings(master) if is_local(master) else {}), **conf}
    settings["spark.master"] = master
    return _start(f"--spark-master {master}", settings)


def adopt(session: SparkSession, master: str | None, conf: Mapping[str, str] | None) -> None:
    """Use a session that is already running: `--spark-master` must name its master, and
    `--spark-conf` can change only its runtime (SQL) settings."""
    running = session.conf.get("spark.master", None)
    if master is not None and master != running:
        raise UsageError(
            f"--spark-master {master}: this process already runs Spark on {running}; "
            "omit --spark-master to use it"
        )
    for key, value in (conf or {}).items():
        try:
            session.conf.set(key, value)
        except Exception as exc:  # AnalysisException: a static or core setting
            raise UsageError(
                f"--spark-conf {key}={value}: cannot change it in the running SparkSession "
                f"({first_line(exc)}); set it where that session is created"
            ) from exc


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def local_settings(master: str) -> dict[str, str]:
    """A local master: Spark's 200 shuffle partitions are sized for a cluster; on one machine
    each costs a task and buys nothing, so two per core (`local[N]`, or every core for `*`)."""
    cores = re.fullmatch(r"local\[(\d+)(?:,\d+)?\]", master)
    count = int(cores.group(1)) if cores else (os.cpu_count() or 1) if "*" in master else 1
    return {**_LOCAL_SETTINGS, "spark.sql.shuffle.partitions": str(2 * count)}


def require_reachable(master: str) -> None:
    """A standalone or Kubernetes master must answer on its port within CONNECT_TIMEOUT_S."""
    endpoints = master_endpoints(master)
    reasons = []
    for host, port in endpoints:
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
        else:
            return
    if reasons:
        raise UsageError(f"--spark-master {master}: cannot connect ({'; '.join(reasons)})")


def master_endpoints(master: str) -> list[tuple[str, int]]:
    """(host, port) of every master a URL names: `spark://h1:p1,h2:p2`, `k8s://https://h:p`.
    Local, YARN and other masters name none (YARN's address is in the Hadoop config)."""
    if master.startswith("spark://"):
        hosts = master.removeprefix("spark://").split(",")
        return [_host_port(f"//{h}", _STANDALONE_PORT, master) for h in hosts if h]
    if master.startswith("k8s://"):
        api = master.removeprefix("k8s://")
        return [_host_port(api if "//" in api else f"//{api}", _HTTPS_PORT, master)]
    return []


def _host_port(netloc_url: str, default_port: int, master: str) -> tuple[str, int]:
    parts = urlsplit(netloc_url)
    try:
        port = parts.port or default_port
    except ValueError as exc:
        raise UsageError(f"--spark-master {master}: {exc}; expected spark://HOST:PORT") from exc
    if not parts.hostname:
        raise UsageError(f"--spark-master {master}: no host; expected spark://HOST:PORT")
    return parts.hostname, port


@contextlib.contextmanager
def arrow_enabled(session: SparkSession) -> Iterator[None]:
    """Arrow for toPandas, also in a session trainmedic did not configure (put back after)."""
    key = "spark.sql.execution.arrow.pyspark.enabled"
    before = session.conf.get(key, None)
    session.conf.set(key, "true")
    try:
        yield
    finally:
        if before is None:
            session.conf.unset(key)
        else:
            session.conf.set(key, before)


@contextlib.contextmanager
def quiet_pandas_warnings() -> Iterator[None]:
    """pyspark warns on every pandas conversion that pandas 3 is newer than it was tested
    with, and pandas 3 that pyspark's converters pass `copy=`; the conversions trainmedic
    makes (numbers, text, booleans, timestamps) are unaffected."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PANDAS_VERSION_WARNING, category=FutureWarning)
        warnings.filterwarnings("ignore", message=_PANDAS_COPY_WARNING, category=DeprecationWarning)
        yield


def _start(where: str, settings: Mapping[str, str]) -> SparkSession:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    spark_conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    log = _log_file()
    with quiet_pandas_warnings():
        # under spark-submit the JVM is already there: pyspark joins it
        gateway = None if SUBMIT_GATEWAY in os.environ else _launch_gateway(spark_conf, log)
        try:
            context = SparkContext(conf=spark_conf, gateway=gateway)
        except Exception as exc:  # Py4JJavaError and friends: the JVM refused the settings or master
            raise UsageError(f"{where}: Spark did not start ({_reason(exc, log)})") from exc
        context.setLogLevel("ERROR")
        return SparkSession.builder.getOrCreate()  # registers the session as active and default


def _launch_gateway(spark_conf: object, log: Path) -> object:
    from pyspark.java_gateway import launch_gateway

    with log.open("ab") as sink:
        try:
            return launch_gateway(spark_conf, popen_kwargs={"stdout": sink, "stderr": sink})  # type: ignore[no-untyped-call]
        except Exception as exc:  # JAVA_GATEWAY_EXITED: the JVM never came up
            problem = java_problem()
            if problem is not None:
                raise UsageError(
                    f"--engine spark needs Java {JAVA_MAJOR_NEEDED} or newer: {problem}; install it "
                    "and set JAVA_HOME"
                ) from exc
            raise UsageError(f"--engine spark: the Spark JVM did not start ({_reason(exc, log)})") from exc


def java_problem() -> str | None:
    """Why the Java that Spark would use cannot run it, or None when it looks fine."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if java is None or not Path(java).exists():
        return f"no java at {java}" if home else "no java on PATH and JAVA_HOME is not set"
    try:
        shown = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{java} -version failed ({exc})"
    major = java_major(shown)
    if major is None:
        return f"{java} -version printed no version"
    if major < JAVA_MAJOR_NEEDED:
        return f"{java} is Java {major}"
    return None


def java_major(version_text: str) -> int | None:
    """17 for 'openjdk version "17.0.15"', 8 for 'java version "1.8.0_392"'."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if match is None:
        return None
    first = int(match.group(1))
    return int(match.group(2) or 0) if first == 1 else first


def _log_file() -> Path:
    kept = os.environ.get(LOG_ENV)
    if kept:
        return Path(kept)
    handle, name = tempfile.mkstemp(prefix="trainmedic-spark-", suffix=".log")
    os.close(handle)
    path = Path(name)
    atexit.register(path.unlink, missing_ok=True)
    return path


def _reason(exc: BaseException, log: Path) -> str:
    """The JVM's last ERROR line (it says why: 'All masters are unresponsive!'), else the exception's."""
    with contextlib.suppress(OSError):
        errors = [line for line in log.read_text(errors="replace").splitlines() if " ERROR " in line]
        if errors:
            return errors[-1].split(" ERROR ", 1)[1].strip()
    return first_line(exc)


def first_line(exc: BaseException) -> str:
    """The first non-blank line of an exception's text.

    A py4j error's own text starts "An error occurred while calling o41.parquet.", which names
    nothing: its Java exception's deepest cause says what was wrong ("... is not a Parquet file").
    """
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            while java.getCause() is not None:
                java = java.getCause()
            text = str(java.getMessage() or java.toString())
        except Exception:  # the JVM is gone: the Python text is all there is
            text = str(exc)
    else:
        text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
