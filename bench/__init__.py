"""Benchmarks of debounce: ``python -m bench [--quick]``. Programs that print figures (one JSON
object per line), never timed assertions in tests. See docs/benchmarks.md."""
