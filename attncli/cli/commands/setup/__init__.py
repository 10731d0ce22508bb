"""The commands that set attncli up: pull (the models it can fetch, and the README's samples),
config (the settings file, the default model) and doctor (what this install has)."""

from attncli.cli.commands.setup import config, doctor, pull

__all__ = ["config", "doctor", "pull"]
