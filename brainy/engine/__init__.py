"""The store: fact log, memtable and tables, writer lease, and the write and read doors over them.

``brainy.engine`` never imports ``brainy.net``.
"""

from brainy.engine.brain import Brain
from brainy.store.directory import StoreExistsError, init_store

__all__ = ["Brain", "StoreExistsError", "init_store"]
