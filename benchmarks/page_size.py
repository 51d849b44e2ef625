"""SQLite page size against the data path and the commits: per page size a fresh daemon and database
(``storage.sqlite_page_size``), alternating: closed-loop produce of 1 KiB x 16 and 100 KiB x 1 batches, then the
commit benchmark (64 groups x 4 partitions) at 5,000/s and closed-loop.

    python -m benchmarks.page_size [--pages 4096,65536] [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import data_path, data_raw, run, servers
from benchmarks.load import Options


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", default="4096,65536")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="kgc-page-"))
    servers.pin_self_to_load_core()
    for k in range(args.rounds):
        for page in (int(p) for p in args.pages.split(",")):
            os.environ["KGC_STORAGE__SQLITE_PAGE_SIZE"] = str(page)  # the daemon inherits the environment
            daemon = data_path.Daemon(work, f"p{page}-{k}", None, [])
            srv = daemon.start()
            try:
                for size, per_batch in ((1024, 16), (102_400, 1)):
                    produced = asyncio.run(
                        data_raw.produce(
                            srv.port, "bench", data_path.PARTITIONS, size=size, per_batch=per_batch, seconds=4.0,
                            warmup=1.0,
                        )
                    )  # fmt: skip
                    row = {"page": page, "round": k, "kind": f"produce {size}", **produced.as_dict()}
                    print(row, flush=True)
                    out.append(row)
                for rate in (5000, 0):
                    opts = Options(
                        "commit", port=srv.port, groups=64, members=1, partitions=4, rate=float(rate), duration=5.0,
                        warmup=1.5, connections=8, window=8, tag=f"p{page}-{k}-{rate}-",
                    )  # fmt: skip
                    r = run._load(opts, f"commit {'max' if rate == 0 else rate} page {page} round {k}")
                    out.append({"page": page, "round": k, "kind": f"commit {rate or 'max'}", **r})
            finally:
                daemon.stop()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
