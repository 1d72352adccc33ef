"""Slack: the log sink, its transports and breaker, Block Kit, and the thread store."""
