"""Speedups: compiled modules, each with a pure-Python twin, picked once at import (STYLE rule 9).

``BRAINY_SPEEDUPS`` chooses for every speedup:

- ``auto`` (the default, also when the variable is empty): the compiled twin when it imports,
  else the pure one;
- ``cython``: the compiled twin, or ImportError saying it is not built;
- ``python``: the pure twin.

Any other value is a ValueError. The pick is made here, once; the rest of brainy imports the
chosen module from here (``from brainy._speedups import sstblock``) and ``picks`` reports which
twin each name got. Twins: ``brainy._speedups.<name>`` compiled from ``<name>.pyx``,
``brainy._speedups.<name>_py`` pure.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = [
    "CHOICES",
    "NAMES",
    "addrow",
    "cdc",
    "h1frame",
    "h2frame",
    "load",
    "memput",
    "mint",
    "mpread",
    "nesting",
    "pagerows",
    "picks",
    "postings",
    "ranking",
    "rowpost",
    "splice",
    "sstblock",
    "textjoin",
    "vecdecimal",
    "vecpack",
    "vecscan",
    "wirepack",
    "wsframe",
]

NAMES = (
    "sstblock",
    "h1frame",
    "postings",
    "cdc",
    "vecpack",
    "wsframe",
    "textjoin",
    "h2frame",
    "wirepack",
    "pagerows",
    "nesting",
    "ranking",
    "vecdecimal",
    "vecscan",
    "rowpost",
    "mint",
    "addrow",
    "memput",
    "splice",
    "mpread",
)  # setup.py's SPEEDUPS
CHOICES = ("auto", "cython", "python")


def load(name: str, which: str) -> ModuleType:
    """Import one twin of speedup ``name``: ``which`` is ``"cython"`` or ``"python"``.

    Tests use this to reach both twins whatever the facade picked; the facade's own pick stays
    in place.
    """
    if name not in NAMES:
        raise ValueError(f"unknown speedup {name!r}; known: {', '.join(NAMES)}")
    if which == "python":
        module_name = f"{__name__}.{name}_py"
    elif which == "cython":
        module_name = f"{__name__}.{name}"
    else:
        raise ValueError(f"which must be 'cython' or 'python', got {which!r}")
    # Importing the compiled submodule binds it as this package's attribute of the same name,
    # which is where the facade keeps its pick: put the pick back.
    picked = globals().get(name)
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        if which == "python":
            raise
        raise ImportError(
            f"brainy: the compiled speedup {module_name} is not built or does not load ({exc}); "
            f"build it with `pip install -e .` (needs Cython and a C compiler), "
            f"or set BRAINY_SPEEDUPS=auto or python"
        ) from exc
    finally:
        if picked is not None:
            globals()[name] = picked


def _mode() -> str:
    mode = os.environ.get("BRAINY_SPEEDUPS", "") or "auto"
    if mode not in CHOICES:
        raise ValueError(f"BRAINY_SPEEDUPS must be one of {', '.join(CHOICES)}; got {mode!r}")
    return mode


def _pick(name: str, mode: str) -> tuple[ModuleType, str]:
    if mode == "auto":
        try:
            return load(name, "cython"), "cython"
        except ImportError:
            return load(name, "python"), "python"
    return load(name, mode), mode


picks: dict[str, str] = {}
_mode_now = _mode()
for _name in NAMES:
    globals()[_name], picks[_name] = _pick(_name, _mode_now)
del _name, _mode_now

# Assigned by the loop above; named here for readers and type checkers.
sstblock: ModuleType
h1frame: ModuleType
postings: ModuleType
cdc: ModuleType
wsframe: ModuleType
textjoin: ModuleType
h2frame: ModuleType
wirepack: ModuleType
pagerows: ModuleType
nesting: ModuleType
ranking: ModuleType
vecdecimal: ModuleType
vecscan: ModuleType
rowpost: ModuleType
mint: ModuleType
addrow: ModuleType
memput: ModuleType
mpread: ModuleType
