"""What a user or operator runs: the `tandem` CLI, the status client, the Python API."""
