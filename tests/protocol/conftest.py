"""Hypothesis strategies for kio types it cannot derive by itself: ``Records`` (Produce and Fetch record bytes)."""

from __future__ import annotations

from hypothesis import strategies as st
from kio.static.primitive import Records

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))
