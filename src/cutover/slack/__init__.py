"""Slack: the log sink (`sink`), how a milestone reads (`blocks`), the webhook and bot transports
(`transports`), the circuit breaker (`breaker`), and the thread store on the Service's Lease (`threads`)."""

QUIET = "_notify_internal"  # marks this package's own log lines so they are never sent back to Slack
