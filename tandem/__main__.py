"""`python -m tandem ...` is `tandem ...`, without relying on PATH (tests and scripts use it)."""

from tandem.client.cli import main

main()
