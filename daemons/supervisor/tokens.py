"""Start tokens: at most N daemons build their environments at once (a native library's heavy init, story 1)."""

from __future__ import annotations


class StartTokens:
    """Who holds a token now; a holder gives it back by leaving its build stages, exiting or being killed."""

    def __init__(self, limit: int):
        self.limit = limit
        self.holders: set[str] = set()

    def acquire(self, name: str) -> bool:
        if name in self.holders:
            return True
        if len(self.holders) >= self.limit:
            return False
        self.holders.add(name)
        return True

    def release(self, name: str) -> None:
        self.holders.discard(name)
