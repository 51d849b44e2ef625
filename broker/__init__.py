"""The PURE data-path core: topics, partitions, their logs' offsets and batch index (no asyncio, no I/O).

``broker.topics`` is the topic registry; ``broker.records`` the records the data path persists; ``broker.partitions``
the ``Broker``: Produce appends, Fetch and ListOffsets lookups, what becomes visible once durable.
"""
