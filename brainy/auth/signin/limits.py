"""Rate limits for the sign-in: how many times one key (an email, a client) may knock in a window.

Sans-IO: every call is handed ``now``. A fixed window per key is enough here: the limits exist to keep
codes from being guessed or mailed in bulk, not to shape traffic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Keys held before expired windows are swept: an attacker choosing emails must not grow memory forever.
HELD = 10_000


@dataclass
class Limit:
    """At most ``count`` knocks per ``window`` seconds for each key."""

    count: int
    window: float
    _seen: dict[str, tuple[float, int]] = field(default_factory=dict)

    def allow(self, key: str, now: float) -> bool:
        """Count one knock by ``key``; False when it is over the limit (the knock is still counted)."""
        if len(self._seen) >= HELD:
            self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window}
            if len(self._seen) >= HELD:  # every window is live: refuse the newcomers rather than forget anyone
                return key in self._seen and self._seen[key][1] < self.count
        start, knocks = self._seen.get(key, (now, 0))
        if now - start >= self.window:
            start, knocks = now, 0
        self._seen[key] = (start, knocks + 1)
        return knocks < self.count
