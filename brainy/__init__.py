"""brainy: a knowledge store for AI agents and the services around them."""

__version__ = "0.1.0"
