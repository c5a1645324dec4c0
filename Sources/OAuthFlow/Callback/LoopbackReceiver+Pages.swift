// The pages the receiver shows the browser.
extension LoopbackReceiver {
    static func page(title: String, text: String) -> String {
        """
        <!doctype html>
        <html><head><meta charset="utf-8"><title>\(escapeHTML(title))</title>
        <style>body{font-family:system-ui,sans-serif;margin:4em auto;max-width:32em;line-height:1.5}</style></head>
        <body><h1>\(escapeHTML(title))</h1><p>\(escapeHTML(text))</p></body></html>

        """
    }

    /// A sentence for the browser: the error's code and description, never a secret.
    static func explain(_ error: OAuthError) -> String {
        var text = "The sign-in did not complete (\(error.code))"
        if let response = error.response {
            text += ": \(response.code.rawValue)"
            if let detail = response.errorDescription { text += " — \(detail)" }
        } else if let message = error.message {
            text += ": \(message)"
        }
        return text + ". Return to the terminal for details."
    }

    static func escapeHTML(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}
