"""Non-blocking retries: a main topic, retry topics with growing delays, a dead-letter topic (README.md)."""

from examples.retry_topics.retry import (
    DEFAULT_DELAYS_MS,
    Attempt,
    Ladder,
    PermanentError,
    RetryWorker,
)

__all__ = ["DEFAULT_DELAYS_MS", "Attempt", "Ladder", "PermanentError", "RetryWorker"]
