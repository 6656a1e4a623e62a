"""The residency arbiter: how much memory this process's brains may hold, and which brain closes when
they hold more (seed 001, "The pool, and the arbiter under it").

- **The budget is derived, never configured**: the memory limit this process runs under (the
  smallest ``memory.max`` / ``memory.limit_in_bytes`` on its own control group or any group above
  it, v2 or v1), else the machine's total; less this process's resident set at start, capped by the
  kernel's availability figure; a fifth held back. With nothing published it is floored at
  ``FLOOR_BYTES`` and says so. ``BRAINY_POOL_BUDGET_BYTES`` overrides it, and the log names the
  number it replaced.
- **The charge is resident memory** (``VmRSS`` less the baseline at start), read on every tick for
  the price of a small file; a store's size on disk is never counted.
- **Which brain closes** is ranked by what each holds (its engine counters, ``mechanics.footprint``,
  plus its files' pages in memory from ``/proc/self/smaps``, read only when a close has to be ranked),
  times how long it has been idle, over how often it is asked for. The counted shares are scaled to
  resident bytes by the ratio of the two at the resident figure's highest (``scale``: a new peak means
  the allocator had nothing freed left to reuse, so what the counters miss there is real). A pass that
  closes several subtracts each one's share before choosing the next, and stops once what the brains
  hold fits under ``LOW_WATER`` of the budget, leaving room for the next admission and for what a background
  build borrows (not once the resident excess is covered: the resident figure falls late or not at all,
  the allocator keeping freed memory for the next admission, and past the fit closing more frees nothing). After a pass that closed, glibc's
  ``malloc_trim`` hands free pages back (``give_back``; nothing on another libc). A brain with a door in flight is never closed; the only open brain is never closed
  for budget (``overBudgetAdmissions``, once per episode).
- **Idle windows** come from each brain's own cadence (``IDLE_CADENCES`` mean intervals), never
  below ``IDLE_FLOOR_SECONDS`` nor above ``IDLE_CAP_SECONDS``: idleness alone never closes a brain
  inside the floor; memory pressure does.

The arbiter decides; the pool (``brainy/host/pool.py``) evicts: a clean close that flushes and keeps
the writer lease, so readmission is an attach the next door pays, replaying nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from brainy.doors.mechanics import footprint

log = logging.getLogger("brainy.arbiter")

OVERRIDE = "BRAINY_POOL_BUDGET_BYTES"
FLOOR_BYTES = 256 << 20  # the budget when neither a control group nor the kernel publishes a figure
HELD_BACK = 5  # a fifth of the room is held back
UNLIMITED = 1 << 60  # a v1 "no limit" is a page-rounded 2**63 - 1; anything this large is none
IDLE_FLOOR_SECONDS = 60.0  # a door buys a minute of residency outright
IDLE_CAP_SECONDS = 3600.0
IDLE_CADENCES = 8  # a brain idle for this many of its own mean intervals has gone quiet
TICK_SECONDS = 1.0
LOW_WATER = 0.9  # a pass over budget closes until the brains hold this share of it, at most
SCALE_CAP = 4.0  # the resident figure over the counted holdings is believed up to this ratio


# -- the budget --------------------------------------------------------------------------------------------


@dataclass
class Budget:
    """The derived budget and how it was derived (the ``pool`` block of ``GET /v1/health``)."""

    budget_bytes: int
    limit_source: str
    limit_bytes: int | None
    available_bytes: int | None
    baseline_bytes: int
    floored: bool = False
    overridden: bool = False

    def derivation(self, rss: int) -> dict[str, Any]:
        return {
            "limitSource": self.limit_source,
            "limitBytes": self.limit_bytes,
            "availableBytes": self.available_bytes,
            "rssBytes": rss,
            "baselineBytes": self.baseline_bytes,
        }


def _read_int(path: Path) -> int | None:
    """A control-group limit file's number; None for ``max``, an absent or unreadable file."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    value = int(text)
    return None if value >= UNLIMITED else value


def cgroup_limit(proc: Path = Path("/proc"), cgroup_fs: Path = Path("/sys/fs/cgroup")) -> tuple[int, str] | None:
    """The smallest memory limit on this process's control group or any above it, with where it was read
    (``cgroup2:<group>`` or ``cgroup1:<group>``); None when no group limits memory."""
    try:
        lines = (proc / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return None
    found: list[tuple[int, str]] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, group = parts
        if controllers == "":  # v2: one unified hierarchy
            base, limit_file, kind = cgroup_fs, "memory.max", "cgroup2"
        elif "memory" in controllers.split(","):
            base = cgroup_fs / "memory"
            if not base.is_dir():
                base = cgroup_fs / controllers
            limit_file, kind = "memory.limit_in_bytes", "cgroup1"
        else:
            continue
        node = Path(group.lstrip("/"))
        while True:  # this group, then every group above it, to the hierarchy's root
            value = _read_int(base / node / limit_file)
            if value is not None:
                found.append((value, f"{kind}:/{node.as_posix() if str(node) != '.' else ''}"))
            if str(node) in (".", ""):
                break
            node = node.parent
    return min(found, key=lambda f: f[0]) if found else None


def meminfo(proc: Path = Path("/proc")) -> dict[str, int]:
    """``/proc/meminfo`` in bytes (MemTotal, MemAvailable, ...); empty when unreadable."""
    out: dict[str, int] = {}
    try:
        lines = (proc / "meminfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            out[name] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return out


def rss_bytes(proc: Path = Path("/proc")) -> int:
    """This process's resident set (VmRSS), in bytes; 0 when the kernel does not publish it."""
    try:
        for line in (proc / "self" / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def derive(
    proc: Path = Path("/proc"),
    cgroup_fs: Path = Path("/sys/fs/cgroup"),
    environ: Mapping[str, str] = os.environ,
    baseline: int | None = None,
) -> Budget:
    """The budget for this process's brains, derived from what the system publishes (module docstring)."""
    baseline = rss_bytes(proc) if baseline is None else baseline
    info = meminfo(proc)
    limited = cgroup_limit(proc, cgroup_fs)
    total = info.get("MemTotal")
    if limited is not None and (total is None or limited[0] <= total):
        limit, source = limited
    elif total is not None:
        limit, source = total, "meminfo:MemTotal"
    else:
        limit, source = None, "none"
    available = info.get("MemAvailable")
    floored = False
    if limit is None:
        derived, floored = FLOOR_BYTES, True
        log.warning(
            "no memory limit is published here (no control-group limit, no /proc/meminfo): "
            "the pool budget is floored at %d bytes",
            FLOOR_BYTES,
        )
    else:
        room = limit - baseline
        if available is not None:
            room = min(room, available)
        derived = room - room // HELD_BACK
        if derived < FLOOR_BYTES:
            log.warning(
                "the derived pool budget %d bytes is below the floor; floored at %d bytes", derived, FLOOR_BYTES
            )
            derived, floored = FLOOR_BYTES, True
    budget = Budget(derived, source, limit, available, baseline, floored=floored)
    given = environ.get(OVERRIDE)
    if given:
        try:
            value = int(given)
        except ValueError:
            raise SystemExit(f"brainy serve: {OVERRIDE}={given!r}: expected a number of bytes") from None
        if value <= 0:
            raise SystemExit(f"brainy serve: {OVERRIDE}={given!r}: expected a positive number of bytes")
        log.info("pool budget %d bytes from %s replaces the derived %d bytes", value, OVERRIDE, derived)
        budget.budget_bytes, budget.overridden = value, True
    else:
        log.info(
            "pool budget %d bytes: limit %s bytes (%s), available %s bytes, baseline %d bytes, a fifth held back%s",
            budget.budget_bytes,
            limit,
            source,
            available,
            baseline,
            " (floored)" if floored else "",
        )
    return budget


# -- what a brain holds ------------------------------------------------------------------------------------


def mapped_bytes(roots: Iterable[Path], proc: Path = Path("/proc")) -> dict[Path, int]:
    """The resident pages of each store's mapped files, from ``/proc/self/smaps`` (the kernel walks page
    tables to answer it: read only when a close must be ranked)."""
    roots = [Path(os.path.realpath(r)) for r in roots]
    prefixes = [(str(r) + os.sep, r) for r in roots]
    held = {r: 0 for r in roots}
    try:
        text = (proc / "self" / "smaps").read_text()
    except OSError:
        return held
    current: Path | None = None
    for line in text.splitlines():
        first = line.split(None, 1)[0] if line else ""
        if "-" in first and not first.endswith(":"):  # a mapping's header line: its path is the sixth field
            parts = line.split(None, 5)
            path = parts[5] if len(parts) == 6 else ""
            current = next((root for prefix, root in prefixes if path.startswith(prefix)), None)
        elif current is not None and first == "Rss:":
            held[current] += int(line.split()[1]) * 1024
    return held


def _glibc_trim() -> Any:
    """glibc's ``malloc_trim``, or None elsewhere (musl, macOS): it hands the free pages at the top of the
    heap and inside its arenas back to the kernel, which freeing alone does not."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _glibc_trim()


def give_back() -> bool:
    """Return the allocator's free pages to the kernel (glibc only); answers whether it could ask."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


@dataclass
class Cadence:
    """How often one brain is asked for: its last door and the mean interval between doors."""

    last: float = field(default_factory=time.monotonic)
    mean: float | None = None

    def touch(self, now: float) -> None:
        # Pool.enter does the same inline (every door pays it): change both together.
        interval = now - self.last
        self.mean = interval if self.mean is None else 0.8 * self.mean + 0.2 * interval
        self.last = now

    def idle(self, now: float) -> float:
        return max(0.0, now - self.last)

    def window(self) -> float:
        """The idle window: this brain's own cadence, floored and capped."""
        if self.mean is None:
            return IDLE_FLOOR_SECONDS
        return min(IDLE_CAP_SECONDS, max(IDLE_FLOOR_SECONDS, IDLE_CADENCES * self.mean))

    def rate(self) -> float:
        """Doors per second, for the ranking (a brain asked for once counts as once a floor)."""
        return 1.0 / max(self.mean or IDLE_FLOOR_SECONDS, 1e-3)


# -- the arbiter -------------------------------------------------------------------------------------------


class Resident(Protocol):
    """A brain the pool holds, as the arbiter weighs it (the pool's ``Entry``)."""

    name: str
    path: Path
    handle: Any  # the open brain, or None while it is not resident
    in_flight: int
    cadence: Cadence


class Evicting(Protocol):
    """What the arbiter asks of the pool (``brainy/host/pool.py``): the residents, and to close one."""

    def resident_entries(self) -> Sequence[Resident]: ...

    def evict(self, entry: Any, why: str) -> bool: ...


class Arbiter:
    """Decides residency for one pool: a thread wakes every tick (and after each admission), closes the brains
    idle past their window, then, while the brains hold more than the budget, the best-ranked closable one."""

    def __init__(self, pool: Evicting, budget: Budget | None = None, proc: Path = Path("/proc")) -> None:
        self.pool = pool
        self.proc = proc
        self.budget = budget or derive(proc)
        self.over_budget_admissions = 0
        self.evictions = 0
        self._over_episode = False
        # the resident figure over what the brains count they hold, read at the resident figure's highest: a
        # new peak means the allocator had no freed memory left to reuse, so the excess there is real overhead
        # (allocator slack, the handles' untracked parts) that the counters miss
        self.scale = 1.0
        self._peak = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start ticking (the pool calls it at each admission); a stopped arbiter stays stopped."""
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, name="brainy-arbiter", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def admitted(self) -> None:
        """A brain was opened: look at the budget now rather than at the next tick."""
        self._wake.set()

    def held_bytes(self) -> int:
        return max(0, rss_bytes(self.proc) - self.budget.baseline_bytes)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(TICK_SECONDS)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.rebalance()
            except Exception:  # the arbiter keeps ticking; a failed close is the pool's to narrate
                log.exception("the residency pass failed")

    def rebalance(self) -> list[str]:
        """One pass: idle closes, then budget closes. Answers the names closed, in order."""
        now = time.monotonic()
        closed: list[str] = []
        for entry in self.pool.resident_entries():
            if entry.in_flight == 0 and entry.cadence.idle(now) > entry.cadence.window():
                if self.pool.evict(
                    entry, f"idle {entry.cadence.idle(now):.0f} s past its {entry.cadence.window():.0f} s window"
                ):
                    closed.append(entry.name)
        over = self.held_bytes() - self.budget.budget_bytes
        if over <= 0:
            self._over_episode = False
            self.evictions += len(closed)
            self._give_back(closed)
            return closed
        resident = self.pool.resident_entries()
        if len(resident) <= 1:  # the only open brain is never closed for budget: it would only reopen
            if resident and not self._over_episode:
                self._over_episode = True
                self.over_budget_admissions += 1
                log.warning(
                    "brain %s alone holds more than the budget (%d bytes over); kept open and serving",
                    resident[0].name,
                    over,
                )
            self.evictions += len(closed)
            self._give_back(closed)
            return closed
        shares = self.shares(resident)
        # what the brains hold, scaled to resident bytes: once it fits, the rest of the excess is memory the
        # allocator keeps for reuse after earlier closes, and closing more would free none
        held = over + self.budget.budget_bytes
        counted = sum(shares.values())
        if held > self._peak and counted > 0:
            self._peak, self.scale = held, min(SCALE_CAP, max(1.0, held / counted))
        shares = {name: int(share * self.scale) for name, share in shares.items()}
        holding = sum(shares.values())
        ranked = sorted(
            (e for e in resident if e.in_flight == 0),
            key=lambda e: e.cadence.idle(now) * max(shares[e.name], 1) / e.cadence.rate(),
            reverse=True,
        )
        left = len(resident)
        for entry in ranked:
            # not "until the excess is freed": the resident figure counts memory the allocator kept from
            # earlier closes, which the next admissions reuse; what must fit is what the brains hold
            if left <= 1 or holding <= self.budget.budget_bytes * LOW_WATER:
                break
            if self.pool.evict(entry, f"over budget by {over} bytes; it held {shares[entry.name]} bytes"):
                closed.append(entry.name)
                holding -= shares[entry.name]
                left -= 1
        if holding > self.budget.budget_bytes and left <= 1 and not self._over_episode:
            self._over_episode = True
            self.over_budget_admissions += 1
        self.evictions += len(closed)
        self._give_back(closed)
        return closed

    @staticmethod
    def _give_back(closed: list[str]) -> None:
        """After closes, hand the freed pages back: a few microseconds a trim (measured), and the resident figure
        then falls with what the closes freed rather than staying at its peak."""
        if closed:
            give_back()

    def shares(self, entries: Sequence[Resident]) -> dict[str, int]:
        """What each resident brain holds: its counters plus its files' resident pages."""
        mapped = mapped_bytes([e.path for e in entries], self.proc)
        out = {}
        for entry in entries:
            handle = entry.handle
            counters = footprint(handle) if handle is not None else 0
            out[entry.name] = counters + mapped.get(Path(os.path.realpath(entry.path)), 0)
        return out

    def report(self) -> dict[str, Any]:
        rss = rss_bytes(self.proc)
        b = self.budget
        return {
            "budgetBytes": b.budget_bytes,
            "derivation": b.derivation(rss),
            "floored": b.floored,
            "overridden": b.overridden,
            "heldBytes": max(0, rss - b.baseline_bytes),
            "overBudgetAdmissions": self.over_budget_admissions,
        }
