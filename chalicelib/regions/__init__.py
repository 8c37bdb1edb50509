"""Regions: multi-region queues, replication and failover (docs/architecture.md
"Shards, clusters and regions").

Its layers, top to bottom:

- `clients`: regions opened for clients (a namespace per signed region, locally);
- `admin_api`: the admin view of regions and the rule a simulated failure must pass;
- `failover` (heartbeats, promotion, rejoining) and `replication` (`Replicator`: a home
  region's stream records applied to its replicas), over `backends` (`Backend`: one
  region's stores and repositories, as the runtime builds them);
- `replica` (stream records applied to a replica's table) and `resync` (a rejoining
  region's copy brought back in line);
- `reachability`: which regions are reachable (`RegionHealth`), read by every path into
  a region.
"""
