"""`python -m client ...` is `tandem ...`, without relying on PATH (tests and scripts use it)."""

from client.cli import main

main()
