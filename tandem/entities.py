"""What an env with entity observations declares its action heads with (docs/guides/entities.md):

    from tandem.entities import PerEntity, SelectEntity

Observations are a gymnasium Dict of `Sequence(Box(shape=(F,)), stack=True)` entity types beside an optional
`global` Box; actions a Dict of heads: `PerEntity`, `SelectEntity` and `Discrete`.
"""

from tandem.daemons.envs.entity_actions import PerEntity, SelectEntity
from tandem.daemons.envs.entity_env import NO_ACTION

__all__ = ["NO_ACTION", "PerEntity", "SelectEntity"]
