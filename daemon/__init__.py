"""The wiring: settings, the command line (``kgc``), and the app that starts the core, storage and servers."""

__version__ = "0.1.0"
