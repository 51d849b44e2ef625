"""The operator HTTP API (aiohttp): groups, offsets, history, actions, topics, health, metrics and the dashboard.

Public interface: ``create_http_app``, ``start_http`` / ``HttpServer.stop``, ``parse_listen``, the ``keys`` module
(typed ``web.AppKey``s), ``MemoryHistory`` (history kept from the record stream, for a record log without history
queries).
"""

from .app import HttpServer, create_http_app, parse_listen, start_http, stop_http
from .deps import CoreFacade, ReadyState, TopicRegistry
from .history import HistorySource, MemoryHistory

__all__ = [
    "CoreFacade",
    "HistorySource",
    "HttpServer",
    "MemoryHistory",
    "ReadyState",
    "TopicRegistry",
    "create_http_app",
    "parse_listen",
    "start_http",
    "stop_http",
]
