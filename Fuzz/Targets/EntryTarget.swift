// entry: what the store reads back from disk — a stored entry (Storage/StoredEntry.swift decode)
// and an encrypted one (Storage/EntryEncryption.swift open) — plus seal/open round trips with a
// tampered byte chosen by the input.
import Foundation

enum EntryTarget {
    static let provider = "fuzz"
    static let encryption: EntryEncryption = {
        do { return EntryEncryption(key: try StoreKey(bytes: (0..<32).map { UInt8($0) })) } catch { fatalError("\(error)") }
    }()

    static func run(_ bytes: [UInt8]) {
        let data = Data(bytes)
        read(data)
        do {
            let plaintext = try encryption.open(data, providerID: provider)
            read(plaintext)
        } catch {
            checkStorage(error)
        }
        roundTrip(bytes)
    }

    /// A stored entry: a `.storage` error, or a token set that is written and read back unchanged.
    static func read(_ data: Data) {
        let set: TokenSet
        do {
            set = try StoredEntry.decode(data, key: provider)
        } catch {
            checkStorage(error)
            return
        }
        invariant(TokenSyntax.isAccessToken(set.accessToken.reveal()), "a stored access token with a forbidden character was read")
        _ = set.isExpired(at: fuzzNow, margin: 60)
        _ = String(reflecting: set.authorization)
        do {
            let again = try StoredEntry.decode(StoredEntry.encode(set), key: provider)
            invariant(again.authorization == set.authorization, "a stored entry re-written reads back different")
        } catch {
            invariant(false, "an entry the library read cannot be written and read again: \(error)")
        }
    }

    /// Sealing the input opens to the input; one flipped bit (when the first byte is odd) or another
    /// provider id makes it fail.
    static func roundTrip(_ bytes: [UInt8]) {
        do {
            var sealed = try encryption.seal(Data(bytes), providerID: provider)
            invariant(sealed.count == bytes.count + EntryEncryption.overhead, "a sealed entry of an unexpected size")
            invariant(EntryEncryption.keyID(of: sealed) == encryption.key.id, "a sealed entry names another key")
            do {
                _ = try encryption.open(sealed, providerID: "other")
                invariant(false, "an entry opened for another provider")
            } catch {
                checkStorage(error)
            }
            let tamper = bytes.first.map { $0 & 1 == 1 } ?? false
            if tamper, let first = bytes.first {
                let index = Int(first) * 7 % sealed.count
                sealed[index] ^= 1 << (first % 8)
            }
            do {
                let opened = try encryption.open(sealed, providerID: provider)
                invariant(!tamper, "a tampered entry opened")
                invariant(opened == Data(bytes), "an entry opened to other bytes")
            } catch {
                checkStorage(error)
                invariant(tamper, "an untampered entry failed to open: \(error)")
            }
        } catch {
            invariant(false, "sealing failed: \(error)")
        }
    }

    static func checkStorage(_ error: OAuthError) {
        checkShown(error)
        invariant(error.code == .storage, "a stored-entry problem is \(error.code), not .storage")
    }
}
