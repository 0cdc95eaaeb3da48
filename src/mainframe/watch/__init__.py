"""The watcher (docs/watch.md): a checkpointed, 429-aware poller that turns a rate-limited
delivery-stats API into delivery-failure alerts. Missing is not zero."""
