"""A throwaway PostgreSQL server for the tests (Python standard library only).

It listens on 127.0.0.1 on a free port, keeps its data in a fresh temporary folder removed when
it stops, and holds one database ``nccl_test`` owned by the role ``nccl`` (allowed to create
databases, so each test can have its own) whose random password reaches the tests only through
the environment (``NCCL_TUNE_TEST_PG_URL``): it is piped to ``psql`` on stdin, never put on a
command line or in a file. TCP connections need that password (SCRAM); the superuser
``postgres`` is reached only through a Unix socket in a folder only its owner can enter.

Uses the machine's ``initdb``, ``pg_ctl`` and ``psql`` (on PATH, else the newest
``/usr/lib/postgresql/*/bin``; on Debian they are installed with apt-get when missing and we are
root). ``initdb`` refuses to run as root, so as root every server command runs as the
``postgres`` user (``runuser -u postgres --``) on a folder it owns.

Command line::

    python tests/pgserver.py run -- CMD ARGS...   # start, run CMD with the URL set, stop; CMD's status
    eval "$(python tests/pgserver.py start)"      # a developer's shell: exports the URL and the folder
    python tests/pgserver.py stop [DIR]           # DIR defaults to $NCCL_TUNE_TEST_PG_DIR

``run`` stops the server whatever CMD does (failure, crash, SIGTERM/SIGHUP, which it passes on
to CMD; Ctrl-C reaches CMD from the terminal) and uses an existing ``NCCL_TUNE_TEST_PG_URL``
instead of starting a server. Only a SIGKILL of ``run`` itself leaves the server running.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

URL_VAR = "NCCL_TUNE_TEST_PG_URL"
DIR_VAR = "NCCL_TUNE_TEST_PG_DIR"
USER, DATABASE = "nccl", "nccl_test"
# Throwaway data: no durability, no statement text in the log (it would hold the password
# if CREATE ROLE ever failed), room for many test connections.
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "log_min_error_statement": "panic",
    "log_statement": "'none'",
}


class PgError(RuntimeError):
    """The server could not be set up, started or stopped; the message says why."""


def _bin_dir() -> Path:
    """Folder of ``initdb``/``pg_ctl``/``psql``; installs Debian's ``postgresql`` when none is found
    and we are root (apt-get, non-interactive). PgError when there is none."""
    for attempt in range(2):
        found = shutil.which("initdb")
        if found and shutil.which("psql", path=str(Path(found).resolve().parent)):
            return Path(found).resolve().parent
        dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2].split(".")[0]))
        if dirs:
            return Path(dirs[-1])
        if attempt or os.geteuid() != 0 or not shutil.which("apt-get"):
            break
        print("pgserver: no PostgreSQL found; installing Debian's postgresql with apt-get", file=sys.stderr)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=False, stdout=subprocess.DEVNULL)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "postgresql"], env=env,
                       check=False, stdout=subprocess.DEVNULL)
    raise PgError("no PostgreSQL server binaries (initdb, pg_ctl, psql): install PostgreSQL "
                  "(Debian: apt-get install postgresql) or set " + URL_VAR)


def _base_dir() -> Path:
    """The temporary folder, or /tmp when we are root and the postgres user could not reach it
    (a private TMPDIR under /root, say)."""
    base = Path(tempfile.gettempdir()).resolve()
    if os.geteuid() == 0 and not all(os.stat(p).st_mode & 0o001 for p in (base, *base.parents)):
        return Path("/tmp")
    return base


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One throwaway server; ``start()`` returns its URL, ``stop()`` removes every trace.

    ``root`` is the temporary folder (``data/`` the cluster, ``sock/`` the superuser's socket,
    ``server.log`` the server's log); ``url`` is
    ``postgresql://nccl:PASSWORD@127.0.0.1:PORT/nccl_test`` once started.
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self.url = ""
        self.port = 0
        self._bin = Path()

    # -- running commands as the server's owner -------------------------------------------
    def _as_owner(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv

    def _run(self, argv: list[str], stdin: str | None = None, timeout: float = 120) -> None:
        proc = subprocess.run(self._as_owner(argv), input=stdin, capture_output=True, text=True, timeout=timeout,
                              cwd=self.root)
        if proc.returncode:
            raise PgError(f"{Path(argv[0]).name} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}"
                          + self._log_tail())

    def _log_tail(self) -> str:
        log = self.root / "server.log" if self.root else None
        if log and log.exists():
            return "\nserver log:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        return ""

    @property
    def data(self) -> Path:
        assert self.root is not None
        return self.root / "data"

    # -- start / stop ------------------------------------------------------------------------
    def start(self) -> str:
        """Create the cluster, start the server, create the role and database; returns the URL.
        PgError (with the server's log) on any failure, after removing what was made."""
        self._bin = _bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="nccl-tune-pg-", dir=_base_dir()))
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self.url

    def _start(self) -> None:
        assert self.root is not None
        (self.root / "sock").mkdir(mode=0o700)
        if os.geteuid() == 0:  # initdb refuses root: the postgres user owns the whole folder
            for path in (self.root, self.root / "sock"):
                shutil.chown(path, "postgres", "postgres")
        self._run([str(self._bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "scram-sha-256",
                   "--auth-local=trust", "-E", "UTF8", "--locale=C", "--no-sync"])
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("".join(f"{k} = {v}\n" for k, v in SETTINGS.items()))
            conf.write(f"unix_socket_directories = '{self.root / 'sock'}'\n")
        for _ in range(3):  # the free port may be taken between the check and the bind
            self.port = _free_port()
            (self.data / "postgresql.auto.conf").write_text(f"port = {self.port}\n")
            if os.geteuid() == 0:
                shutil.chown(self.data / "postgresql.auto.conf", "postgres", "postgres")
            try:
                self._run([str(self._bin / "pg_ctl"), "start", "-D", str(self.data), "-l",
                           str(self.root / "server.log"), "-w", "-t", "60", "-s"])
                break
            except PgError:
                if "could not bind" not in self._log_tail() and "already in use" not in self._log_tail():
                    raise
        else:
            raise PgError("no free port after 3 tries" + self._log_tail())
        password = secrets.token_urlsafe(24)  # URL-safe: no quoting needed in the URL or in SQL
        self._run([str(self._bin / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(self.root / "sock"),
                   "-p", str(self.port), "-U", "postgres", "-d", "postgres"],
                  stdin=f"CREATE ROLE {USER} LOGIN CREATEDB PASSWORD '{password}';\n"
                        f"CREATE DATABASE {DATABASE} OWNER {USER};\n")
        self.url = f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{DATABASE}"

    def stop(self) -> None:
        """Stop the server (immediate shutdown: nothing in it is kept) and remove its folder.
        Safe to call twice, or after a failed start; PgError when the server survives."""
        if self.root is None:
            return
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().split()[0])
            pg_ctl = self._bin / "pg_ctl" if self._bin.name else _bin_dir() / "pg_ctl"
            try:  # waits until the server removed its pid file
                self._run([str(pg_ctl), "stop", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "-s"])
            except (PgError, subprocess.TimeoutExpired):
                _kill(pid)
                if _alive(pid):
                    raise PgError(f"PostgreSQL (pid {pid}) survived stopping; its data is in {self.root}") from None
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def _kill(pid: int) -> None:
    """SIGQUIT (PostgreSQL's immediate shutdown), then SIGKILL after 10 s."""
    for sig, wait_s in ((signal.SIGQUIT, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if not _alive(pid):
            return


def run(argv: list[str]) -> int:
    """Start a server, run ``argv`` with ``NCCL_TUNE_TEST_PG_URL`` set, stop the server; returns
    ``argv``'s exit status (128 + N when killed by signal N). An existing URL is used as is."""
    if os.environ.get(URL_VAR):
        print(f"pgserver: using the server in ${URL_VAR}", file=sys.stderr)
        return subprocess.call(argv)
    server = PgServer()
    t0 = time.monotonic()
    try:
        url = server.start()
    except PgError as exc:
        print(f"pgserver: {exc}", file=sys.stderr)
        return 1
    print(f"pgserver: PostgreSQL on 127.0.0.1:{server.port} (started in {time.monotonic() - t0:.1f} s)",
          file=sys.stderr)
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: object) -> None:
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    saved = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
    saved[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal sent it to CMD too
    try:
        child = subprocess.Popen(argv, env=dict(os.environ, **{URL_VAR: url, DIR_VAR: str(server.root)}),
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        code = child.wait()
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
        t1 = time.monotonic()
        server.stop()
        print(f"pgserver: stopped in {time.monotonic() - t1:.1f} s", file=sys.stderr)
    return 128 - code if code < 0 else code


def main(argv: list[str]) -> int:
    """``run -- CMD...``, ``start`` or ``stop [DIR]`` (see the module docstring)."""
    if argv[:1] == ["run"]:
        cmd = argv[2:] if argv[1:2] == ["--"] else argv[1:]
        if not cmd:
            print("usage: pgserver.py run -- CMD ARGS...", file=sys.stderr)
            return 2
        return run(cmd)
    if argv[:1] == ["start"]:
        server = PgServer()
        try:
            url = server.start()
        except PgError as exc:
            print(f"pgserver: {exc}", file=sys.stderr)
            return 1
        print(f"export {URL_VAR}='{url}' {DIR_VAR}='{server.root}'")
        return 0
    if argv[:1] == ["stop"]:
        root = argv[1] if len(argv) > 1 else os.environ.get(DIR_VAR, "")
        if not root or not Path(root, "data").is_dir():
            print(f"pgserver: no server folder given (argument or ${DIR_VAR})", file=sys.stderr)
            return 2
        try:
            PgServer(Path(root)).stop()
        except PgError as exc:
            print(f"pgserver: {exc}", file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
