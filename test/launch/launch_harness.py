"""One real launch of a saycan_ros launch file (``saycan launch FILE name:=value ...``, i.e.
``launch.LaunchService``) in a process group of its own, with what it prints collected: which
processes it started, which died and what they said."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

_STARTED = re.compile(r"\[INFO\] \[([\w.-]+)\]: process started with pid \[(\d+)\]")
_DIED = re.compile(r"\[ERROR\] \[([\w.-]+)\]: process has died")


class LaunchRun:
    def __init__(self, launch_file: str, arguments=(), env=None):
        self.command = [sys.executable, "-P", "-m", "saycan_ros.cli.main", "launch",
                        launch_file, *arguments]
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env,
                                     start_new_session=True)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def output(self, last: int = 0) -> str:
        with self._lock:
            return "\n".join(self.lines[-last:] if last else self.lines)

    def started(self) -> dict[str, int]:
        """Process name (``planner-4``) -> pid of every process the launch started."""
        with self._lock:
            return {m.group(1): int(m.group(2)) for m in map(_STARTED.search, self.lines) if m}

    def died(self) -> str:
        """Empty while every started process runs (and the launch itself); else what the first
        dead one printed, ending with the launch's line about its death."""
        with self._lock:
            lines = list(self.lines)
        for i, line in enumerate(lines):
            match = _DIED.search(line)
            if match:
                name = match.group(1)
                said = [x for x in lines[:i] if x.startswith(f"[{name}]")][-20:]
                return "\n".join(said + [line])
        if self.proc.poll() is not None:
            return f"the launch exited ({self.proc.returncode}):\n{self.output(40)}"
        return ""

    def wait_for(self, predicate, timeout_s: float, what: str) -> None:
        """Poll ``predicate`` until true; a dead process fails at once with its output."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            dead = self.died()
            if dead:
                raise AssertionError(f"{what}: a launched process died:\n{dead}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not after {timeout_s:g} s\n{self.output(40)}")
            time.sleep(0.2)

    def shutdown(self, timeout_s: float = 60.0) -> tuple[int | None, list[int]]:
        """SIGINT to the launch, as Ctrl-C: its exit status and the pids of the processes it had
        started that are still alive after it exited (killed then, with the whole group)."""
        pids = list(self.started().values())
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        left = [pid for pid in pids if _alive(pid)]
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self._reader.join(5)
        return code, left


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:      # a zombie has exited: only its parent has not reaped it yet
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
