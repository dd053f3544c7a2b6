"""debounce: webhook-ingesting debounce sync service (Notion, Slack → Postgres → documents)."""

__version__ = "0.1.0"
