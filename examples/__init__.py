"""Runnable examples of applications on the daemon (not part of the installed package)."""
