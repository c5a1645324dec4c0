internal import CLibPQ

/// The parts of a connection string that name a store, parsed by libpq itself.
struct ConnectionInfo: Sendable {
    /// `postgresql://user@host:port/db` (`postgresql:///db` for the default Unix socket, with
    /// `?service=…` when a service names it), never with a password.
    let name: String
    /// The passwords to redact: the string's own and `$PGPASSWORD`.
    let redactor: Redactor

    /// Parses `conninfo` with `PQconninfoParse` when it is a connection string (a URI, or
    /// `key=value` pairs: it holds `=`), else takes it as a database name, as libpq does; nil when
    /// libpq rejects it.
    init?(_ conninfo: String, environment: [String: String], lib: LibPQ) {
        var fields: [String: String] = [:]
        let isConnectionString = conninfo.hasPrefix("postgresql://") || conninfo.hasPrefix("postgres://") || conninfo.contains("=")
        if isConnectionString {
            let parsed: [String: String]? = lib.call { pq in
                var errorMessage: UnsafeMutablePointer<CChar>?
                guard let options = pq.conninfoParse(conninfo, &errorMessage) else {
                    if let errorMessage { pq.freemem(errorMessage) }
                    return nil
                }
                defer { pq.conninfoFree(options) }
                var fields: [String: String] = [:]
                var index = 0
                while let keyword = options[index].keyword {
                    if let value = options[index].val { fields[String(cString: keyword)] = String(cString: value) }
                    index += 1
                }
                return fields
            }
            guard let parsed else { return nil }
            fields = parsed
        } else {
            guard !conninfo.isEmpty else { return nil }
            fields["dbname"] = conninfo
        }
        let redactor = Redactor([fields["password"], environment["PGPASSWORD"]])
        var name = "postgresql://"
        if let user = fields["user"] ?? environment["PGUSER"] { name += "\(user)@" }
        // No host: libpq's default (the Unix socket), written as the URI form does (postgresql:///db).
        // A host list pairs with a port list (or one port for all), as in a multi-host URI.
        let hosts = (fields["host"] ?? fields["hostaddr"] ?? environment["PGHOST"] ?? environment["PGHOSTADDR"] ?? "")
            .split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let ports = (fields["port"] ?? environment["PGPORT"])?.split(separator: ",", omittingEmptySubsequences: false).map(String.init) ?? []
        name += hosts.enumerated().map { index, host in
            var part = host.contains(":") ? "[\(host)]" : host
            let port = ports.count == hosts.count ? ports[index] : ports.count == 1 ? ports[0] : ""
            if !port.isEmpty { part += ":\(port)" }
            return part
        }.joined(separator: ",")
        name += "/\(fields["dbname"] ?? environment["PGDATABASE"] ?? "")"
        if let service = fields["service"] ?? environment["PGSERVICE"] { name += "?service=\(service)" }
        self.name = redactor.clean(name)
        self.redactor = redactor
    }
}
