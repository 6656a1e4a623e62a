"""The store floor: fact log, memtable, tables, manifest, lease, blobs, checksums (docs/architecture.md)."""
