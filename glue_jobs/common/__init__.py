"""What the audit jobs share: the input schemas, readers, the lifecycle events and reports."""
