"""The contract: the one table of doors and refusals every surface is generated from."""
