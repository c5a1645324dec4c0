extension Authflow {
    /// The version `--version` prints: the file VERSION's, which scripts/package.sh reads
    /// (ReleaseTests fails when they differ).
    public static let version = "0.1.0"

    /// Every command, in the order `help` lists them: the one table `help`, the parser, the
    /// completions and the man page read (see ``CommandSpec`` for how to add one).
    static let commands: [CommandSpec] = [
        CommandSpec(
            "providers", usage: "[--config FILE] providers [--json]", synopsis: "providers [--json]",
            summary: "list configured providers and the grants each supports",
            about: "List the configured providers and the login methods each supports.",
            options: [OptionSpec("--json", "one JSON object per provider per line: id, grants, login (the default method), scopes")]),
        CommandSpec(
            "login",
            usage: "[--config FILE] [--store DIR] login PROVIDER|URL [--device | --browser | --paste | --client-credentials | --ciba] "
                + "[--scope S]... [--json] [--timeout SECONDS] [--qr | --no-qr] [--listen-port PORT] "
                + "[--login-hint VALUE | --id-token-hint TOKEN | --login-hint-token TOKEN] [--binding-message TEXT] "
                + "[--user-code CODE] [--requested-expiry SECONDS] [--resource URL] [--issuer ISSUER] "
                + "[--initial-access-token-file FILE] [--acr-values VALUES] [--max-age SECONDS]",
            synopsis: "login PROVIDER [--device | --browser | --paste | --client-credentials | --ciba] [--scope S]... [--json]",
            summary: "log in and store the tokens", positionalNames: ["PROVIDER"], positionals: 1...1, takesProvider: true,
            about: """
            Log in to PROVIDER and store its tokens.

            Without a flag, authflow uses the device grant when the provider has a device endpoint
            and no display is available (neither DISPLAY nor WAYLAND_DISPLAY is set), and the browser
            otherwise. A provider with a client secret and neither a redirectURI nor a device endpoint
            uses client credentials, unless it has a backchannelAuthenticationURL and a cibaLoginHint:
            then CIBA. When the browser login is chosen with no display, authflow says how to finish
            from another machine: --paste, or a forwarded --listen-port.

            Given a protected resource's URL instead (or PROVIDER --resource URL), authflow reads the
            resource's metadata (RFC 9728), the metadata of the authorization server it names,
            registers a client there (RFC 7591), adds {"id", "issuer", "resource",
            "registration": "dynamic"} to the catalog (the file it names), and logs in with the browser.
            A provider with "registration": "dynamic" registers its client at its first login; an
            expired client secret is registered again.
            """,
            options: [
                OptionSpec("--device", "RFC 8628 device authorization: prints a URL and a code to type",
                           "on any device, counts down, and polls until you approve"),
                OptionSpec("--browser", "authorization code + PKCE: prints the authorization URL (and",
                           "opens it with xdg-open when a display is present), then waits",
                           "for the redirect on a loopback address (RFC 8252)"),
                OptionSpec("--paste", "authorization code + PKCE with nothing listening: prints the",
                           "authorization URL; sign in on any device, then paste back the",
                           "address the browser ended on (its page may fail to load: that is",
                           "expected), or the code the provider's page shows; needs the",
                           "catalog's redirectURI"),
                OptionSpec("--client-credentials", "RFC 6749 §4.4, for a confidential client"),
                OptionSpec("--ciba", "OpenID Connect CIBA: the provider asks the person on their own device",
                           "(found by a hint); prints the binding message, counts down, and polls",
                           "until they answer; for a confidential client"),
                OptionSpec("--scope", value: "S", "request scope S instead of the provider's (repeatable)"),
                OptionSpec("--json", "JSON Lines on stdout, one object per state transition"),
                OptionSpec("--timeout", value: "SECONDS", "how long the browser login waits for its redirect, or --paste",
                           "for the pasted line (default 300)"),
                OptionSpec("--qr", "also draw the device login's link (with --paste, the authorization",
                           "URL) as a QR code on stderr, even when it would not be (by default:",
                           "when stderr is a terminal wide enough for it, and neither NO_COLOR",
                           "nor TERM=dumb is set; needs libqrencode)"),
                OptionSpec("--no-qr", "never draw the QR code"),
                OptionSpec("--listen-port", value: "PORT", "the browser login listens on PORT (the catalog redirectURI's",
                           "loopback host and path, else 127.0.0.1 and /callback) and sends",
                           "that redirect URI; implies --browser. For a browser on another",
                           "machine, run there: ssh -L PORT:127.0.0.1:PORT THIS-HOST"),
                OptionSpec("--login-hint", value: "VALUE", "CIBA: whom to ask, as the provider knows them (an e-mail address,",
                           "a phone number; Glewlwyd: {\"username\":\"alice\"}); default: the catalog's cibaLoginHint"),
                OptionSpec("--id-token-hint", value: "TOKEN", "CIBA: whom to ask, by an ID token the provider issued to this client"),
                OptionSpec("--login-hint-token", value: "TOKEN", "CIBA: whom to ask, by a token in the provider's own format"),
                OptionSpec("--binding-message", value: "TEXT", "CIBA: a short text shown here and on the person's device (at most",
                           "128 characters, no control characters; refused before anything is sent)"),
                OptionSpec("--user-code", value: "CODE", "CIBA: the person's user code, for providers that ask for one"),
                OptionSpec("--requested-expiry", value: "SECONDS", "CIBA: how long the request may wait for the person"),
                OptionSpec("--resource", value: "URL", "the protected resource to log in to (RFC 9728); PROVIDER is then",
                           "the id its catalog entry gets (default: the URL's host)"),
                OptionSpec("--issuer", value: "ISSUER", "with a resource: the authorization server to use, one it lists",
                           "(default: the first it lists)"),
                OptionSpec("--initial-access-token-file", value: "FILE",
                           "the initial access token a registration presents (RFC 7591 §3)"),
                OptionSpec("--acr-values", value: "VALUES", "ask for these authentication context classes (RFC 9470 step-up)"),
                OptionSpec("--max-age", value: "SECONDS", "ask for an authentication at most SECONDS old (RFC 9470 step-up)"),
            ],
            notes: """
            Ctrl-C cancels the login promptly, stores nothing, and exits 130; with --paste, the end
            of input (Ctrl-D) before a line exits 65 and stores nothing.
            """),
        CommandSpec(
            "token", usage: "[--config FILE] [--store DIR] token PROVIDER [--json] [--header] [--dpop-proof METHOD URL]",
            synopsis: "token PROVIDER [--json]",
            summary: "print a valid access token; refresh or re-fetch when needed", positionalNames: ["PROVIDER", "METHOD", "URL"],
            positionals: 1...3, takesProvider: true,
            about: """
            Print a valid access token for PROVIDER and a newline on stdout, nothing else.

            The stored token is used while valid; otherwise it is refreshed (or fetched again for
            client credentials) and stored. Everything but the token goes to stderr.
            """,
            options: [
                OptionSpec("--json", "one JSON object instead: access_token, token_type, expires_at, scopes"),
                OptionSpec("--header", "the header line instead: Authorization: Bearer <token>"),
                OptionSpec("--dpop-proof", label: "--dpop-proof METHOD URL",
                           "two header lines for one request instead: Authorization (Bearer or DPoP)",
                           "and, for a DPoP-bound token, a DPoP proof for METHOD URL (RFC 9449);",
                           "curl -H @- reads them: authflow token P --dpop-proof GET URL | curl -H @- URL"),
            ],
            optionWidth: 10,
            notes: """
            Example: curl -H "Authorization: Bearer $(authflow token github)" https://api.github.com/user
                 or: authflow token github --header | curl -H @- https://api.github.com/user
            """),
        CommandSpec(
            "status", usage: "[--config FILE] [--store DIR] status [PROVIDER] [--json]", synopsis: "status [PROVIDER] [--json]",
            summary: "what is stored: expiry, scopes, refreshable, needs login", positionalNames: ["PROVIDER"],
            positionals: 0...1, takesProvider: true,
            about: """
            Show what is stored, for PROVIDER or for every configured provider: expiry, scopes,
            whether a refresh token is held, and whether a new login is needed. Never a token.
            With PROVIDER, exits 77 when it has no usable authorization.
            """,
            options: [OptionSpec("--json", "one JSON object per provider per line")]),
        CommandSpec(
            "discover", usage: "discover ISSUER|URL [--id ID] [--client-id CLIENT_ID] [--json]", synopsis: "discover ISSUER|URL [--json]",
            summary: "fetch an issuer's or a resource's metadata and print a catalog entry for it", positionalNames: ["ISSUER"],
            positionals: 1...1,
            about: """
            Fetch ISSUER's metadata (OpenID Connect Discovery 1.0; RFC 8414 when there is no OpenID
            document) and print its endpoints, then a catalog entry to paste into providers.json:
            {"id", "issuer", "clientID"} — the endpoints are discovered again when the entry is used.
            Exits 65 when the document's issuer is not exactly ISSUER.

            When URL has no such metadata, it is taken as a protected resource: its metadata
            (RFC 9728; from its 401 challenge or the well-known URL), then the metadata of the first
            authorization server it lists, each step printed; nothing is registered. The entry is
            then {"id", "issuer", "resource", "registration": "dynamic"} when the server registers
            clients (RFC 7591), which authflow login registers at its first run.
            """,
            options: [
                OptionSpec("--id", value: "ID", "the entry's id (default: ISSUER's host, with ':' as '-')"),
                OptionSpec("--client-id", value: "ID", "the entry's clientID (default: YOUR-CLIENT-ID, to replace)"),
                OptionSpec("--json", "one JSON object: issuer, metadata (the document as sent), catalog_entry"),
            ],
            optionWidth: 21),
        CommandSpec(
            "userinfo", usage: "[--config FILE] [--store DIR] userinfo PROVIDER", synopsis: "userinfo PROVIDER",
            summary: "print the signed-in user's OpenID Connect claims as JSON", positionalNames: ["PROVIDER"], positionals: 1...1,
            takesProvider: true,
            about: """
            Print the OpenID Connect userinfo claims of PROVIDER's signed-in user as one JSON object
            on stdout (OpenID Connect Core §5.3). The access token is refreshed first when needed;
            when an ID token is held, the answer's sub must equal its sub.
            """),
        CommandSpec(
            "logout", usage: "[--config FILE] [--store DIR] logout PROVIDER [--local] [--unregister]", synopsis: "logout PROVIDER [--local]",
            summary: "revoke at the provider (when it can), then forget", positionalNames: ["PROVIDER"], positionals: 1...1,
            takesProvider: true,
            about: """
            Revoke PROVIDER's tokens at its revocation endpoint (RFC 7009), when it has one: the
            refresh token, then the access token. The tokens are deleted from the store in every
            case; when the provider did not confirm a revocation, authflow says which and exits
            with the status of the failure (69 unreachable, 75 temporary, 65 refused), since that
            token may stay valid at the provider until it expires.
            """,
            options: [
                OptionSpec("--local", "delete the stored tokens without contacting the provider"),
                OptionSpec("--unregister", "also delete the dynamically registered client at the server",
                           "(RFC 7592 §2.3) and its stored registration"),
            ],
            optionWidth: 10,
            notes: """
            With a postgresql:// store the entry is deleted for every process and machine that
            shares the database (each authflow run keeps no copy of its own), and a refresh in
            flight elsewhere cannot store the login again.
            """),
        CommandSpec(
            "request", usage: "[--config FILE] [--store DIR] request PROVIDER URL [--method M] [--data DATA] [--add-header H]...",
            synopsis: "request PROVIDER URL [--method M] [--data @FILE]",
            summary: "send one request with the provider's token and print the answer", positionalNames: ["PROVIDER", "URL"],
            positionals: 2...2, takesProvider: true,
            about: """
            Send one HTTP request to URL with PROVIDER's token (refreshed when due; a DPoP-bound token
            with a proof, RFC 9449) and print the answer's body on stdout; exit 0 for a 2xx answer.
            URL must be https:// (or http:// on loopback), on the origin of one of the provider's
            resources when it names any. A 401 invalid_token renews the token and sends once more.

            When the resource asks for more — insufficient_scope (RFC 6750 §3.1) or
            insufficient_user_authentication (RFC 9470) — it prints what was asked and the authflow
            login line that gets it, and exits 77. Another non-2xx answer exits 77 (401, 403), 75
            (429, 5xx) or 65, after printing the body.
            """,
            options: [
                OptionSpec("--method", value: "M", "the method (default GET, or POST with --data)"),
                OptionSpec("--data", value: "DATA", "the body: DATA itself, @FILE for a file's content, @- for stdin"),
                OptionSpec("--add-header", value: "H", "one more header, \"Name: value\" (repeatable); Content-Type defaults",
                           "to application/json with --data"),
            ],
            optionWidth: 14,
            notes: "Example: authflow request api https://api.example.com/v1/items --data @item.json"),
        CommandSpec(
            "git-credential", usage: "[--config FILE] [--store DIR] git-credential PROVIDER get|store|erase",
            synopsis: "git-credential PROVIDER ACTION", summary: "git's credential helper: a token as git's password",
            positionalNames: ["PROVIDER", "ACTION"], positionals: 2...2, takesProvider: true, positionalChoices: ["get", "store", "erase"],
            about: """
            Answer git's credential helper protocol (gitcredentials(7)) on stdin and stdout; git runs it:
              git config --global credential.https://HOST.helper '!authflow git-credential PROVIDER'

              get      username (the catalog's gitUsername, default oauth2) and password: a valid access
                       token, refreshed when due; nothing for a URL that is neither https nor loopback http
              erase    (git sends it when the server refused the token) renews the token now, so the
                       next get answers a new one; the login is kept
              store    accepted and ignored

            With nothing stored for a grant a person logs in to, it runs a login on the terminal when
            stderr is one (and GIT_TERMINAL_PROMPT is not 0); else it prints one line naming authflow
            login and exits 77. A grant no person logs in to fetches its token as token does.
            """),
        CommandSpec(
            "kube-credential", usage: "[--config FILE] [--store DIR] kube-credential PROVIDER",
            synopsis: "kube-credential PROVIDER", summary: "kubectl's exec credential plugin: an ExecCredential with a token",
            positionalNames: ["PROVIDER"], positionals: 1...1, takesProvider: true,
            about: """
            Print an ExecCredential (client.authentication.k8s.io) for kubectl's exec plugin: status.token,
            a valid access token refreshed when due, and status.expirationTimestamp (RFC 3339). The
            apiVersion is the one KUBERNETES_EXEC_INFO asks for (v1 or v1beta1), v1 without it. With
            nothing stored for a grant a person logs in to, it logs in on the terminal only when kubectl
            says interactive: true; otherwise it prints one line naming authflow login and exits 77.
            A grant no person logs in to fetches its token as token does.
            """),
        CommandSpec(
            "exec", usage: "[--config FILE] [--store DIR] exec PROVIDER[=NAME]... [--env NAME] -- COMMAND [ARGUMENT]...",
            synopsis: "exec PROVIDER [--env NAME] -- COMMAND...", summary: "run COMMAND with a valid token in its environment",
            positionalNames: ["PROVIDER[=NAME]"], positionals: 1...8, takesProvider: true,
            about: """
            Run COMMAND in place of authflow (execve: the same process, so its signals are COMMAND's and
            so is the exit status) with a valid access token of PROVIDER in its environment, as
            AUTHFLOW_TOKEN, or the NAME of --env; PROVIDER=NAME pairs (up to 8) put several tokens in
            several variables. COMMAND is looked up on PATH. The tokens come as token gets them (the
            agent, the store, a refresh), never on a command line.

            A DPoP-bound token is refused (exit 65): it is useless without its key and a proof for each
            request. With nothing stored for a grant a person logs in to, it exits 77 and COMMAND never
            runs; 127 when COMMAND is not found, 126 when it cannot be run.
            """,
            options: [OptionSpec("--env", value: "NAME", "the variable of PROVIDER's token (default AUTHFLOW_TOKEN)")],
            optionWidth: 12,
            notes: """
            An environment is never refreshed: a COMMAND that runs past the token's expiry should ask the
            agent's socket or read a token file the agent rewrites (authflow help agent).
            Example: authflow exec github=GH_TOKEN -- gh api /user
            """),
        CommandSpec(
            "docker-credential", usage: "[--config FILE] [--store DIR] docker-credential PROVIDER get|store|erase|list|version",
            synopsis: "docker-credential PROVIDER ACTION", summary: "Docker's credential helper: a token as a registry's password",
            positionalNames: ["PROVIDER", "ACTION"], positionals: 2...2, takesProvider: true,
            positionalChoices: ["get", "store", "erase", "list", "version"],
            about: """
            Answer Docker's credential-helper protocol on stdin and stdout. Installed as a link named
            docker-credential-authflow (the provider is then the one whose catalog entry lists the
            registry in "registries"), Docker runs it for the registries ~/.docker/config.json names:
              {"credHelpers": {"registry.example.com": "authflow"}}

              get      for a registry in PROVIDER's "registries": {"ServerURL","Username","Secret"}, the
                       catalog's registryUsername (default oauth2accesstoken) and a valid access token;
                       another server: credentials not found in native keychain (exit 1)
              list     the registries and their usernames, as a JSON object
              store    refused (exit 1): the token comes from the provider's login
              erase    refused (exit 1): authflow logout PROVIDER ends the login
              version  the helper's version

            A failure is one line on stdout, where Docker reads it, and the report on stderr. With nothing
            stored for a grant a person logs in to, get exits 77: run authflow login PROVIDER first.
            """),
        CommandSpec(
            "demo", usage: "demo", synopsis: "demo", summary: "the main job, end to end, offline, against an embedded provider",
            about: """
            Run the whole job offline against an embedded mock provider: a device login (pending,
            slow_down, then approval), a refresh, and a client-credentials grant, printing each state
            transition as it happens; then the status of the temporary store, which is removed at the
            end. Demo time passes only while the flow waits, 20× faster. No token is printed.
            """),
        CommandSpec(
            "agent",
            usage: "[--config FILE] [--store DIR] agent [--socket PATH] [--sink PROVIDER=FILE[,OPTIONS]]... "
                + "[--notify-command CMD] [--metrics-file FILE] [--client-timeout SECONDS] [--ciba-notification-listen ADDRESS:PORT]",
            synopsis: "agent [--socket PATH] [--sink P=FILE]... [--notify-command CMD] [--metrics-file FILE]",
            summary: "serve fresh tokens on a Unix socket and in files (a service)",
            about: """
            Run in the foreground as a service: keep every provider's token fresh before it is due, and
            serve tokens on a Unix socket, one JSON line in and one out (see Documentation/Agent.md):

              echo '{"v":1,"token":"github"}' | socat - UNIX-CONNECT:$XDG_RUNTIME_DIR/authflow/agent.sock

            'authflow token P' asks the agent first (AUTHFLOW_AGENT, or the default socket when it exists).
            Only the agent's own user is served, unless a provider's catalog entry lists more peers in
            "agentAllow": ["uid:1001", "group:billing"] (checked with SO_PEERCRED).
            """,
            options: [
                OptionSpec("--socket", value: "PATH", "the socket (default $XDG_RUNTIME_DIR/authflow/agent.sock, or",
                           "/run/authflow/agent.sock for root); systemd's socket (LISTEN_FDS) wins"),
                OptionSpec("--sink", value: "PROVIDER=FILE[,mode=0640][,owner=USER:GROUP][,format=raw|json|header]",
                           "rewrite FILE atomically after each refresh (repeatable); never",
                           "readable by others; raw: the token alone, json: an object,",
                           "header: \"Authorization: Bearer TOKEN\" for curl -H @FILE"),
                OptionSpec("--notify-command", value: "CMD", "when a login must be approved, run CMD with /bin/sh -c and",
                           "AUTHFLOW_PROVIDER, AUTHFLOW_VERIFICATION_URI,",
                           "AUTHFLOW_VERIFICATION_URI_COMPLETE, AUTHFLOW_USER_CODE,",
                           "AUTHFLOW_EXPIRES_AT, AUTHFLOW_EXPIRES_IN in its environment (a CIBA",
                           "login: AUTHFLOW_BINDING_MESSAGE instead of the URIs and the code)"),
                OptionSpec("--metrics-file", value: "FILE", "Prometheus text (node exporter's textfile collector), rewritten atomically"),
                OptionSpec("--client-timeout", value: "SECONDS",
                           "how long a client may take to send its line or read its answer (default 5)"),
                OptionSpec("--ciba-notification-listen", value: "ADDRESS:PORT",
                           "receive CIBA pings (ping mode) over HTTP on ADDRESS:PORT, such as",
                           "127.0.0.1:8443; register its URL (https, through a TLS proxy) as",
                           "the client's backchannel_client_notification_endpoint"),
            ],
            optionWidth: 24,
            notes: """
            Under systemd (Type=notify) it sends READY=1, STATUS=, RELOADING=1, STOPPING=1 and WATCHDOG=1,
            and reads the store key from the credential authflow-store-key (LoadCredential=). SIGHUP reloads
            the catalog; SIGTERM lets token requests in flight finish (up to 10 s) and exits 0.
            """),
        CommandSpec(
            "completion", usage: "[--config FILE] completion bash|zsh|fish | --provider-ids", synopsis: "completion SHELL",
            summary: "a completion script for bash, zsh or fish", positionalNames: ["SHELL"], positionals: 0...1,
            positionalChoices: ["bash", "zsh", "fish"],
            about: """
            Print a completion script for SHELL: commands, options and the provider ids of the catalog
            in use (read when you press Tab). Load it with:
              bash:  source <(authflow completion bash)
              zsh:   source <(authflow completion zsh)
              fish:  authflow completion fish | source
            """,
            options: [OptionSpec("--provider-ids", "print the catalog's provider ids, one a line (what the scripts run)")],
            optionWidth: 18),
        CommandSpec(
            "man", usage: "man", synopsis: "man", summary: "print the manual page (roff) made from this help",
            about: """
            Print authflow(1) in roff, from the same table as this help: read it with
            authflow man | man -l -, or install it with scripts/release-build.sh --install.
            """),
        CommandSpec(
            "help", usage: "help [COMMAND]", synopsis: "help [COMMAND]", summary: "this text, or a command's",
            positionalNames: ["COMMAND"], positionals: 0...1, about: "Show help for COMMAND, or the overview."),
    ]

    /// The options every command takes, in the order `help` lists them.
    static let globalOptions: [OptionSpec] = [
        OptionSpec("--config", value: "FILE", "the provider catalog (JSON; see Documentation/Catalog.md)"),
        OptionSpec("--store", value: "DIR", "the token store directory (created with mode 0700)"),
        OptionSpec("--store", value: "postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DB[?sslmode=…]", alternativeForm: true,
                   "a PostgreSQL fleet store shared by many machines (one refresh for all); needs",
                   "--store-key-file or --store-plaintext; the password may come from PGPASSWORD or ~/.pgpass"),
        OptionSpec("--store-plaintext", "let a database store keep entries unencrypted (no key)"),
        OptionSpec("--store-key-file", value: "FILE",
                   "encrypt the store's entries (AES-256-GCM) with the key in FILE: 32 random bytes,",
                   "raw or as 64 hex characters, mode 0600 (make one: umask 077; openssl rand -hex 32 > FILE)"),
        OptionSpec("--store-previous-key-file", value: "FILE", "an older key, still accepted for reading after a rotation (repeatable)"),
        OptionSpec("--help", short: "-h", "show help"),
        OptionSpec("--version", short: "-V", "show the version"),
    ]

    /// The environment variables `authflow` reads, as `help` lists them.
    static let environmentVariables: [(name: String, help: [String])] = [
        ("AUTHFLOW_CONFIG", ["the catalog when --config is not given; else $XDG_CONFIG_HOME/authflow/providers.json,",
                             "else ~/.config/authflow/providers.json"]),
        ("AUTHFLOW_STORE", ["the store (a directory or a postgresql:// URI) when --store is not given;",
                            "else $XDG_STATE_HOME/authflow, else ~/.local/state/authflow"]),
        ("PGPASSWORD, PGSERVICE, PGSSLMODE, …", ["read by libpq for a postgresql:// store, as libpq documents them"]),
        ("AUTHFLOW_STORE_KEY_FILE", ["the store key file when --store-key-file is not given; unset: entries are not encrypted"]),
        ("AUTHFLOW_CATALOG_STRICT", ["0: unknown catalog keys are ignored instead of refused"]),
        ("AUTHFLOW_AGENT", ["the agent socket 'token' asks first (off: never); unset: the default socket when it exists"]),
        ("AUTHFLOW_PROVIDER  AUTHFLOW_USER_CODE  AUTHFLOW_EXPIRES_AT  AUTHFLOW_EXPIRES_IN",
         ["set by 'agent' for its --notify-command: the login a person must approve (never a token)"]),
        ("AUTHFLOW_VERIFICATION_URI  AUTHFLOW_VERIFICATION_URI_COMPLETE", ["set by 'agent' for its --notify-command, as above"]),
        ("AUTHFLOW_BINDING_MESSAGE", ["set by 'agent' for its --notify-command: the binding message of a CIBA login"]),
        ("AUTHFLOW_DEBUG", ["set and not 0: the library's log lines (shapes, never secrets) go to stderr"]),
        ("DISPLAY, WAYLAND_DISPLAY", ["when either is set, login prefers the browser and opens it with xdg-open"]),
        ("NO_COLOR", ["when set, no colour"]),
        ("TERM", ["dumb: no colour, and (as with NO_COLOR) no QR code unless login --qr"]),
        ("COLUMNS", ["the terminal width when stderr's cannot be read (does the QR code fit)"]),
        ("GIT_TERMINAL_PROMPT", ["0: git-credential never logs in on the terminal"]),
        ("KUBERNETES_EXEC_INFO", ["set by kubectl: the ExecCredential apiVersion and whether kube-credential may prompt"]),
        ("AUTHFLOW_TOKEN", ["set by 'exec' for COMMAND: the token (unless --env or PROVIDER=NAME names another variable)"]),
    ]

    /// The table entry of `name`.
    static func command(_ name: String) -> CommandSpec? { commands.first { $0.name == name } }

    static func usageLine(_ command: String) -> String {
        "authflow " + (Self.command(command)?.usage ?? "[--config FILE] [--store DIR] <command> [arguments]")
    }

    /// The text of `authflow help [COMMAND]`.
    static func helpText(_ topic: String?) -> String {
        guard let topic else { return generalHelp }
        guard let spec = command(topic) else { return "usage: \(usageLine(topic))\n\nShow help for COMMAND, or the overview.\n" }
        var body = spec.about
        if !spec.options.isEmpty {
            let width = spec.optionWidth ?? max(8, (spec.options.map(\.displayLabel.count).max() ?? 0) + 4)
            body += "\n\n" + columns(spec.options.map { ($0.displayLabel, $0.help) }, width: width)
        }
        if let notes = spec.notes { body += "\n\n" + notes }
        return "usage: \(usageLine(topic))\n\n\(body)\n"
    }

    /// Two columns: each label indented by 2 and padded to `width`, its text beside it; a label
    /// too wide for the column stands on its own line, its text below. Lines end without a newline.
    static func columns(_ rows: [(label: String, text: [String])], width: Int) -> String {
        let indent = String(repeating: " ", count: 2 + width)
        return rows.map { label, text in
            var lines: [String] = []
            var rest = text[...]
            if label.count + 2 <= width, let first = rest.first {
                lines.append("  " + label + String(repeating: " ", count: width - label.count) + first)
                rest = rest.dropFirst()
            } else {
                lines.append("  " + label)
            }
            lines += rest.map { indent + $0 }
            return lines.joined(separator: "\n")
        }.joined(separator: "\n")
    }

    static var generalHelp: String {
        """
        authflow \(version): OAuth 2.0 logins and tokens for scripts and headless boxes.

        usage: \(usageLine(""))

        Commands:
        \(columns(commands.map { ($0.synopsis, [$0.summary]) }, width: 37))

        Options:
        \(columns(globalOptions.map { ($0.displayLabel, $0.help) }, width: 17))

        Environment:
        \(columns(environmentVariables.map { ($0.name, $0.help) }, width: 19))

        Exit codes:
        \(ExitCode.allCases.map { "  \($0)" }.joined(separator: "\n"))

        Run 'authflow help COMMAND' for a command's options. Tokens are printed only by 'token' and the
        credential helpers, and put in an environment only by 'exec'.

        """
    }
}
