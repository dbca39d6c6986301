"""The supervisor: keeps a run's local daemons alive and answers `tandem status`."""
