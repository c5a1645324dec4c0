"""The person's side of the glewlwyd started by ciba/start.sh, for tests: logs in as the user through
glewlwyd's API, as its login page does, then acts. Python's standard library only.

    python3 user.py [--port P] [--home H] [--plugin oidc] [--user alice] [--password alice-password] COMMAND ...

    list                       print the user's pending CIBA requests (GET /api/PLUGIN/ciba_user_list), a JSON array
    approve [SELECT]           approve the newest pending request that matches: grant its scopes to its
                               client (PUT /api/auth/grant/CLIENT), then
                               GET /api/PLUGIN/ciba_user_check?user_req_id=…&g_continue
    deny [SELECT]              refuse it: GET /api/PLUGIN/ciba_user_check?user_req_id=…&cancel
        SELECT: --client-id C, --binding-message M (exact), --wait S (look for at most S seconds,
        every 0.2 s; default 10), --no-grant (approve without granting first)
    grant CLIENT_ID SCOPE...   the user's consent: PUT /api/auth/grant/CLIENT_ID {"scope": "S1 S2"}
    authorize URL [--no-grant] the browser step of the code flow: grant the URL's scope to its
                               client_id, open URL&g_continue and print the Location glewlwyd
                               redirects to (the client's redirect URI with code and state)
    set-ping-endpoint CLIENT_ID URL
                               as the administrator: set the client's
                               backchannel_client_notification_endpoint (where glewlwyd pings)

Defaults: --port $OAUTHFLOW_CIBA_PORT (8940), --home $OAUTHFLOW_CIBA_HOME (/tmp/oauthflow-ciba).
approve and deny print one JSON object, the request as listed plus "result", the ciba_message
glewlwyd ends on ("complete", "cancelled", "invalid", "not_found", "server_error"; null when it
sent the person back to its login page). Exit status: 0 when it did what was asked (approve:
"complete"; deny: "cancelled"), 1 when no pending request matched in time or the result differs,
2 on a usage or HTTP error.
"""

import argparse
import json
import os
import sys
import time
import urllib.parse

from glewlwyd_api import Server, Session, decode


def pending(session, plugin):
    status, _, body = session.request("GET", f"/api/{plugin}/ciba_user_list")
    if status != 200:
        raise SystemExit(f"ciba_user_list: HTTP {status} {body[:300]!r}")
    return decode(body)


def select(session, args):
    deadline = time.monotonic() + args.wait
    while True:
        for request in pending(session, args.plugin):
            if args.client_id is not None and request.get("client_id") != args.client_id:
                continue
            if args.binding_message is not None and request.get("binding_message") != args.binding_message:
                continue
            return request
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)


def grant(session, client_id, scopes):
    # Space-separated, though glewlwyd's API.md says commas: "openid,api" is one unknown scope (401).
    session.call("PUT", f"/auth/grant/{urllib.parse.quote(client_id, safe='')}", {"scope": " ".join(scopes)})


def ciba_message(location):
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(location or "").query)
    return query.get("ciba_message", [None])[0]


def answer(session, args, approve):
    request = select(session, args)
    if request is None:
        print(json.dumps({"result": None, "error": f"no pending request matched within {args.wait} s"}))
        return 1
    if approve and not args.no_grant:
        grant(session, request["client_id"], request.get("scopes") or ["openid"])
    suffix = "&g_continue" if approve else "&cancel"
    status, headers, body = session.request("GET", f"/api/{args.plugin}/ciba_user_check?user_req_id={urllib.parse.quote(request['user_req_id'])}{suffix}")
    if status != 302:
        raise SystemExit(f"ciba_user_check: HTTP {status} {body[:300]!r}")
    result = ciba_message(headers.get("Location"))
    print(json.dumps({**request, "result": result}))
    return 0 if result == ("complete" if approve else "cancelled") else 1


def authorize(session, args):
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(args.url).query)
    if not args.no_grant and "client_id" in query and "scope" in query:
        grant(session, query["client_id"][0], query["scope"][0].split())
    status, headers, body = session.request("GET", args.url + "&g_continue")
    location = headers.get("Location") if status == 302 else None
    if location is None:
        raise SystemExit(f"authorize: HTTP {status} {body[:300]!r}")
    print(location)
    # Glewlwyd sends the person back to its own login page when it wants more (a grant, a login).
    return 1 if urllib.parse.urlsplit(location).path.endswith("/login.html") else 0


def set_ping_endpoint(server, args):
    admin = Session(server, "admin", "password")
    client = admin.call("GET", f"/client/{urllib.parse.quote(args.client_id, safe='')}")
    client["backchannel_client_notification_endpoint"] = args.url
    admin.call("PUT", f"/client/{urllib.parse.quote(args.client_id, safe='')}", client)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", default=os.environ.get("OAUTHFLOW_CIBA_PORT", "8940"))
    parser.add_argument("--home", default=os.environ.get("OAUTHFLOW_CIBA_HOME", "/tmp/oauthflow-ciba"))
    parser.add_argument("--plugin", default="oidc")
    parser.add_argument("--user", default="alice")
    parser.add_argument("--password", default="alice-password")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list")
    for name in ("approve", "deny"):
        command = commands.add_parser(name)
        command.add_argument("--client-id")
        command.add_argument("--binding-message")
        command.add_argument("--wait", type=float, default=10.0)
        if name == "approve":
            command.add_argument("--no-grant", action="store_true")
    command = commands.add_parser("grant")
    command.add_argument("client_id")
    command.add_argument("scopes", nargs="+")
    command = commands.add_parser("authorize")
    command.add_argument("url")
    command.add_argument("--no-grant", action="store_true")
    command = commands.add_parser("set-ping-endpoint")
    command.add_argument("client_id")
    command.add_argument("url")
    args = parser.parse_args()

    server = Server(args.port, args.home)
    if args.command == "set-ping-endpoint":
        return set_ping_endpoint(server, args)
    session = Session(server, args.user, args.password)
    if args.command == "list":
        print(json.dumps(pending(session, args.plugin)))
        return 0
    if args.command == "grant":
        grant(session, args.client_id, args.scopes)
        return 0
    if args.command == "authorize":
        return authorize(session, args)
    return answer(session, args, approve=args.command == "approve")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit as exit:
        if isinstance(exit.code, str):
            print(f"user.py: {exit.code}", file=sys.stderr)
            sys.exit(2)
        raise
