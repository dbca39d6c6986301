"""`python -m client ...` is `tandem ...` (how `tandem up` starts its daemons without relying on PATH)."""

from client.cli import main

main()
