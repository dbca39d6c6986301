"""A run's configuration: the schema, loading with overrides and validation, and writing it back."""

from tandem.daemons.config.loader import apply_overrides, config_from_dict, load_config
from tandem.daemons.settings.fields import ConfigError
from tandem.daemons.settings.render import config_to_dict, render_toml
from tandem.daemons.settings.schema import RunConfig

__all__ = [
    "ConfigError",
    "RunConfig",
    "apply_overrides",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "render_toml",
]
