"""The operator's reads and actions: dead letters and their causes, redrive, revocation,
listings, the overview, queues, activity, retention."""
