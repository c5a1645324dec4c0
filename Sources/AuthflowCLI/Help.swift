extension Authflow {
    /// The version `--version` prints.
    public static let version = "0.1.0"

    static func usageLine(_ command: String) -> String {
        switch command {
        case "providers": return "authflow [--config FILE] providers [--json]"
        case "login":
            return "authflow [--config FILE] [--store DIR] login PROVIDER [--device | --browser | --client-credentials] "
                + "[--scope S]... [--json] [--timeout SECONDS]"
        case "token": return "authflow [--config FILE] [--store DIR] token PROVIDER [--json]"
        case "status": return "authflow [--config FILE] [--store DIR] status [PROVIDER] [--json]"
        case "logout": return "authflow [--config FILE] [--store DIR] logout PROVIDER [--local]"
        case "discover": return "authflow discover ISSUER [--id ID] [--client-id CLIENT_ID] [--json]"
        case "userinfo": return "authflow [--config FILE] [--store DIR] userinfo PROVIDER"
        case "demo": return "authflow demo"
        case "help": return "authflow help [COMMAND]"
        default: return "authflow [--config FILE] [--store DIR] <command> [arguments]"
        }
    }

    /// The text of `authflow help [COMMAND]`.
    static func helpText(_ topic: String?) -> String {
        guard let topic else { return generalHelp }
        let body: String
        switch topic {
        case "providers":
            body = """
            List the configured providers and the login methods each supports.

              --json    one JSON object per provider per line: id, grants, login (the default method), scopes
            """
        case "login":
            body = """
            Log in to PROVIDER and store its tokens.

            Without a flag, authflow uses the device grant when the provider has a device endpoint
            and no display is available (neither DISPLAY nor WAYLAND_DISPLAY is set), and the browser
            otherwise. A provider with a client secret and neither a redirectURI nor a device endpoint
            uses client credentials.

              --device                RFC 8628 device authorization: prints a URL and a code to type
                                      on any device, counts down, and polls until you approve
              --browser               authorization code + PKCE: prints the authorization URL (and
                                      opens it with xdg-open when a display is present), then waits
                                      for the redirect on a loopback address (RFC 8252)
              --client-credentials    RFC 6749 §4.4, for a confidential client
              --scope S               request scope S instead of the provider's (repeatable)
              --json                  JSON Lines on stdout, one object per state transition
              --timeout SECONDS       how long the browser login waits for its redirect (default 300)

            Ctrl-C cancels the login promptly, stores nothing, and exits 130.
            """
        case "token":
            body = """
            Print a valid access token for PROVIDER and a newline on stdout, nothing else.

            The stored token is used while valid; otherwise it is refreshed (or fetched again for
            client credentials) and stored. Everything but the token goes to stderr.

              --json    one JSON object instead: access_token, token_type, expires_at, scopes
              --dpop-proof METHOD URL
                        two header lines for one request instead: Authorization (Bearer or DPoP)
                        and, for a DPoP-bound token, a DPoP proof for METHOD URL (RFC 9449);
                        curl -H @- reads them: authflow token P --dpop-proof GET URL | curl -H @- URL

            Example: curl -H "Authorization: Bearer $(authflow token github)" https://api.github.com/user
            """
        case "status":
            body = """
            Show what is stored, for PROVIDER or for every configured provider: expiry, scopes,
            whether a refresh token is held, and whether a new login is needed. Never a token.
            With PROVIDER, exits 77 when it has no usable authorization.

              --json    one JSON object per provider per line
            """
        case "userinfo":
            body = """
            Print the OpenID Connect userinfo claims of PROVIDER's signed-in user as one JSON object
            on stdout (OpenID Connect Core §5.3). The access token is refreshed first when needed;
            when an ID token is held, the answer's sub must equal its sub.
            """
        case "logout":
            body = """
            Revoke PROVIDER's tokens at its revocation endpoint (RFC 7009), when it has one: the
            refresh token, then the access token. The tokens are deleted from the store in every
            case; when the provider did not confirm a revocation, authflow says which and exits
            with the status of the failure (69 unreachable, 75 temporary, 65 refused), since that
            token may stay valid at the provider until it expires.

              --local   delete the stored tokens without contacting the provider

            With a postgresql:// store the entry is deleted for every process and machine that
            shares the database (each authflow run keeps no copy of its own), and a refresh in
            flight elsewhere cannot store the login again.
            """
        case "discover":
            body = """
            Fetch ISSUER's metadata (OpenID Connect Discovery 1.0; RFC 8414 when there is no OpenID
            document) and print its endpoints, then a catalog entry to paste into providers.json:
            {"id", "issuer", "clientID"} — the endpoints are discovered again when the entry is used.
            Exits 65 when the document's issuer is not exactly ISSUER.

              --id ID              the entry's id (default: ISSUER's host, with ':' as '-')
              --client-id ID       the entry's clientID (default: YOUR-CLIENT-ID, to replace)
              --json               one JSON object: issuer, metadata (the document as sent), catalog_entry
            """
        case "demo":
            body = """
            Run the whole job offline against an embedded mock provider: a device login (pending,
            slow_down, then approval), a refresh, and a client-credentials grant, printing each state
            transition as it happens; then the status of the temporary store, which is removed at the
            end. Time runs 20× faster in the demo. No token is printed.
            """
        default:
            body = "Show help for COMMAND, or the overview."
        }
        return "usage: \(usageLine(topic))\n\n\(body)\n"
    }

    static var generalHelp: String {
        """
        authflow \(version): OAuth 2.0 logins and tokens for scripts and headless boxes.

        usage: \(usageLine(""))

        Commands:
          providers [--json]                   list configured providers and the grants each supports
          login PROVIDER [--device | --browser | --client-credentials] [--scope S]... [--json]
                                               log in and store the tokens
          token PROVIDER [--json]              print a valid access token; refresh or re-fetch when needed
          status [PROVIDER] [--json]           what is stored: expiry, scopes, refreshable, needs login
          discover ISSUER [--json]             fetch an issuer's metadata and print a catalog entry for it
          userinfo PROVIDER                    print the signed-in user's OpenID Connect claims as JSON
          logout PROVIDER [--local]            revoke at the provider (when it can), then forget
          demo                                 the main job, end to end, offline, against an embedded provider
          help [COMMAND]                       this text, or a command's

        Options:
          --config FILE    the provider catalog (JSON; see Documentation/Catalog.md)
          --store DIR      the token store directory (created with mode 0700)
          --store postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DB[?sslmode=…]
                           a PostgreSQL fleet store shared by many machines (one refresh for all); needs
                           --store-key-file or --store-plaintext; the password may come from PGPASSWORD or ~/.pgpass
          --store-plaintext
                           let a database store keep entries unencrypted (no key)
          --store-key-file FILE
                           encrypt the store's entries (AES-256-GCM) with the key in FILE: 32 random bytes,
                           raw or as 64 hex characters, mode 0600 (make one: umask 077; openssl rand -hex 32 > FILE)
          --store-previous-key-file FILE
                           an older key, still accepted for reading after a rotation (repeatable)
          -h, --help       show help
          -V, --version    show the version

        Environment:
          AUTHFLOW_CONFIG    the catalog when --config is not given; else $XDG_CONFIG_HOME/authflow/providers.json,
                             else ~/.config/authflow/providers.json
          AUTHFLOW_STORE     the store (a directory or a postgresql:// URI) when --store is not given;
                             else $XDG_STATE_HOME/authflow, else ~/.local/state/authflow
          PGPASSWORD, PGSERVICE, PGSSLMODE, …
                             read by libpq for a postgresql:// store, as libpq documents them
          AUTHFLOW_STORE_KEY_FILE
                             the store key file when --store-key-file is not given; unset: entries are not encrypted
          AUTHFLOW_CATALOG_STRICT
                             0: unknown catalog keys are ignored instead of refused
          AUTHFLOW_DEBUG     set and not 0: the library's log lines (shapes, never secrets) go to stderr
          DISPLAY, WAYLAND_DISPLAY
                             when either is set, login prefers the browser and opens it with xdg-open
          NO_COLOR           when set, no colour

        Exit codes:
        \(ExitCode.allCases.map { "  \($0)" }.joined(separator: "\n"))

        Run 'authflow help COMMAND' for a command's options. Tokens are printed only by 'token'.

        """
    }
}
