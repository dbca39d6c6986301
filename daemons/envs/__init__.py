"""Environments: gymnasium envs and PettingZoo worlds, built from config and stepped in batches."""
