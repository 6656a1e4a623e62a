"""``brainy`` whose threads switch every microsecond instead of every 5 ms: races between the event loop's commits, the
fsync workers moving the durable head and the maintenance thread show within a bounded test run
(tests/test_write_concurrency.py)."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from brainy.cli import main

    sys.setswitchinterval(1e-6)
    sys.exit(main(sys.argv[1:]))
