"""What the benchmarks read about a server's processes: who they are, their CPU and memory,
and (with `--profile`) where their CPU goes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
PY_SPY = Path(sys.executable).parent / "py-spy"


def pids_under(root: int) -> list[int]:
    """A process's descendants (for Parley's launcher: daphne, the worker, redis-server)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / TICKS


def _memory_kb(pid: int, path: str, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_mb(pids: list[int]) -> float:
    """Resident memory, each process counting the pages it shares with others in full."""
    return sum(_memory_kb(pid, "status", "VmRSS:") for pid in pids) / 1024


def pss_mb(pids: list[int]) -> float:
    """Proportional memory: a page shared by n processes counts 1/n in each, so the sum is
    what the processes together take from the machine."""
    return sum(_memory_kb(pid, "smaps_rollup", "Pss:") for pid in pids) / 1024


def name_of(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return str(pid)
    words = [word.decode(errors="replace") for word in argv if word]
    for known in ("celery", "config.web", "redis-server", "config.launcher"):
        if any(known in word for word in words):
            return known.removeprefix("config.")
    return Path(words[0]).name if words else str(pid)


@contextmanager
def profiled(pids: list[int], folder: Path | None, label: str):
    """With a folder: py-spy samples every Python process of `pids` meanwhile, 200 times a
    second, the thread holding the GIL (the one computing in Python; waiting threads release
    it), without pausing the process: one collapsed-stack file per process
    (`label-name-pid.txt`, readable by speedscope or flamegraph.pl)."""
    if folder is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    spies = []
    for pid in pids:
        name = name_of(pid)
        if name == "redis-server":
            continue
        out = folder / f"{label}-{name}-{pid}.txt"
        spies.append(subprocess.Popen(
            [str(PY_SPY), "record", "--pid", str(pid), "--rate", "200", "--format", "raw",
             "--output", str(out), "--threads", "--gil", "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))  # fmt: skip
    time.sleep(0.5)  # py-spy attaches
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)
        for spy in spies:
            spy.wait(30)
