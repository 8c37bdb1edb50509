"""Usage and metering: what each request counts for, per account, queue, action, outcome
and minute (docs/observability.md "Usage records").

Its layers, top to bottom:

- `metering`: what one SQS request counts for (its queue, payload bytes and outcome);
- `records`: the usage records themselves (`UsageMeter`), counted in memory, flushed to
  their sink, and read by the console.
"""
