"""What streams to the device: data sources, per-shard ``beta``, and the prefetching feed."""
