"""The daemon's wiring: the [topics] auto-creation settings reach the server's registry, and /metrics shows them."""

from __future__ import annotations

from daemon.app import App
from daemon.settings import load_settings


async def test_topic_settings_and_metrics_are_wired() -> None:
    settings = load_settings(
        None,
        topics={"initial": {"orders": 3}, "auto_create_max_per_request": 7, "auto_create_max_topics": 50},
    )
    app = App(settings)
    assert app.services.topics is app.topics
    assert app.topics.get("orders") is not None
    text = app.metrics.render().decode()
    assert "kgc_topics 2.0" in text  # orders and __consumer_offsets (Kafka's GlobalTopicCount counts it too)
    assert 'kgc_topics_auto_create_limit{limit="max_per_request"} 7.0' in text
    assert 'kgc_topics_auto_create_limit{limit="max_topics"} 50.0' in text
