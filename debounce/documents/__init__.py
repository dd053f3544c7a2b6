"""What leaves debounce: the documents and everything a consumer reads of them.

:mod:`.store` writes ``documents`` (the syncers' :class:`~debounce.contract.DocumentWriter`,
fenced by the claim); :mod:`.feed` is the gap-free change feed those writes append to, and
:mod:`.feed_listen` the one frontier poll per process that wakes its long-polls;
:mod:`.audiences` says who may read each document. The contract for consumers is
docs/consumers.md.
"""
