"""The plan's `notify:` section: where Slack hears of the cutover, and from which level on."""

from __future__ import annotations

from cutover.plan.field import Field
from cutover.plan.model import LOG_LEVELS, Slack
from cutover.plan.secrets import secret_file


def read_notify(node: Field) -> Slack | None:
    if node.value is None:
        return None
    node.mapping(("slack",))
    slack = node.child("slack")
    if slack.value is None:
        return None
    slack.mapping(("webhookFile", "botTokenFile", "channel", "minLevel"))
    if slack.present("botTokenFile") and not slack.present("channel"):
        raise slack.child("channel").fail("a channel id (required with botTokenFile)")
    if slack.present("webhookFile") and slack.present("botTokenFile"):
        raise slack.fail("either webhookFile or botTokenFile with channel, not both")
    return Slack(
        webhook_file=secret_file(slack.child("webhookFile"), "slack", "webhook"),
        bot_token_file=secret_file(slack.child("botTokenFile"), "slack", "token"),
        channel=slack.child("channel").string() if slack.present("channel") else None,
        min_level=slack.child("minLevel").string(default="info", choices=LOG_LEVELS),
    )
