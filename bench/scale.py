"""DMQ at the scale people run a queue, each figure beside the same run at one queue or
one consumer, each against its target with PASS or FAIL.

    python -m bench.scale [--quick]

- Waiting consumers (`bench/waiting.py`): 1,000 consumers long-polling 1,000 queues and
  200 more on one queue, then a message for each; against one consumer on one queue.
- Queue operations (`bench/queue_ops.py`): ListQueues, GetQueueAttributes and CreateQueue
  with 10,000 queues in one account; against a server holding one queue.
- Many idle queues (`bench/many_queues.py`): idle store requests and CPU, a /metrics
  scrape and the console's queue list with 10,000 queues.
- A deep queue (`bench/deep_queue.py`): stop, restart, receive and GetQueueAttributes
  with a million messages in one queue, then a purge of it.
- Fair share at this size (`bench/tenant_scale.py`): with DMQ_AUTH=required, one tenant
  holding 1,000 long polls and 10,000 queues beside another tenant's SendMessage; its
  long polls and queues past its shares.

Each part starts servers of its own, one after the other, so they do not share the CPUs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from bench import deep_queue, many_queues, queue_ops, tenant_scale, waiting

FULL = {"queues": 10_000, "waiting": 1000, "shared": 200, "messages": 1_000_000}
QUICK = {"queues": 1000, "waiting": 100, "shared": 20, "messages": 20_000}


def main(argv: Sequence[str] | None = None) -> int:
    """Run every part and print its table."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    parser.add_argument("--parts", default="waiting,queue_ops,many_queues,deep_queue,tenants",
                        help="the parts to run, comma-separated")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    parts = set(args.parts.split(","))
    if "waiting" in parts:
        print(f"scale: {sizes['waiting']:,} waiting consumers and {sizes['shared']} more on "
              "one queue, then one consumer ...", flush=True)
        many = waiting.run(sizes["waiting"], sizes["shared"], 200.0)
        one = waiting.run(1, 0, 200.0)
        print("\n" + waiting.report(many, one) + "\n", flush=True)
    if "queue_ops" in parts:
        print(f"scale: queue operations with {sizes['queues']:,} queues in one account, "
              "then one ...", flush=True)
        with_many = queue_ops.measure(sizes["queues"])
        with_one = queue_ops.measure(1)
        print("\n" + queue_ops.report(with_many, with_one) + "\n", flush=True)
    if "many_queues" in parts:
        many_queues.main(["--queues", str(sizes["queues"])])
    if "deep_queue" in parts:
        deep_queue.main(["--messages", str(sizes["messages"])])
    if "tenants" in parts:
        tenant_scale.main(["--queues", str(sizes["queues"]), "--waits", str(sizes["waiting"])])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
