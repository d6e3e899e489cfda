"""Where the Spark engine runs: this machine's Java and PySpark, a master that answers, the process's
one SparkSession, the packages and a variant's module shipped to its executors, and a standalone
cluster on this machine for tests and benchmarks. Each thing missing is a `SparkUnavailable` that
says what to install or start. The search itself is `checker.spark_engine`.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Iterator

__all__ = ["SparkUnavailable", "check_java", "check_master", "free_port", "get_spark", "on_this_machine",
           "package_zip", "preflight", "ship_packages", "ship_variant", "standalone_cluster", "variant_failure"]

INSTALL_JAVA = "install Java 17 (apt-get install openjdk-17-jre-headless)"
CONNECT_TIMEOUT = 3.0  # seconds to reach a spark:// master's port
EXECUTOR_TIMEOUT = 60.0  # seconds for a standalone master to give us an executor


class SparkUnavailable(RuntimeError):
    """Spark cannot run here; the message says what to install or start."""


# ------------------------------------------------------------------ sessions
def _no_pyspark(error: ImportError) -> SparkUnavailable:
    return SparkUnavailable(f"PySpark is not installed ({error}): {install_pyspark()}")


def install_pyspark() -> str:
    """The line that installs PySpark for this hwm: the `spark` extra of the installed package, or of the
    checkout it runs from (an editable install)."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file():
        return f"pip install -e '{root}[spark]'"
    return "pip install 'hwm[spark]'"


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _start_master_hint(host: str, port: int) -> str:
    spark_class = _spark_home() / "bin" / "spark-class" if _pyspark_present() else "spark-class"
    return (f"start one with `{spark_class} org.apache.spark.deploy.master.Master --host {host} --port {port}` "
            f"and a worker with `{spark_class} org.apache.spark.deploy.worker.Worker spark://{host}:{port}`")


def _pyspark_present() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return True


def _java_version(java: str) -> int | None:
    """The major version `java -version` reports (8 for 1.8), None if unreadable."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> None:
    """SparkUnavailable unless a Java runtime recent enough for the installed PySpark exists."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={java_home} has no bin/java" if java_home else "no `java` on PATH"
        raise SparkUnavailable(f"Spark needs a Java runtime and found none ({where}): {INSTALL_JAVA}")
    import pyspark

    needed = 17 if int(pyspark.__version__.split(".")[0]) >= 4 else 8
    version = _java_version(java)
    if version is not None and version < needed:
        raise SparkUnavailable(f"PySpark {pyspark.__version__} needs Java {needed} or newer, but {java} is "
                               f"Java {version}: {INSTALL_JAVA}")


def parse_master(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a spark:// URL (several for a ZooKeeper HA master); [] otherwise."""
    if not master.startswith("spark://"):
        return []
    pairs = []
    for part in master[len("spark://"):].split(","):
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            raise SparkUnavailable(f"cannot read master {master!r}: expected spark://HOST:PORT")
        pairs.append((host, int(port)))
    return pairs


def check_master(master: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """SparkUnavailable unless some host:port of a spark:// master accepts a TCP connection."""
    pairs = parse_master(master)
    if not pairs:
        return
    errors = []
    for host, port in pairs:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except socket.timeout:
            errors.append(f"{host}:{port} timed out after {timeout:g}s")
        except OSError as e:
            errors.append(f"{host}:{port} {e.strerror or e}")
    host, port = pairs[0]
    raise SparkUnavailable(f"no Spark master at {master} ({'; '.join(errors)}): {_start_master_hint(host, port)}")


def on_this_machine(master: str) -> bool:
    """Whether Spark master `master` (local, local[N], local[*]) runs its executors on this machine: they
    see this machine's files and load the compiled kernels built here."""
    return master.startswith("local")


def preflight(master: str = "local[*]") -> None:
    """SparkUnavailable, naming what to install or start, unless PySpark imports, a Java runtime is there
    and a spark:// master answers: what `get_spark` checks, in milliseconds, before a command spends any
    time (a kernel build, a search) on a run Spark would then refuse."""
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        raise _no_pyspark(e) from None
    check_master(master)
    check_java()


_session = None  # the process's one SparkSession (a JVM holds one SparkContext)
_shipped: set = set()  # applicationIds that already have our packages; (id, spec, digest) a variant


def get_spark(master: str = "local[*]", *, conf: dict[str, str] | None = None,
              executor_timeout: float = EXECUTOR_TIMEOUT):
    """The process's SparkSession for `master`, created on first use and reused after.

    JVM start-up is slow, so one session serves every check of the process; a
    session's master cannot change, so asking for another master is an error.
    """
    global _session
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise _no_pyspark(e) from None
    check_master(master)
    if _session is not None and _session.sparkContext._jsc is not None:
        current = _session.sparkContext.master
        if current != master:
            raise SparkUnavailable(f"this process already runs Spark on {current}; a JVM holds one master, "
                                   f"so check against {master} from a new process")
        return _session
    check_java()
    # Executors must run the driver's Python (the model is pickled code) ...
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName("hwm")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"]))
    if parse_master(master):
        builder = builder.config("spark.executor.memory", "512m")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as e:  # py4j and JVM start-up failures arrive as many types
        raise SparkUnavailable(f"could not start Spark on {master}: {e}") from e
    session.sparkContext.setLogLevel("ERROR")
    if parse_master(master):
        _wait_for_executor(session, master, executor_timeout)
    _session = session
    return session


def _wait_for_executor(session, master: str, timeout: float) -> None:
    """A standalone master that has no free worker accepts the application and waits forever."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if len(session.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) >= 2:
                return  # the driver is listed too
        except Exception:  # noqa: BLE001 - the context died: the master refused or never answered
            pass
        if time.monotonic() > deadline:
            session.stop()
            host, port = parse_master(master)[0]
            raise SparkUnavailable(
                f"the Spark master at {master} gave this application no executor within {timeout:g}s "
                f"(is it a Spark master, with a worker that has free cores and memory?): start a worker with "
                f"`{_spark_home() / 'bin' / 'spark-class'} org.apache.spark.deploy.worker.Worker "
                f"spark://{host}:{port}`")
        time.sleep(0.2)


def package_zip() -> bytes:
    """`hwm/__init__.py` and the packages the executors import, as a zip laid out as the installed package,
    read from wherever they are imported from: an installed package or a checkout (whose folders
    `checker/`, `model/`, `properties/` install as `hwm.checker`, ...)."""
    import importlib

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(importlib.import_module("hwm").__file__, "hwm/__init__.py")
        for package in ("checker", "model", "properties"):
            folder = Path(importlib.import_module(f"hwm.{package}").__file__).parent
            for path in sorted(folder.rglob("*.py")):  # subpackages too (checker/fast)
                z.write(path, f"hwm/{package}/" + path.relative_to(folder).as_posix())
    return buffer.getvalue()


def ship_packages(spark) -> None:
    """Executors import `hwm.checker`, `hwm.model` and `hwm.properties`: send them as one zip laid out
    as the installed package (`hwm/checker/...`), so it works on any cluster, with or without hwm."""
    sc = spark.sparkContext
    if sc.applicationId in _shipped:
        return
    data = package_zip()
    folder = Path(tempfile.mkdtemp(prefix="hwm-pyfiles-"))
    atexit.register(shutil.rmtree, folder, True)  # Spark serves it to executors from here while this process runs
    target = folder / f"hwm-{hashlib.sha256(data).hexdigest()[:12]}.zip"
    target.write_bytes(data)
    sc.addPyFile(str(target))
    _shipped.add(sc.applicationId)


def variant_failure(error: BaseException) -> BaseException | None:
    """The variant's own error (`model.variant`: a hook that failed, a file an executor could not load)
    that an executor raised, which Spark hands the driver inside its own exception; None for another."""
    import re

    from hwm.model.variant_code import VariantError
    from hwm.properties.rules import HookError

    # HookError is defined in properties.rules (the replicas raise it too), VariantError in model.variant_code.
    found = re.search(r"hwm\.(?:model\.variant_code|properties\.rules)\.(HookError|VariantError): ([^\n]*)",
                      str(error))
    if found is None:
        return None
    return (HookError if found.group(1) == "HookError" else VariantError)(found.group(2).strip())


def ship_variant(spark, protocol) -> None:
    """A variant's protocol pickles by its spec and loads again on each executor (`model.variant.reloaded`),
    which may not see the user's file or module: send it (`model.variant_source.shipment`), once per
    application and file."""
    from hwm.model.variant_source import shipment

    key = (spark.sparkContext.applicationId, getattr(type(protocol), "spec", None),
           getattr(type(protocol), "digest", None))
    if key[1] is None or key in _shipped:
        return
    path = shipment(protocol)
    if path is not None:
        spark.sparkContext.addPyFile(str(path))
    _shipped.add(key)


# ------------------------------------------------ a standalone cluster on this machine
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_status(webui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as response:
        return json.load(response)


@contextlib.contextmanager
def standalone_cluster(workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 90.0,
                       log_dir: str | None = None) -> Iterator[str]:
    """A Spark standalone master and `workers` workers on 127.0.0.1; yields the master URL.

    For tests and benchmarks: the processes run from the installed PySpark, each in
    its own process group, and are killed (with their executors) on exit.
    """
    check_java()
    if not _pyspark_present():
        raise SparkUnavailable(f"PySpark is not installed: {install_pyspark()}")
    spark_class = str(_spark_home() / "bin" / "spark-class")
    logs = Path(log_dir or tempfile.mkdtemp(prefix="hwm-standalone-"))
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SPARK_HOME=str(_spark_home()), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, SPARK_WORKER_DIR=str(logs / "work"))
    # Like workers on other machines, these see no checkout: the engine ships its code.
    env.pop("PYTHONPATH", None)
    port, webui = free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []

    def launch(name: str, args: list[str]) -> None:
        out = open(logs / f"{name}.log", "wb")
        processes.append(subprocess.Popen([spark_class, *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True))
        out.close()

    try:
        launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                          "--webui-port", str(webui)])
        for k in range(workers):
            launch(f"worker{k + 1}", ["org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1",
                                      "--cores", str(cores), "--memory", memory,
                                      "--webui-port", str(free_port())])
        deadline = time.monotonic() + timeout
        alive = 0
        while True:
            for p in processes:
                if p.poll() is not None:
                    raise SparkUnavailable(f"a standalone process exited with {p.returncode}; logs in {logs}")
            try:
                status = _cluster_status(webui)
                alive = sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")
            except OSError:
                pass
            if alive >= workers:
                break
            if time.monotonic() > deadline:
                raise SparkUnavailable(f"{alive} of {workers} workers registered with {master} within "
                                       f"{timeout:g}s; logs in {logs}")
            time.sleep(0.5)
        yield master
    finally:
        for p in reversed(processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in processes:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
