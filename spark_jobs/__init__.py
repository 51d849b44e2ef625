"""Spark reports on the coordinator's stored rebalance history and offset-commit log.

``extract -> transform -> load``: ``extract`` reads the daemon's tables (JDBC or a Parquet export) into the canonical
DataFrames of ``schema``; the metric modules (``timeline``, ``rebalances``, ``assignments``, ``commits``) are pure
DataFrame-in/DataFrame-out functions; ``load`` writes Parquet tables, a JSON summary and an HTML report. This package
imports nothing from the daemon (``coordinator``, ``storage``, ``protocol``): the stored tables are the contract.
"""
