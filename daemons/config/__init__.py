"""A run's configuration: the schema, loading with overrides and validation, and writing it back."""

from daemons.config.fields import ConfigError
from daemons.config.loader import apply_overrides, config_from_dict, load_config
from daemons.config.render import config_to_dict, render_toml
from daemons.config.schema import RunConfig

__all__ = ["ConfigError", "RunConfig", "apply_overrides", "config_from_dict", "config_to_dict", "load_config", "render_toml"]
