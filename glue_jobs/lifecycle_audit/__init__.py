"""The lifecycle audit: every message's life from the stream archive, checked for loss."""
