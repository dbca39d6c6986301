"""What a run is configured with, below everything that reads it: the config's sections and fields (schema),
writing them back as TOML, which policy plays which agent, and how code named in a config is imported
(plug-ins, SetupError). Loading and checking a config file against the algorithms is `daemons/config`'s."""
