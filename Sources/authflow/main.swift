import AuthflowCLI

// Synchronous on purpose: `authflow token` on a fresh cached token answers before the concurrency
// runtime starts; every other command runs in a task (see `Authflow.start()`).
Authflow.start()
