"""The web console: queues with live counts and plots, message inspection, send, purge,
dead-letter redrive and the regions, as server-rendered HTML behind HTTP Basic auth."""
