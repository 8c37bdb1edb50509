"""The replication audit: home and replica tables compared item by item, and the lag."""
