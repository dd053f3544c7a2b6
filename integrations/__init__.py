"""debounce's built-in sources, one package each (``notion``, ``slack``). Each exposes its
:class:`~debounce.contract.Source` as ``SOURCE`` and joins the service's registry
(:mod:`debounce.registry`) through an entry point in ``pyproject.toml``, as a third-party
source does; a source imports only :mod:`debounce.contract`."""
