"""Local stand-ins of the Notion and Slack Web APIs, speaking their documented shapes.

The tests run the real ``notion-client`` and ``slack-sdk`` against them on loopback, and
``debounce serve --demo`` starts them so a newcomer's first run ends with real documents
without any token. They are not mocks of the SDKs: they are HTTP servers.
"""
