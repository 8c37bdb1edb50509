"""The Chalice handlers of DMQ, one blueprint per capability, which app.py registers: the
SQS protocols (`sqs_routes`), the admin API (`admin_routes`), the web console
(`console_routes`), the DynamoDB stream handlers (`streams`) and the schedules
(`schedules`). `container` holds what they share."""
