"""The session Spark of tests/spark and the headless Chromium of tests/browser, reused."""

from tests.browser.conftest import chromium
from tests.spark.conftest import spark

__all__ = ["chromium", "spark"]
