"""The doors floor: one module per door family, each registering its functions (docs/architecture.md)."""
