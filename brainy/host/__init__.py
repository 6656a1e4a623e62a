"""The host floor: the brains one process serves, their residency, backups, archive and the host doors."""
