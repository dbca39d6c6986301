"""What every daemon process shares: logging, signals, heartbeats, the control channel, systemd notify."""
