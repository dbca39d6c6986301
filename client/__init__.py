"""The command-line surface: the `tandem` CLI and its display; light imports, daemons do the work."""
