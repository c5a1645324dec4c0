import AuthflowCLI

// Synchronous on purpose: `authflow token` on a fresh cached token answers before the concurrency
// runtime starts; every other command runs on the main queue (see `Authflow.start()`).
Authflow.start()
