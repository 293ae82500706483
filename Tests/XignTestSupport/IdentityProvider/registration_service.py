#!/usr/bin/env python3
"""An organization's registration service for xign's custom API identity provider, as an administrator writes one:
it takes the manager's bearer token, and answers each step. Usage: registration_service.py PORT (token on stdin).

init:   "employee 42" continues ("Type the code HR sent to employee 42"); anything else is refused
finish: "314159" after that init, or "badge 7" in one step, is accepted with the person's claims; else refused
"""
import http.server
import json
import sys

TOKEN = sys.stdin.readline().strip()
STARTED = set()


class Service(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.answer(401, {"error": "who are you?"})
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        step, data, registration = request.get("step"), request.get("data"), request.get("registrationId")
        if step == "init":
            if data == "employee 42":
                STARTED.add(registration)
                return self.answer(200, {"status": "continue", "info": "Type the code HR sent to employee 42"})
            return self.answer(200, {"status": "refuse", "message": "no such employee"})
        if step == "finish" and data == "314159" and registration in STARTED:
            return self.answer(200, {"status": "accept", "info": "Welcome, employee 42",
                                     "claims": {"email": "emp42@example.org", "login": "emp42", "groups": ["staff"]}})
        if step == "finish" and data == "badge 7":
            return self.answer(200, {"status": "accept", "claims": {"email": "badge7@example.org", "groups": "web-admins"}})
        if step == "finish" and data == "garbled":
            return self.answer(200, {"status": "maybe"})
        return self.answer(200, {"status": "refuse", "message": "wrong code"})

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *arguments):
        pass


http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Service).serve_forever()
