// json: the one JSON parser (JSON/JSONParser.swift) and the typed reads over it (JSON/JSONObject.swift).
import Foundation

enum JSONTarget {
    static func run(_ bytes: [UInt8]) {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes)
        } catch {
            invariant(error.line >= 1 && error.column >= 1, "a syntax error without a position")
            invariant(error.line <= bytes.count + 1, "a syntax error on a line past the end")
            return
        }
        // What the library writes (stored entries use the same writer) parses back to the same value.
        let text = value.jsonText
        guard let again = try? JSONValue.parse(Array(text.utf8)) else {
            invariant(false, "jsonText of a parsed value does not parse")
            return
        }
        invariant(again == value, "jsonText does not round-trip")
        _ = value.description
        var budget = 10_000
        walk(value, budget: &budget)
        if case .object(let members) = value { typedReads(members) }
    }

    /// Every accessor on every value: none may trap, and the numeric ones agree with each other.
    static func walk(_ value: JSONValue, budget: inout Int) {
        budget -= 1
        guard budget > 0 else { return }
        _ = value.kind
        _ = value.stringValue
        _ = value.boolValue
        _ = value.objectValue
        _ = value.arrayValue
        switch value {
        case .number(let text):
            let integer = value.integerValue
            let double = value.doubleValue
            if let integer {
                invariant(JSONValue.wholeNumber(text) == integer, "integerValue and wholeNumber disagree")
                if let double { invariant(abs(double - Double(integer)) <= max(1, abs(double) * 1e-15), "integerValue and doubleValue disagree") }
            }
            if let double { invariant(double.isFinite, "doubleValue is not finite") }
        case .array(let items):
            for item in items { walk(item, budget: &budget) }
        case .object(let members):
            for (_, member) in members { walk(member, budget: &budget) }
        default:
            break
        }
    }

    /// The reads every decoder uses, on every member: they throw typed errors or return in range.
    static func typedReads(_ members: [String: JSONValue]) {
        let object = JSONObject(members: members) { OAuthError(.invalidResponse, message: "fuzz: \($0)") }
        for key in members.keys.prefix(64) {
            let range = 0...Int(Int32.max)
            do {
                if let number = try object.integer(key, in: range, acceptsString: true) {
                    invariant(range.contains(number), "integer(in:) returned a number outside its range")
                }
            } catch { checkShown(error) }
            do { _ = try object.integer(key, in: Int.min...Int.max) } catch { checkShown(error) }
            do {
                if let date = try object.date(key) {
                    invariant((0...JSONObject.latestDate).contains(date.timeIntervalSince1970), "date() outside 1970...9999")
                }
            } catch { checkShown(error) }
            do { _ = try object.string(key) } catch { checkShown(error) }
            do { _ = try object.bool(key) } catch { checkShown(error) }
            do { _ = try object.strings(key) } catch { checkShown(error) }
            do { _ = try object.stringOrStrings(key) } catch { checkShown(error) }
            do { _ = try object.url(key) } catch { checkShown(error) }
            do { _ = try object.object(key) } catch { checkShown(error) }
        }
    }
}
