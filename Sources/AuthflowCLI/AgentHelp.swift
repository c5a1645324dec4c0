extension Authflow {
    static let agentUsage = "authflow [--config FILE] [--store DIR] agent [--socket PATH] [--sink PROVIDER=FILE[,OPTIONS]]... "
        + "[--notify-command CMD] [--metrics-file FILE] [--client-timeout SECONDS]"

    static let agentHelp = """
    Run in the foreground as a service: keep every provider's token fresh before it is due, and
    serve tokens on a Unix socket, one JSON line in and one out (see Documentation/Agent.md):

      echo '{"v":1,"token":"github"}' | socat - UNIX-CONNECT:$XDG_RUNTIME_DIR/authflow/agent.sock

    'authflow token P' asks the agent first (AUTHFLOW_AGENT, or the default socket when it exists).
    Only the agent's own user is served, unless a provider's catalog entry lists more peers in
    "agentAllow": ["uid:1001", "group:billing"] (checked with SO_PEERCRED).

      --socket PATH           the socket (default $XDG_RUNTIME_DIR/authflow/agent.sock, or
                              /run/authflow/agent.sock for root); systemd's socket (LISTEN_FDS) wins
      --sink PROVIDER=FILE[,mode=0640][,owner=USER:GROUP][,format=raw|json|header]
                              rewrite FILE atomically after each refresh (repeatable); never
                              readable by others; raw: the token alone, json: an object,
                              header: "Authorization: Bearer TOKEN" for curl -H @FILE
      --notify-command CMD    when a login must be approved, run CMD with /bin/sh -c and
                              AUTHFLOW_PROVIDER, AUTHFLOW_VERIFICATION_URI,
                              AUTHFLOW_VERIFICATION_URI_COMPLETE, AUTHFLOW_USER_CODE,
                              AUTHFLOW_EXPIRES_AT, AUTHFLOW_EXPIRES_IN in its environment
      --metrics-file FILE     Prometheus text (node exporter's textfile collector), rewritten atomically
      --client-timeout SECONDS
                              how long a client may take to send its line or read its answer (default 5)

    Under systemd (Type=notify) it sends READY=1, STATUS=, RELOADING=1, STOPPING=1 and WATCHDOG=1,
    and reads the store key from the credential authflow-store-key (LoadCredential=). SIGHUP reloads
    the catalog; SIGTERM lets token requests in flight finish (up to 10 s) and exits 0.
    """
}
