"""The `dmq` subcommands, one module per group; each has `register(subparsers)`."""
