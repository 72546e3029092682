"""Providers that speak another's wire protocol, each one description (see `registry.py`)."""
