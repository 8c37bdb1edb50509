"""The usage report: requests, bytes and billing units per account and queue."""
